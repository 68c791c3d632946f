"""The dispatcher of shared queues: hands each consumer the messages it asked for (step 2, shared).

One thread per tracker worker, fed by the markers agent; for every markers partition the
worker owns it is the dispatcher of the shared queues placed there, like KIP-932's
share-partition leader (docs/shared-queues.md, "How it works"): BEGIN an epoch and wait
until the agent applied it (the cursors are final then); fold the consumers' CREDITs into
rosters; read the queue partitions once for all wanting queues; write one ACQUIRE per
share; once the broker has it, write the delivery to the consumer's lane.

Blocking librdkafka calls stay in this thread. Its inbox's events are handled by
``agents.dispatch.events``; its clients' set-up and failures by ``agents.dispatch.clients``;
its reads are ``agents.dispatch.reader``'s, its writes ``agents.dispatch.lanes``'s, its
epochs ``agents.dispatch.epochs``', mode switches
``agents.dispatch.modes``' and ``agents.dispatch.give_back``'s, ordered groups
``agents.dispatch.ordered``'s, records carrying a group ``agents.dispatch.settings_cover``'s; the decisions
are the pure ``kmq.protocol.dispatch``'s. It writes nothing once a rebalance begins
(:meth:`Dispatcher.quiesce`) or outside the worker's membership lease (``app.membership``):
docs/shared-queues.md, "Dispatcher handover".
"""

from __future__ import annotations

import logging
import math
import time
from typing import Callable

from agents.dispatch import modes
from agents.dispatch.clients import DispatcherClients
from agents.dispatch.dedup_replay import REPLAY_ROUND_RECORDS
from agents.dispatch.epochs import Epochs, OwnedPartition
from agents.dispatch.events import DispatcherEvents
from agents.dispatch.give_back import drain_wants, take_drained
from agents.dispatch.handover import hand_over_switched
from agents.dispatch.inbox import DispatcherInbox
from agents.dispatch.lanes import Batch, LaneWriter, delivery_of
from agents.dispatch.reader import QueueReader
from agents.dispatch.views import DispatcherViews
from agents.dispatch.settings_cover import SettingsCover
from agents.dispatch.ordered import OrderedQueues
from agents.dispatch.ordered_dedup import header_names
from kmq.protocol import deliveries as D
from kmq.protocol import envelope
from kmq.protocol import markers as M
from kmq.protocol.dispatch import Want, hand_out
from kmq.protocol.lookahead import Lookahead
from kmq.protocol.placement import queue_partitions
from kmq.protocol.view_freshness import ViewFreshness
from kmq.queue_config import QueueConfig
from kmq.ops.queues_topic import QueueConfigs
from kmq.settings import Settings

log = logging.getLogger("kmq.tracker.dispatcher")
TRACE = bool(__import__("os").environ.get("KMQ_DISPATCH_TRACE"))
LAPSE_LOG_S = 10.0  # a lapsed lease is logged at most this often

IDLE_WAIT_S = 0.05        # how long the thread sleeps when nothing is to be done
ACQUIRE_POLL_S = 0.005    # ... and how long it waits for an ACQUIRE's acknowledgement
CONFIG_SCAN_S = 0.5       # how often queues waiting for a handover are looked for
ORDERED_READ_RECORDS = 5000  # records of an ordered queue read per round, at most


class Dispatcher(DispatcherClients, DispatcherInbox, DispatcherEvents, DispatcherViews, SettingsCover):
    """Dispatches the shared queues of the owned markers partitions (see the module docstring)."""

    def __init__(self, settings: Settings, configs: Callable[[], QueueConfigs],
                 membership: Callable[[], float] = lambda: math.inf) -> None:
        super().__init__()
        self.settings = settings
        # monotonic seconds until which this worker is certainly a member of its group
        self._membership = membership
        self._configs_factory = configs
        self.trace = TRACE
        self._epochs = Epochs()
        self._parts = self._epochs.parts  # markers partition -> its epoch and queues' state
        self.stats = {"dispatched": 0, "deliveries": 0, "by-reference": 0, "copied": 0, "credits": 0,
                      "bad-credits": 0, "credits-refused": 0, "lane-moves": 0, "acquire-errors": 0, "begin-errors": 0,
                      "lanes-withheld": 0, "lane-errors": 0, "writers-replaced": 0, "lease-lapses": 0,
                      "unreadable-batches": 0, "unreadable-offsets": 0, "too-large-to-copy": 0,
                      "dedup-replays": 0, "dedup-ids-read-back": 0, "settings-checks": 0, "held-for-settings": 0,
                      "handover-errors": 0, "cursors-out-of-topic": 0, "forged-run-headers": 0,
                      "foreign-begins": 0}
        self._lapse_logged_s = 0.0  # when a lapsed membership lease was last logged
        self._ordered = OrderedQueues()  # queues with ordering="group" (docs/ordering.md)
        self._floors: dict[int, list[M.Floor]] = {}  # markers partition -> FLOORs to write
        self._returns: dict[int, list[list[M.Marker]]] = {}  # ... -> records given back (give_back)
        self._draining: dict = {}  # queues read again before their handover (give_back.drain_wants)
        self._next_config_scan = 0.0
        self._freshness = ViewFreshness()  # what was read the settings are known current for
        self._overdue_logged_s = -math.inf  # when a view stuck behind was last logged
        self._lanes: LaneWriter | None = None  # the thread's clients (_set_up)
        self._reader: QueueReader | None = None
        self._queue_parts = 0  # the queue topic's partitions, once the thread's set-up read them

    # -- the dispatcher thread -------------------------------------------------------------

    def _run(self) -> None:
        if not self._set_up():
            return
        while not self._stop.is_set():
            began_s, began_cpu_s = time.monotonic(), time.thread_time()
            try:
                busy = self._round()
            except Exception:  # keep dispatching; a broker blip is retried next round
                log.exception("dispatch round failed")
                # Their ACQUIREs were not written: a FLOOR of this round must not be either,
                # and records it was to give back are read again in a new epoch.
                self._floors.clear()
                for m in self._returns:
                    self._failed(m, None, [], "a dispatch round failed")
                self._returns.clear()
                busy = False
                self._stop.wait(0.5)
            if TRACE and busy:  # a round's wall time against this thread's CPU time in it
                log.info("TRACE round %.1f ms, cpu %.1f ms", (time.monotonic() - began_s) * 1000,
                         (time.thread_time() - began_cpu_s) * 1000)
            if not busy and self._lanes.lanes_waiting:
                # An ACQUIRE on its way: its lane goes out when the broker has it, not a
                # whole idle wait later (callbacks run in poll; returns at the first).
                self._lanes.producer.poll(ACQUIRE_POLL_S)
            elif not busy:
                self._wake.wait(IDLE_WAIT_S)
                self._wake.clear()
        self._lanes.producer.flush(10)
        self._reader.close()

    def _round(self) -> bool:
        """One pass: events in, expired leases out, reads and dispatches. True if it did work."""
        if self._lanes.fatal:
            self._replace_writer()
        busy = self._drain_inbox()
        self._expire_consumers(int(time.monotonic() * 1000))
        # Outside the membership lease nothing is written (a successor may have begun)
        if self._membership() > time.monotonic() >= self._next_config_scan:
            self._next_config_scan = time.monotonic() + CONFIG_SCAN_S
            self.stats["handover-errors"] += hand_over_switched(
                self.settings, self._configs, self._epochs, self._lanes, self._queue_parts,
                self._ordered)
        busy |= self._dispatch()
        self._lanes.producer.poll(0)
        busy |= self._lanes.write_lanes(self._epochs.with_deliveries())
        return busy

    def _expire_consumers(self, now_ms: int) -> None:
        """Consumers whose lease ran out are dropped; those left counted (``admits``). A queue
        with none left goes, as when its last one says goodbye: kept, its records stayed read
        ahead while any other queue of its partition was read (an audit: 5,000 records held
        for 5 minutes after its consumers were SIGKILLed), and every round went over it."""
        for part in self._parts.values():
            for q, roster in list(part.rosters.items()):
                roster.expire(now_ms)
                if not roster.slots:
                    del part.rosters[q]
            part.consumers = sum(len(r.slots) for r in part.rosters.values())

    # -- reading and handing out ------------------------------------------------------------

    def _lapsed(self, now: float) -> None:
        """Say (every LAPSE_LOG_S at most) that dispatching waits for the group to confirm us."""
        if self._parts and now - self._lapse_logged_s >= LAPSE_LOG_S:
            self._lapse_logged_s = now
            self.stats["lease-lapses"] += 1
            log.warning("dispatching paused: no heartbeat answered OK for %.1f s past this worker's "
                        "membership lease (app.membership)", now - self._membership())

    def _dispatchable(self, queue: str) -> QueueConfig | None:
        cfg = self._configs.get(queue)
        return cfg if modes.dispatchable(cfg, self.settings, time.time() * 1000) else None

    def _dispatch(self) -> bool:
        now = time.monotonic()
        if now >= self._membership():
            self._lapsed(now)
            return False  # its lanes could not be written (app.membership)
        wants: dict[int, dict[bytes, Want]] = {}   # queue partition -> queue key -> Want
        owners: dict[str, tuple[OwnedPartition, int]] = {}
        kept: dict[int, set[bytes]] = {}           # queue partition -> keys of queues with consumers
        for m, part in self._parts.items():
            if not part.ready:
                continue
            for q, roster in part.rosters.items():
                cfg = self._dispatchable(q)
                if cfg is None:
                    continue
                parts = queue_partitions(q, self._queue_parts, cfg.spread)
                for p in parts:  # its records are kept read ahead while it has consumers
                    kept.setdefault(p, set()).add(q.encode())
                demand = roster.demand()
                if demand <= 0:
                    continue
                owners[q] = (part, m, cfg)
                for p in parts:
                    floor = max(cfg.purged_before.get(p, 0), cfg.partition_starts.get(p, 0))
                    cursor = max(part.cursors.get((q, p), 0), floor)
                    # Read back from below a purge point too: a purge keeps the dedup ids seen.
                    if (q, p) in part.replays and self._read_back(part, q, p, cfg.partition_starts.get(p, 0),
                                                                  cfg, wants):
                        continue
                    if cfg.ordering == "group":  # read ahead of the heads, within the window
                        read = min(self._ordered.room((m, q, p), cursor), ORDERED_READ_RECORDS)
                        wants.setdefault(p, {})[q.encode()] = Want(q, cursor, read)
                    else:  # none read while records wait from when it was ordered (_take)
                        waiting = self._ordered.waiting((m, q, p))
                        wants.setdefault(p, {})[q.encode()] = Want(q, cursor, 0 if waiting else demand)
        self._draining = drain_wants(self._ordered, self._parts, self._configs, self.settings, wants)
        self._reader.release_idle(wants)
        if not wants:
            return False
        out: dict[int, list[Batch]] = {}
        ordered_q = {q for q, (_, _, cfg) in owners.items() if cfg.ordering == "group"}
        records_read = self._reader.read(wants, ordered_q, self._lanes.lanes_waiting, kept)
        for p, ws in wants.items():
            self._take(p, ws, owners, out, self._reader.ahead[p])
            self._reader.trim(p, ws)
        for m in set(out) | set(self._floors) | set(self._returns):
            self._lanes.acquire(m, out.get(m, []), self._floors.pop(m, []), self._failed, ordered_q,
                                self._returns.pop(m, []))
        return bool(out) or bool(records_read)

    def _read_back(self, part: OwnedPartition, q: str, p: int, floor: int, cfg: QueueConfig,
                   wants: dict[int, dict[bytes, Want]]) -> bool:
        """After BEGIN, a queue partition's dedup ids are read back first (agents.dispatch.
        dedup_replay): True while that is its want."""
        at = part.replays[(q, p)].start(floor, int(cfg.dedup_window_s * 1000),
                                        lambda wall_ms: self._reader.offset_at(p, wall_ms))
        if at is None:
            del part.replays[(q, p)]
            self.stats["dedup-replays"] += 1
            return False
        wants.setdefault(p, {})[q.encode()] = Want(q, at, REPLAY_ROUND_RECORDS)
        return True

    def _take(self, p: int, wants: dict[bytes, Want], owners: dict[str, tuple[OwnedPartition, int]],
              out: dict[int, list[Batch]], ahead: Lookahead) -> None:
        """Share what each queue took among its consumers; one batch (ACQUIRE) per share,
        handed out by reference where the queue dominates the range, else as copies."""
        now_ms = int(time.monotonic() * 1000)
        for w in wants.values():
            drained = self._draining.get((w.queue, p))
            if drained is not None:  # read again before its handover: given back, not handed out
                take_drained(self._ordered, w, p, *drained, self._returns.setdefault(drained[1], []))
                continue
            part, m, cfg = owners[w.queue]
            roster = part.rosters[w.queue]
            replay = part.replays.get((w.queue, p))
            if replay is not None:  # sends handed out before BEGIN: their dedup ids only
                self.stats["dedup-ids-read-back"] += self._ordered.remember_sends(
                    (m, w.queue, p), replay.took(w), int(cfg.dedup_window_s * 1000))
                continue
            forged_runs = False  # an ordered queue's copies carry the dispatcher's own (InRun)
            if cfg.ordering == "group":
                runs = self._ordered.hand_out((m, w.queue, p), w, roster, int(cfg.dedup_window_s * 1000), now_ms,
                                              cfg.dead_letter_head)
                if runs:
                    # After this queue's ACQUIREs, in their record: the cursor a successor
                    # reads from goes back to the oldest record still waiting for its group.
                    floor = self._ordered.durable_floor((m, w.queue, p), w.cursor)
                    self._floors.setdefault(m, []).append(M.Floor(w.queue, p, floor, part.epoch))
            else:
                self._ordered.unorder((m, w.queue, p))
                dropped = False
                names = header_names(w.taken)
                if envelope.GROUP in names:  # sent right after ordering="group" was set?
                    self._hold_uncovered(w, part, p, self._settings_cover(w.queue, p, cfg, w.taken[-1].offset()))
                    if not w.taken:
                        continue
                if self._ordered.waiting((m, w.queue, p)):  # set back from ordering="group"
                    w.taken[:0] = self._ordered.release((m, w.queue, p), roster.demand())  # those first
                    names = None
                if w.taken:  # handed out while it was ordered: read again from its FLOOR after a BEGIN
                    kept = self._ordered.not_handed((m, w.queue, p), w.taken)
                    dropped, w.taken = len(kept) < len(w.taken), kept
                if w.taken:  # sends repeated within the dedup window are never handed out
                    kept = self._ordered.drop_duplicates((m, w.queue, p), w.taken,
                                                         int(cfg.dedup_window_s * 1000), names)
                    dropped, w.taken = dropped or len(kept) < len(w.taken), kept
                runs = hand_out(w, roster)
                forged_runs = names is None or envelope.RUN in names
                if forged_runs and names is not None:
                    self.stats["forged-run-headers"] += 1
                if dropped:
                    # No ACQUIRE covers a dropped record: a FLOOR after this round's ACQUIREs
                    # moves the queue's position past it (its depth; a successor's cursor).
                    self._floors.setdefault(m, []).append(M.Floor(w.queue, p, w.cursor, part.epoch))
            for slot, seq, run in runs:
                batch = delivery_of(run, w.queue, p, part.epoch, slot, seq, ahead, cfg.ordering == "group",
                                    len(roster.slots), max_copy_bytes=self.settings.max_message_bytes)
                batch.strip_run = forged_runs
                out.setdefault(m, []).append(batch)
                self.stats["by-reference" if batch.delivery.kind == D.REFERENCE else "copied"] += len(run)
            part.cursors[(w.queue, p)] = w.cursor
