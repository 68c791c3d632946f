"""The ledger's reading of a queue whose mode flips (bench/chaos_flips.py): order per group
only inside an ordered period, and two figures of repeated hand-outs (pure, no Kafka).

Ordering is promised only while a queue is ordered (docs/ordering.md "Changing the ordering
setting"): a message sent after ``configure_queue(q, ordering="group")`` returned is
ordered, and the ordered period ends when the queue is handed out unordered or switched to
partition mode; what was handed out before is not waited for. So rule 4 of
bench/chaos_ledger.py (:func:`~bench.chaos_ledger.out_of_order`) is not applied across
flips but within each ordered period:

- an *ordered period* runs from the return of a flip to ``ordered`` to the moment the next
  flip of the queue was asked (the run's end for the last one); a flip that failed ends a
  period and starts none (what it left is unknown);
- its messages are those of each group sent inside it (noted before the send was made), in
  send order; a message is flagged when its first delivery came inside the period before
  an earlier message of its group and period was settled.

A delivery after its period ended is not checked (the queue was no longer ordered), nor a
message sent before the period began: only what the documentation promises is checked,
and no timing margin enters (the ends are those the harness saw, both on the safe side).

The figures are not rules (rules 1-3 judge a flipped queue as any other): ids acked by
more than one process, and hand-outs of the same (id, delivery count) received again, an
uncounted hand-out (a partition-mode group re-fetching after a kill is one; a dispatcher
that began anew below what others had handed out since is another).
"""

from __future__ import annotations

import math
from collections import Counter

from bench.chaos_ledger import ProcessLog, out_of_order


def ordered_periods(flips: list[dict], end: float) -> list[tuple[float, float]]:
    """(start, end) in epoch seconds of one queue's ordered periods; ``flips`` are
    :class:`bench.chaos_flips.Flipper`'s notes (``mode``, ``asked``, ``returned``, ``error``)."""
    flips = sorted(flips, key=lambda f: f["asked"])
    out = []
    for k, f in enumerate(flips):
        if f["mode"] == "ordered" and not f.get("error"):
            stop = flips[k + 1]["asked"] if k + 1 < len(flips) else end
            if stop > f["returned"]:
                out.append((f["returned"], stop))
    return out


def reordered_in_periods(groups: dict[str, list[str]], sent_at: dict[str, float],
                         periods: list[tuple[float, float]], logs: list[ProcessLog],
                         dead_lettered_s: dict[str, float]) -> tuple[list[str], int]:
    """Ids delivered out of their group's order inside an ordered period (see the module
    docstring), and how many messages were checked (first delivered inside their period, after
    an earlier one of it); ``groups``: group -> ids in send order, ``sent_at``: id -> when sent."""
    inside: dict[str, list[str]] = {}
    period_end: dict[str, float] = {}
    for k, (start, end) in enumerate(periods):
        for group, ids in groups.items():
            sent = [i for i in ids if start <= sent_at.get(i, -math.inf) < end]
            if len(sent) > 1:
                inside[f"{group}@{k}"] = sent
                period_end.update(dict.fromkeys(sent, end))
    first_recv: dict[str, float] = {}
    for log in logs:
        for t, i, _count in log.recv:
            first_recv[i] = min(t, first_recv.get(i, t))
    flagged = out_of_order(inside, logs, dead_lettered_s) if inside else []
    checked = sum(1 for ids in inside.values() for i in ids[1:] if first_recv.get(i, math.inf) < period_end[i])
    return sorted(i for i in flagged if first_recv.get(i, math.inf) < period_end[i]), checked


def repeat_figures(logs: list[ProcessLog]) -> dict[str, int]:
    """Ids acked by more than one process; (id, delivery count) pairs received more than
    once, and the receipts beyond the first of each."""
    acks: Counter = Counter()
    hand_outs: Counter = Counter()
    for log in logs:
        acks.update(log.acked.keys())
        hand_outs.update((i, count) for _t, i, count in log.recv)
    return {"acked_more_than_once": sum(1 for n in acks.values() if n > 1),
            "same_count_received_again": sum(1 for n in hand_outs.values() if n > 1),
            "same_count_receipts_beyond_first": sum(n - 1 for n in hand_outs.values() if n > 1)}
