"""Which acks of a chaos run reached the markers log after their copy's deadline (pure).

A copy of a message is a consumer's until its visibility deadline; the tracker
takes it back when it reads a TICK at or past that deadline, and the markers
log's order decides between that TICK and the consumer's ack
(``kmq.protocol.expiry.tick_time``). An ack that came behind such a TICK lost
honestly: the copy may have gone out again, and a delivery after that ack is
at-least-once, not a broken "acked means gone".

The tracker's deadline is the time it *applied* the ACQUIRE (or START, or the
last EXTEND) plus the timeout, never earlier than the marker's own timestamp
plus the timeout. So "a TICK stamped at or past timestamp + timeout came before
the ack" is necessary for an honest loss: :func:`late_acks` names only those, and
every other redelivery after an ack stays a violation (the ledger's rule 2).
"""

from __future__ import annotations

from typing import Iterable

Copy = tuple[str, int, int]  # (queue, queue partition, offset)
HANDING = ("Acquire", "Start", "Extend")


def late_acks(dump: Iterable[dict]) -> set[Copy]:
    """Copies whose ACK came after a TICK stamped at or past their deadline's lower bound.

    ``dump``: ``bench.markers_dump`` lines, each markers partition in log order (all
    markers of one queue partition share a markers partition)."""
    epoch: dict[int, int] = {}
    ticks: dict[int, list[int]] = {}  # markers partition -> TICK times in log order
    deadline: dict[Copy, tuple[int, int]] = {}  # -> (lower bound, how many TICKs came before)
    late: set[Copy] = set()
    for r in dump:
        k, p = r.get("k"), r.get("p")
        seen = ticks.setdefault(p, [])
        if k == "Begin":
            epoch[p] = r["epoch"]
        elif k == "Tick":
            seen.append(r["now_ms"])
        elif k in HANDING:
            if k == "Acquire" and r.get("epoch") != epoch.get(p):
                continue  # fenced: never applied
            for o in r["o"]:
                deadline[(r["q"], r["qp"], o)] = (r["ts"] + r["timeout_ms"], len(seen))
        elif k == "Ack":
            for o in r["o"]:
                key = (r["q"], r["qp"], o)
                if key in deadline:
                    until, since = deadline[key]
                    if any(t >= until for t in seen[since:]):  # only a TICK after the hand-out
                        late.add(key)
    return late
