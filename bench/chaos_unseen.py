"""Copies a killed consumer STARTed but never logged receiving (pure, no Kafka).

A partition-mode consumer writes its START as it fetches, then hands the records to
user code, which logs them (``recv``). Killed in between, it leaves a START that no
process logged: the ledger saw nothing held, yet the tracker takes that copy back
after its visibility timeout (a new record), and the group's next member fetches the
old offset again from the last commit. Both are deliveries of one message, and one
may come after the other was acked: the START/commit window the ledger's rule 2
excuses after a kill, only invisible in the logs. Seen in a CI run: a consumer
assigned a partition at 861.627 s STARTed 4 records at 861.626 and was killed at
861.750; its successor acked the re-fetched copies at 867.07 and received the
tracker's copies at 870.36.

:func:`unseen_starts` finds STARTs no process logged receiving; :func:`held_by_the_dead`
names the messages of those a process of that queue could have held when it was
killed: it had that partition assigned when the START was written, and died after.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Iterable

Copy = tuple[str, int, int]  # (queue, queue partition, offset)
SLACK_S = 1.0  # between the broker's timestamp of a START and the consumer's clock


@dataclass(frozen=True)
class Ended:
    """A consumer process that ended by a kill or a crash."""

    queue: str
    at_s: float                                  # when it was killed (epoch s)
    assigned: tuple[tuple[float, tuple[int, ...]], ...]  # (t, partitions) as it logged them


def unseen_starts(dump: Iterable[dict], received: dict[Copy, list[float]],
                  slack_s: float = SLACK_S) -> list[tuple[Copy, float]]:
    """(copy, START time in s) of every START that no logged receipt of that copy answers.

    A receipt at ``t`` answers the latest START of its copy written by ``t + slack_s``.
    ``dump``: ``bench.markers_dump`` lines; ``received``: per copy, when processes logged it."""
    starts: dict[Copy, list[float]] = {}
    for r in dump:
        if r.get("k") == "Start":
            for o in r["o"]:
                starts.setdefault((r["q"], r["qp"], o), []).append(r["ts"] / 1000)
    unseen = []
    for copy, times in starts.items():
        times.sort()
        answered = {bisect_right(times, t + slack_s) - 1 for t in received.get(copy, ())}
        unseen += [(copy, ts) for i, ts in enumerate(times) if i not in answered]
    return unseen


def held_by_the_dead(unseen: Iterable[tuple[Copy, float]], id_of: dict[Copy, str],
                     ended: Iterable[Ended], slack_s: float = SLACK_S) -> set[str]:
    """Ids of the unseen copies a killed process of their queue had assigned when the
    START was written, and died after. A copy nobody ever received names no id."""
    by_queue: dict[str, list[Ended]] = {}
    for e in ended:
        by_queue.setdefault(e.queue, []).append(e)
    out = set()
    for (q, qp, off), ts in unseen:
        i = id_of.get((q, qp, off))
        if i is not None and any(e.at_s >= ts - slack_s and qp in _assigned_at(e, ts + slack_s)
                                 for e in by_queue.get(q, ())):
            out.add(i)
    return out


def _assigned_at(e: Ended, t: float) -> tuple[int, ...]:
    """The partitions ``e`` last logged as its own at or before ``t``."""
    now = [parts for at, parts in e.assigned if at <= t]
    return now[-1] if now else ()
