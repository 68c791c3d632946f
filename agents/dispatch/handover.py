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

from agents.dispatch import modes
from agents.dispatch.epochs import Epochs
from agents.dispatch.give_back import give_back_waiting
from agents.dispatch.lanes import LaneWriter
from agents.dispatch.ordered import OrderedQueues
from kmq.ops.config_update import latest_config, write_reconciled
from kmq.ops.queues_topic import QueueConfigs
from kmq.protocol.placement import markers_partition, queue_partitions
from kmq.settings import Settings

log = logging.getLogger("kmq.tracker.dispatcher")


def hand_over_switched(settings: Settings, configs: QueueConfigs, epochs: Epochs, lanes: LaneWriter,
                       queue_parts: int, ordered: OrderedQueues) -> int:
    """Record where dispatching stopped for every queue that awaits its handover and whose
    markers partition this dispatcher owns. Returns how many handovers failed: each is
    tried again at the next scan, and one queue's failure is not the others' (it was the
    whole dispatch round's, every round). ``ordered``: the dispatcher's ordered queues: a
    queue's waiting records are given back first (agents.dispatch.give_back), and one whose
    predecessors' hand-outs are not read again yet waits for that (``drain_wants``)."""
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
            m = markers_partition(q, mparts)
            mine = {(q, p): c for (queue, p), c in part.cursors.items() if queue == q}
            if any(ordered.unread_from((m, q, p), c) for (_, p), c in mine.items()):
                continue  # read again first (give_back.drain_wants); the next scan hands over
            cursors = {(q, p): ordered.past_handed((m, q, p), c) for (_, p), c in mine.items()}
            errors = give_back_waiting(ordered, lanes, part, m, q, cursors)
            # Our ACQUIREs of it are in the log (applied first), their lanes written.
            lanes.settle_writes(epochs.with_deliveries(), 10)
            lanes.producer.flush(10)
            if errors:  # taken out of the dispatcher, not written: a new epoch reads them again
                if epochs.end(m, part.epoch, deliveries_owed=True):
                    ordered.forget_partition(m)
                raise RuntimeError(f"its waiting records were not given back (the partition begins anew): "
                                   f"{errors[0]}")
            # On the latest record: one built from this view wrote away a client's change
            # made a moment before (an audit: visibility_timeout_s=7 lost, 2 of 4 tries).
            cfg, since = latest_config(settings, configs, q)
            if not modes.awaits_handover(cfg, settings):
                continue
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
