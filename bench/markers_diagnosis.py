"""What a markers dump says about a broken strict rule (pure: the dump's lines in, findings out).

"Delivered after a durable ack" on a shared queue has three possible causes the markers
log can tell apart:

- an offset ACQUIREd twice (a second hand-out: a successor began below an ACQUIRE);
- an ACK of offsets no ACQUIRE held at that point of the log (an ACK applied before
  its ACQUIRE, or to another range);
- a worker that resumed a markers partition above records its table never applied
  (the tracker logs "resuming at offset X; the table holds records up to Y"): any
  marker that changes state between Y and X was skipped.

The chaos harness puts these findings in a failed run's result, so a CI failure says
which one it was.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Iterable

RESUME_RE = re.compile(r"markers partition (\d+): resuming at offset (\d+); the table holds records up to (-?\d+)")
STATEFUL = {"Start", "Acquire", "Ack", "Release", "Reject", "Extend", "Begin", "Floor", "Schedule", "Purge"}
EXAMPLES = 5  # findings of each kind quoted in full


def diagnose(lines: Iterable[dict], resumes: Iterable[str] = ()) -> dict:
    """Findings over dump lines (``bench.markers_dump``, log order per partition) and the
    trackers' "resuming at" log lines."""
    epoch: dict[int, int] = {}
    acquired: dict[tuple, list] = defaultdict(list)      # (queue, qp, offset) -> [(p, off)]
    in_flight: dict[tuple, set] = {}                     # (queue, qp, start, end) -> offsets
    fenced, stray_acks = [], []
    by_partition: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for r in lines:
        k = r.get("k")
        if k is None:
            continue
        p = r["p"]
        by_partition[p].append((r["off"], k))
        if k == "Begin":
            epoch[p] = r["epoch"]
        elif k in ("Acquire", "Start"):
            if k == "Acquire" and r["epoch"] != epoch.get(p):
                fenced.append((p, r["off"]))
                continue
            for o in r["o"]:
                acquired[(r["q"], r["qp"], o)].append((p, r["off"]))
            in_flight[(r["q"], r["qp"], r["s"], r["e"])] = set(r["o"])
        elif k in ("Ack", "Release", "Reject"):
            held = in_flight.get((r["q"], r["qp"], r["s"], r["e"]), set())
            if k == "Ack":
                missing = [o for o in r["o"] if o not in held]
                if missing:
                    stray_acks.append({"p": p, "off": r["off"], "queue": r["q"], "offsets": missing[:EXAMPLES]})
            held.difference_update(r["o"])
    twice = [{"queue": q, "qp": qp, "offset": o, "at": at}
             for (q, qp, o), at in acquired.items() if len(at) > 1]
    skipped = []
    for line in resumes:
        m = RESUME_RE.search(line)
        if m is None:
            continue
        p, resumed, applied = int(m.group(1)), int(m.group(2)), int(m.group(3))
        lost = [(o, k) for o, k in by_partition[p] if applied < o < resumed and k in STATEFUL]
        if lost:
            skipped.append({"p": p, "resumed": resumed, "applied": applied, "markers": lost[:EXAMPLES],
                            "count": len(lost)})
    return {"acquired_twice": len(twice), "acquired_twice_examples": twice[:EXAMPLES],
            "stray_acks": len(stray_acks), "stray_ack_examples": stray_acks[:EXAMPLES],
            "fenced_acquires": len(fenced), "resumes_above_unapplied": skipped[:EXAMPLES]}
