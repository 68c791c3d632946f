"""The tick timer: proposes a TICK to each owned markers partition that has something due.

A timer may not change tables (FAUST.md), so it only writes a TICK record to
the partition; the markers agent decides when it reaches it. Idle partitions
get a TICK every ``idle_tick_ms`` so their clock keeps moving. When to propose
one, also while others are on their way: ``kmq.protocol.tick_proposals``.
"""

from __future__ import annotations

from agents.runtime import runtime
from app import app, settings
from app.topics import markers_topic
from kmq.protocol import marker_codec
from kmq.protocol import markers as M


@app.timer(interval=settings.tick_interval_ms / 1000.0, name="propose_ticks")
async def propose_ticks() -> None:
    rt = runtime()
    owned = rt.owned
    actives = {tp.partition for tp in app.assignor.assigned_actives()
               if tp.topic == settings.markers_topic}
    for p in list(owned):
        if p not in actives:
            del owned[p]  # revoked: its state moved to another worker
    rt.dispatcher.owned(actives)
    for p in actives:
        part = owned.get_or_create(p)
        now_ms = part.clock.now_ms()
        if part.ticks.propose(now_ms, part.next_deadline_ms, settings.idle_tick_ms):
            await markers_topic.send(value=marker_codec.encode([M.Tick(now_ms)]), partition=p)
