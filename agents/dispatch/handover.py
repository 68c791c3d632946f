"""Shared -> partition mode: where the dispatcher stopped, written for the queue's new group.

A queue switched to partition mode is marked ``handover_pending``; the dispatcher of its
markers partition stops handing it out, waits until its ACQUIREs and lane writes are
acknowledged, and writes ``handover`` (per partition, where it stopped) to the queue's
settings (docs/shared-queues.md, "Changing the mode at run time"). Runs on the
dispatcher's thread.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from agents.dispatch import modes
from agents.dispatch.epochs import Epochs
from agents.dispatch.lanes import LaneWriter
from kmq.ops.config_update import latest_config, write_reconciled
from kmq.ops.queues_topic import QueueConfigs
from kmq.protocol.placement import markers_partition, queue_partitions
from kmq.settings import Settings

log = logging.getLogger("kmq.tracker.dispatcher")


def _as_is(m: int, queue: str, p: int, cursor: int) -> int:
    return cursor


def hand_over_switched(settings: Settings, configs: QueueConfigs, epochs: Epochs, lanes: LaneWriter,
                       queue_parts: int, past_handed: Callable[[int, str, int, int], int] = _as_is) -> int:
    """Record where dispatching stopped for every queue that awaits its handover and whose
    markers partition this dispatcher owns. Returns how many handovers failed: each is
    tried again at the next scan, and one queue's failure is not the others' (it was the
    whole dispatch round's, every round). ``past_handed(m, queue, p, cursor)``: the cursor
    moved past what predecessors handed out above it (OrderedQueues.past_handed)."""
    mparts = settings.markers_partitions
    failed = 0
    for q in configs.queues():
        cfg = configs.get(q)
        if not modes.awaits_handover(cfg, settings):
            continue
        part = epochs.parts.get(markers_partition(q, mparts))
        if part is None or not part.ready:
            continue
        try:
            part.rosters.pop(q, None)
            # Our ACQUIREs of it are in the log (applied first), their lanes written.
            lanes.settle_writes(epochs.with_deliveries(), 10)
            lanes.producer.flush(10)
            # On the latest record: one built from this view wrote away a client's change
            # made a moment before (an audit: visibility_timeout_s=7 lost, 2 of 4 tries).
            cfg, since = latest_config(settings, configs, q)
            if not modes.awaits_handover(cfg, settings):
                continue
            m = markers_partition(q, mparts)
            cursors = {(q, p): past_handed(m, q, p, c) for (queue, p), c in part.cursors.items() if queue == q}
            new = modes.handed_over(cfg, cursors, q, queue_partitions(q, queue_parts, cfg.spread),
                                    int(time.time() * 1000))
            new = write_reconciled(settings, configs, q, cfg, new, since)
        except Exception as exc:  # noqa: BLE001 - logged and counted; the next scan tries again
            failed += 1
            log.warning("queue %s: its handover failed (tried again at the next scan): %s: %s",
                        q, type(exc).__name__, str(exc)[:200])
            continue
        log.info("queue %s: handed over to its consumer group at %s", q, new.handover)
    return failed
