"""What the web views and metrics show per queue, from the partitions this worker owns.

A queue lives on one markers partition, so one worker (its owner) knows all
of its tracker state: the gauges of that partition (``kmq.stats.gauges``, kept up
at every table write), its counters and per-time-bucket rates (``part.count``
in the markers agent) and what the :class:`~web.queue_scan.QueueScanner`
read from the queue and dead-letter topics. Nothing here scans the table
per request, except one queue's own ranges for its detail.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from agents.partitions import OwnedPartition, OwnedPartitions
from web.queue_scan import QueueScanner
from kmq.protocol import entries as E
from kmq.protocol.masks import first_offsets
from kmq.protocol.outcomes import Outcome
from kmq.protocol.placement import markers_partition
from kmq.queue_config import QueueConfig
from kmq.ops.queues_topic import QueueConfigs
from kmq.stats.rates import merge_histories
from kmq.ops.tenancy import Caller

# The row fields counted per minute, and the tracker's event names behind them.
RATE_EVENTS = {
    "sent": (),  # from the queue scanner
    "received": (Outcome.STARTED,),
    "acked": (Outcome.ACKED,),
    "released": (Outcome.RELEASED,),
    "rejected": (Outcome.REJECTED,),
    "redelivered": (Outcome.REDELIVERED,),
    "dead_lettered": (Outcome.DEAD_LETTERED,),
    "late": (Outcome.LATE,),  # settles for messages already taken back or settled
}
EVENT_FIELD = {ev: name for name, evs in RATE_EVENTS.items() for ev in evs}
SORT_FIELDS = ("queue", "depth", "in_flight", "scheduled", "dead_letters", "oldest_in_flight_age_s", "consumers",
               *(f"{name}_per_min" for name in RATE_EVENTS))
MINUTE_S = 60.0
_NO_COUNTS: Counter = Counter()


def _per_queue(window: Counter) -> dict[str, Counter]:
    """(queue, event) counts -> queue -> row field -> count, in one pass."""
    out: dict[str, Counter] = {}
    for (q, ev), n in window.items():
        field_name = EVENT_FIELD.get(ev)
        if field_name:
            c = out.get(q)
            if c is None:
                c = out[q] = Counter()
            c[field_name] += n
    return out


@dataclass
class QueueStats:
    """Rows and details of the queues of the owned partitions."""

    owned: OwnedPartitions
    scanner: QueueScanner
    configs: Callable[[], QueueConfigs | None]
    markers_partitions: int
    # Live consumers per shared queue, as this worker's dispatcher knows them (its rosters).
    consumers: Callable[[], dict[str, int]] = field(default=dict)
    default_dispatch: str = "shared"  # KMQ_DISPATCH: the mode of queues that set none

    def config(self, queue: str) -> QueueConfig:
        c = self.configs()
        return c.get(queue) if c is not None else QueueConfig()

    def tenant_of(self, queue: str) -> str | None:
        """The queue's tenant as the tracker trusts it (signed by the admin when auth is on)."""
        c = self.configs()
        return c.tenant_of(queue) if c is not None else None

    def owner_part(self, queue: str) -> OwnedPartition | None:
        return self.owned.get(markers_partition(queue, self.markers_partitions))

    # -- rows ---------------------------------------------------------------------------

    def queues(self) -> dict[str, OwnedPartition]:
        """Every queue this worker knows on its owned partitions -> its partition."""
        out: dict[str, OwnedPartition] = {}
        for part in list(self.owned.values()):
            names: set[str] = part.gauges.queues()
            names.update(q for q, _ in part.counters)
            names.update(q for q, _ in part.rates.keys())
            for q in names:
                out[q] = part
        result = self.scanner.result
        for q in list(result.depth) + list(result.dead_letters):
            part = self.owner_part(q)
            if part is not None:
                out.setdefault(q, part)
        c = self.configs()
        for q in (c.queues() if c is not None else ()):
            part = self.owner_part(q)
            if part is not None:
                out.setdefault(q, part)
        return out

    def rows(self, caller: Caller, now_s: float | None = None) -> list[dict[str, Any]]:
        """One summary row per queue the caller may see."""
        now_s = time.time() if now_s is None else now_s
        sent = self.scanner.sent_window(MINUTE_S, now_s)
        consumers = self.consumers()
        windows: dict[int, Counter] = {}
        rows = []
        for q, part in self.queues().items():
            if not caller.may_access(self.tenant_of(q)):
                continue
            cfg = self.config(q)
            w = windows.get(part.partition)
            if w is None:
                w = windows[part.partition] = _per_queue(part.rates.window(MINUTE_S, now_s))
            rows.append(self._row(q, part, cfg, w, sent, now_s, consumers))
        return rows

    def row(self, queue: str, now_s: float) -> dict[str, Any] | None:
        """The queue's row, or None if this worker knows nothing of it."""
        part = self.owner_part(queue)
        if part is None:
            return None
        known = (queue in part.gauges.queues() or any(q == queue for q, _ in part.counters)
                 or any(q == queue for q, _ in part.rates.keys())
                 or queue in self.scanner.result.depth or queue in self.scanner.result.dead_letters
                 or (self.configs() is not None and queue in self.configs().queues()))
        if not known:
            return None
        return self._row(queue, part, self.config(queue),
                         _per_queue(part.rates.window(MINUTE_S, now_s)),
                         self.scanner.sent_window(MINUTE_S, now_s), now_s, self.consumers())

    def _row(self, q: str, part: OwnedPartition, cfg: QueueConfig, window: dict[str, Counter],
             sent: Counter, now_s: float, consumers: dict[str, int]) -> dict[str, Any]:
        g = part.gauges
        depth = self.scanner.result.depth.get(q)
        oldest = g.oldest_started_ms(q)
        row: dict[str, Any] = {
            "queue": q, "tenant": self.tenant_of(q), "markers_partition": part.partition,
            "depth": None if depth is None else depth.records,
            "depth_exact": None if depth is None else depth.exact,
            "in_flight": g.in_flight.get(q, 0), "scheduled": g.scheduled.get(q, 0),
            "dead_letters": self.scanner.result.dead_letters.get(q, 0),
            "oldest_in_flight_age_s": (None if oldest is None
                                       else round(max(0.0, now_s - oldest / 1000), 3)),
            # Consumers asking the dispatcher for work (a lease renewed within 5 s); a
            # partition-mode queue's consumers are a Kafka group the tracker does not track.
            "consumers": consumers.get(q, 0) if (cfg.dispatch or self.default_dispatch) == "shared" else None,
        }
        counts = window.get(q, _NO_COUNTS)
        for name in RATE_EVENTS:
            row[f"{name}_per_min"] = sent.get(q, 0) if name == "sent" else counts.get(name, 0)
        return row

    def totals(self, queue: str) -> dict[str, int]:
        """Counts since this worker owns the queue's partition."""
        part = self.owner_part(queue)
        out = {name: 0 for name in RATE_EVENTS}
        out["sent"] = self.scanner.sent.get(queue, 0)
        if part is not None:
            for (q, ev), n in list(part.counters.items()):
                if q == queue and ev in EVENT_FIELD:
                    out[EVENT_FIELD[ev]] += n
        return out

    def history(self, keep: Callable[[str], bool], now_s: float | None = None) -> dict[int, Counter]:
        """Per time bucket, events per row field summed over the queues ``keep`` accepts."""
        now_s = time.time() if now_s is None else now_s
        group = lambda k: EVENT_FIELD.get(k[1], "")  # noqa: E731
        parts = [p.rates.history(now_s, keep=lambda k: k[1] in EVENT_FIELD and keep(k[0]), group=group)
                 for p in list(self.owned.values())]
        parts.append(self.scanner.sent_history(now_s, keep))
        return merge_histories(parts)

    # -- one queue -----------------------------------------------------------------------

    def ranges(self, queue: str, limit: int = 100) -> tuple[int, list[dict[str, Any]]]:
        """The queue's in-flight ranges, soonest deadline first: (how many, the first ``limit``)."""
        part = self.owner_part(queue)
        if part is None:
            return 0, []
        out = []
        for key in part.gauges.queue_ranges(queue):
            raw = part.state.store.get(key)
            if raw is None:
                continue
            ref = E.decode_range_key(key)
            entry = E.decode_inflight(raw)
            groups = sorted(entry.groups, key=lambda g: g.deadline_ms)
            out.append({
                "partition": ref.partition, "start": ref.start, "end": ref.end,
                "pending": entry.pending.bit_count(), "started_ms": entry.started_ms,
                "next_deadline_ms": groups[0].deadline_ms if groups else None,
                "groups": [{"deadline_ms": g.deadline_ms, "cause": g.cause.name.lower(),
                            "reason": g.reason, "count": g.mask.bit_count(),
                            "offsets": _offsets(ref.start, g.mask)} for g in groups],
            })
        out.sort(key=lambda r: (r["next_deadline_ms"] is None, r["next_deadline_ms"] or 0))
        return len(out), out[:limit]


def _offsets(start: int, mask: int, limit: int = 1000) -> list[int]:
    # Bytewise (kmq.protocol.masks): bit by bit, a mask with only its top bit set
    # took 19 s at 1M bits, on the event loop.
    return first_offsets(start, mask, limit)


def sort_rows(rows: Iterable[dict[str, Any]], sort: str, descending: bool) -> list[dict[str, Any]]:
    """Rows ordered by ``sort`` (missing values last), ties by queue name."""
    rows = sorted(rows, key=lambda r: r["queue"])
    if sort == "queue":
        return rows[::-1] if descending else rows
    present = [r for r in rows if r.get(sort) is not None]
    missing = [r for r in rows if r.get(sort) is None]
    present.sort(key=lambda r: r[sort], reverse=descending)
    return present + missing


TOTAL_FIELDS = ("depth", "in_flight", "scheduled", "dead_letters",
                *(f"{name}_per_min" for name in RATE_EVENTS))


def totals_of(rows: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Sums of the numeric row fields (the list view's totals line)."""
    out = dict.fromkeys(TOTAL_FIELDS, 0)
    for r in rows:
        for k in TOTAL_FIELDS:
            v = r[k]
            if v:
                out[k] += v
    return out
