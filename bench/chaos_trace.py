"""The story of a few message ids in a chaos run, in time order (pure: logs and a dump in).

A rule the ledger finds broken names ids; what happened to them is spread over the
consumer logs (who received which copy, at which queue offset, and when its ack was
sent and durable) and the markers topic (which ACQUIRE handed each copy out, in which
epoch, and which ACK, EXTEND or RELEASE reached it). :func:`trace` puts both side by
side per id, so a failed CI run says which copy came back and after what.

Consumer log lines are those of ``bench/chaos_consumer.py``; a ``recv`` entry is
``[id, delivery_count]`` or ``[id, delivery_count, queue partition, offset]``. Dump
lines are ``bench.markers_dump``'s.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Iterable

# Marker kinds that can name a copy's offset (a TICK or BEGIN names none).
RANGE_KINDS = {"Start", "Acquire", "Ack", "Release", "Reject", "Extend"}
MAX_EVENTS = 40  # per id: a trace is read by a person


def consumer_events(ids: set[str], logs: dict[str, Iterable[str]]) -> dict[str, list[dict]]:
    """Per id, what the consumer processes logged about it: ``logs`` maps a process name
    to its JSON lines (a torn line is skipped)."""
    out: dict[str, list[dict]] = defaultdict(list)
    for name, lines in logs.items():
        for line in lines:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if not isinstance(ev, dict):
                continue
            kind, t = ev.get("e"), ev.get("t")
            if kind == "recv":
                for entry in ev.get("m", ()):
                    if entry[0] in ids:
                        where = {"qp": entry[2], "offset": entry[3]} if len(entry) >= 4 else {}
                        out[entry[0]].append({"t": t, "by": name, "e": "recv", "count": entry[1], **where})
            elif kind == "acking":
                for i in ids.intersection(ev.get("ids", ())):
                    out[i].append({"t": t, "by": name, "e": "acking"})
                for i in ids.intersection(ev.get("rejecting", ())):
                    out[i].append({"t": t, "by": name, "e": "rejecting"})
            elif kind == "settled":
                for verb in ("acked", "released", "rejected"):
                    for i in ids.intersection(ev.get(verb, ())):
                        out[i].append({"t": t, "by": name, "e": verb})
    return out


def trace(ids: Iterable[str], queue_of: dict[str, str], logs: dict[str, Iterable[str]],
          dump: Iterable[dict], endings: dict[str, str] | None = None) -> dict[str, list[dict]]:
    """Per id: its consumer events and the markers that named one of its copies' offsets,
    ordered by time (a marker's record timestamp, ms -> s); ``endings`` (process name ->
    how it ended) marks each event's process."""
    ids = set(ids)
    events = consumer_events(ids, logs)
    copies: dict[tuple[str, int, int], str] = {}  # (queue, qp, offset) -> id
    for i, evs in events.items():
        for ev in evs:
            if "offset" in ev:
                copies[(queue_of.get(i, ""), ev["qp"], ev["offset"])] = i
    for line in dump:
        if line.get("k") not in RANGE_KINDS:
            continue
        for o in line.get("o", ()):
            i = copies.get((line.get("q"), line.get("qp"), o))
            if i is not None:
                ev = {"t": line.get("ts", 0) / 1000, "e": line["k"], "markers": f"{line['p']}@{line['off']}",
                      "offset": o}
                for extra in ("epoch", "timeout_ms", "delay_ms"):
                    if extra in line:
                        ev[extra] = line[extra]
                events[i].append(ev)
    out = {}
    for i in sorted(ids):
        evs = sorted(events.get(i, ()), key=lambda e: e["t"])
        if endings:
            for ev in evs:
                if "by" in ev:
                    ev["by"] = f"{ev['by']} ({endings.get(ev['by'], '?')})"
        out[i] = evs[:MAX_EVENTS]
    return out
