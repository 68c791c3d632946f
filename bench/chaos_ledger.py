"""Exact accounting of a chaos run from what the consumer processes logged (pure, no Kafka).

Each consumer process appends JSON lines to its own file (``bench/chaos_consumer.py``):

- ``{"e": "start", "pid": P, "t": T}`` once;
- ``{"e": "recv", "m": [[id, delivery_count, partition, offset], ...], "t": T}`` as soon as
  a batch is received, before anything is done with it (the queue offset says which copy:
  ``bench.chaos_trace`` follows it through the markers);
- ``{"e": "acking", "ids": [...], "rejecting": [...], "t": T}`` just before those ids are
  acked (and those rejected), before any of the batch's settlements is sent;
- ``{"e": "settled", "acked": [...], "released": [...], "rejected": [...], "t": T}`` only
  after ``flush()`` returned: those settlements are durable;
- ``{"e": "stop", "t": T}`` after a graceful close (SIGTERM);
- ``{"e": "assigned", "p": [partitions], "g": [partitions], "t": T}`` when the consumer's
  share changes: ``p`` the queue's partitions it fetches, ``g`` everything the group gave it
  (the harness paces kills by these; ``bench.chaos_unseen`` reads ``p``).

The harness adds how each process ended (``killed``, ``stopped``, ``crashed``) and
the dead letters it read back. The rules (docs/reliability.md):

1. **lost = 0**: every sent id is durably acked, dead-lettered, or acked by a process
   that was killed while its ack was in transit (``ack_in_transit``: it sent the ack
   but died before logging that ``flush()`` returned; such an id never came back).
2. **acked means gone**: a delivery logged after an id's durable ack is a violation,
   unless a process that was killed held that id unsettled (the plain START/commit
   window: a re-fetch by the group and a redelivery by the tracker of one range; held
   also when it STARTed the copy and died before logging it, ``bench.chaos_unseen``), or
   the ack reached the markers log behind a TICK past its copy's deadline
   (``acked_late``, from the markers dump: ``bench.chaos_deadlines``; the tracker
   took the copy back first, as the visibility timeout says).
3. **duplicates** are deliveries beyond the first that nobody asked for (a release
   asks): each must be explained by a kill (an earlier copy was unsettled in a
   process that was killed or crashed), a graceful stop (close() gave it back) or
   a late ack. Unexplained duplicates are violations.
4. **reordered = 0** on ordered queues (docs/ordering.md): the first delivery of a
   group's message comes after every earlier message of its group was settled (see
   :func:`out_of_order`).
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

ENDINGS = ("killed", "stopped", "crashed", "running")


@dataclass
class ProcessLog:
    """What one consumer process logged, and how it ended."""

    name: str
    ending: str = "running"
    recv: list[tuple[float, str, int]] = field(default_factory=list)  # (t, id, delivery_count)
    acking: set[str] = field(default_factory=set)  # about to be acked
    settling: dict[str, float] = field(default_factory=dict)  # id -> first "acking" line: ack or reject
    acked: dict[str, float] = field(default_factory=dict)  # id -> time its ack was durable
    released: set[str] = field(default_factory=set)
    rejected: set[str] = field(default_factory=set)
    # Per id: deliveries received and settlements made durable. A process can receive an id
    # again after releasing it; that second delivery is unsettled until settled again.
    received: Counter = field(default_factory=Counter)
    settles: Counter = field(default_factory=Counter)
    # Which copy (queue partition, offset) of an id it acked: the one it received last.
    acked_copy: dict[str, tuple[int, int]] = field(default_factory=dict)
    last_copy: dict[str, tuple[int, int]] = field(default_factory=dict)
    copies: list[tuple[float, str, int, int]] = field(default_factory=list)  # (t, id, partition, offset)
    assigned: list[tuple[float, tuple[int, ...]]] = field(default_factory=list)  # (t, partitions fetched)

    def unsettled(self) -> set[str]:
        """Ids of which it held a delivery it had not durably settled when it ended."""
        return {i for i, n in self.received.items() if n > self.settles[i]}


def parse_log(name: str, lines: Iterable[str], ending: str = "running") -> ProcessLog:
    """A process's log; a torn last line (SIGKILL mid-write) is ignored."""
    if ending not in ENDINGS:
        raise ValueError(f"ending={ending!r}: use one of {ENDINGS}")
    log = ProcessLog(name, ending)
    for line in lines:
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("e") == "recv":
            log.recv += [(ev["t"], m[0], m[1]) for m in ev["m"]]
            log.received.update(m[0] for m in ev["m"])
            log.last_copy.update((m[0], (m[2], m[3])) for m in ev["m"] if len(m) >= 4)
            log.copies += [(ev["t"], m[0], m[2], m[3]) for m in ev["m"] if len(m) >= 4]
        elif ev.get("e") == "assigned":
            log.assigned.append((ev["t"], tuple(ev.get("p", ()))))
        elif ev.get("e") == "acking":
            log.acking.update(ev["ids"])
            for i in [*ev["ids"], *ev.get("rejecting", ())]:
                log.settling.setdefault(i, ev["t"])
        elif ev.get("e") == "settled":
            for i in ev.get("acked", ()):
                log.acked.setdefault(i, ev["t"])
                if i in log.last_copy:
                    log.acked_copy.setdefault(i, log.last_copy[i])
            log.released.update(ev.get("released", ()))
            log.rejected.update(ev.get("rejected", ()))
            for kind in ("acked", "released", "rejected"):
                log.settles.update(ev.get(kind, ()))
    return log


def read_log(path: Path, ending: str) -> ProcessLog:
    """:func:`parse_log` of a file (missing: nothing logged)."""
    text = path.read_text() if path.exists() else ""
    return parse_log(path.stem, text.splitlines(), ending)


@dataclass
class Accounting:
    """The outcome of a run; :attr:`violations` must be empty."""

    sent: int
    delivered: int
    acked: int
    dead_lettered: dict[str, int]
    ack_in_transit: int
    lost: list[str]
    deliveries: int
    requested_redeliveries: int  # after a release
    duplicates: int
    duplicates_after_kill: int
    duplicates_after_graceful_stop: int
    unexplained_duplicates: list[str]
    redelivered_after_durable_ack: int  # all explained by a kill, or listed below (late acks apart)
    unexplained_after_ack: list[str]
    max_deliveries_of_one_id: int
    unexpected_ids: list[str]
    reordered: list[str] = field(default_factory=list)  # ordered queues only (rule 4)
    acked_late: int = 0  # ids acked behind a TICK past their copy's deadline (rule 2)
    duplicates_after_late_ack: int = 0
    redelivered_after_late_ack: int = 0  # not in redelivered_after_durable_ack
    held_unseen: int = 0  # ids held at a kill only by a START their process never logged (rule 2)

    @property
    def violations(self) -> list[str]:
        out = []
        if self.lost:
            out.append(f"{len(self.lost)} lost, e.g. {self.lost[:5]}")
        if self.unexplained_after_ack:
            out.append(f"{len(self.unexplained_after_ack)} delivered after a durable ack with no kill "
                       f"to explain it, e.g. {self.unexplained_after_ack[:5]}")
        if self.unexplained_duplicates:
            out.append(f"{len(self.unexplained_duplicates)} unexplained duplicates, e.g. "
                       f"{self.unexplained_duplicates[:5]}")
        if self.unexpected_ids:
            out.append(f"{len(self.unexpected_ids)} ids delivered that were never sent")
        if self.reordered:
            out.append(f"{len(self.reordered)} delivered before an earlier message of their group "
                       f"was settled, e.g. {self.reordered[:5]}")
        return out

    def summary(self) -> dict:
        """JSON-ready figures (lists shortened to counts and a few examples)."""
        out = {}
        for k, v in self.__dict__.items():
            if isinstance(v, list):
                out[k] = len(v)
                if v:
                    out[f"{k}_examples"] = v[:5]
            else:
                out[k] = v
        out["violations"] = self.violations
        return out


def account(sent: Iterable[str], logs: list[ProcessLog], dead_letters: dict[str, str],
            groups: dict[str, list[str]] | None = None,
            dead_lettered_s: dict[str, float] | None = None,
            acked_late: set[str] | None = None, held_unseen: set[str] | None = None) -> Accounting:
    """Apply the module's rules; ``dead_letters`` maps id -> reason (read from the DLQ topic).

    ``groups`` (ordered queues: group -> its ids in send order) and ``dead_lettered_s``
    (id -> when the tracker dead-lettered it, epoch seconds) add rule 4; ``acked_late``
    (ids whose ack came behind a TICK past its copy's deadline) excuses rules 2 and 3;
    ``held_unseen`` (ids a killed process STARTed but never logged receiving,
    ``bench.chaos_unseen``) count as held at a kill."""
    sent = set(sent)
    acked_late = acked_late or set()
    deliveries: dict[str, list[tuple[float, int, int]]] = defaultdict(list)  # id -> (t, log#, count)
    acked_at: dict[str, float] = {}
    attempted_ack: dict[str, set[int]] = defaultdict(set)  # id -> killed logs that sent its ack
    released: dict[str, int] = defaultdict(int)
    held_at_kill: set[str] = set(held_unseen or ())
    held_at_stop: set[str] = set()
    for n, log in enumerate(logs):
        for t, i, c in log.recv:
            deliveries[i].append((t, n, c))
        for i, t in log.acked.items():
            acked_at[i] = min(t, acked_at.get(i, t))
        for i in log.released:
            released[i] += 1
        unsettled = log.unsettled()
        if log.ending in ("killed", "crashed"):
            held_at_kill |= unsettled
            for i in log.acking & unsettled:  # sent an ack it could not confirm
                attempted_ack[i].add(n)
        elif log.ending == "stopped":
            held_at_stop |= unsettled
    delivered = set(deliveries)
    # In transit: its last delivery went to a process killed while acking it, and it never
    # came back (a release before that delivery, e.g., does not change that).
    never_back = {i for i, acking in attempted_ack.items() if max(deliveries[i])[1] in acking}
    in_transit = (never_back & sent) - set(acked_at) - set(dead_letters)
    lost = sorted(sent - set(acked_at) - set(dead_letters) - in_transit)

    dup_kill = dup_stop = dup_late = dup_other = requested = 0
    unexplained: list[str] = []
    after_ack = after_late_ack = 0
    unexplained_after_ack: list[str] = []
    for i, ds in deliveries.items():
        ds.sort()
        extra = len(ds) - 1
        asked = min(extra, released.get(i, 0))
        requested += asked
        rest = extra - asked
        if rest:
            if i in held_at_kill:
                dup_kill += rest
            elif i in held_at_stop:
                dup_stop += rest
            elif i in acked_late:
                dup_late += rest
            else:
                dup_other += rest
                unexplained.append(i)
        t_ack = acked_at.get(i)
        if t_ack is not None:
            late = [d for d in ds if d[0] > t_ack]
            if late and i in acked_late:
                after_late_ack += len(late)
            elif late:
                after_ack += len(late)
                if i not in held_at_kill:
                    unexplained_after_ack.append(i)
    return Accounting(
        sent=len(sent), delivered=len(delivered & sent), acked=len(set(acked_at) & sent),
        dead_lettered=_count_by(dead_letters, sent), ack_in_transit=len(in_transit), lost=lost,
        deliveries=sum(len(d) for d in deliveries.values()), requested_redeliveries=requested,
        duplicates=dup_kill + dup_stop + dup_late + dup_other,
        duplicates_after_kill=dup_kill, duplicates_after_graceful_stop=dup_stop,
        unexplained_duplicates=sorted(unexplained), redelivered_after_durable_ack=after_ack,
        unexplained_after_ack=sorted(unexplained_after_ack),
        max_deliveries_of_one_id=max((len(d) for d in deliveries.values()), default=0),
        unexpected_ids=sorted(delivered - sent),
        reordered=out_of_order(groups, logs, dead_lettered_s or {}) if groups else [],
        acked_late=len(acked_late & set(acked_at)), duplicates_after_late_ack=dup_late,
        held_unseen=len(set(held_unseen or ()) & delivered),
        redelivered_after_late_ack=after_late_ack)


def out_of_order(groups: dict[str, list[str]], logs: list[ProcessLog],
                 dead_lettered_s: dict[str, float]) -> list[str]:
    """Ids of ordered groups first delivered before an earlier message of their group was
    settled (rule 4); ``groups``: group -> ids in send order.

    A message's settlement is sent at the earliest when a process logged it in an
    ``acking`` line (ack or reject; the line is written before either is sent), or when
    the tracker dead-lettered it (``dead_lettered_s``; max deliveries). Only after that
    can the tracker free the group, the dispatcher hand out the next message, and a
    consumer receive and log it: a chain of causes, so no timing enters the rule, and
    the earliest settlement makes it a necessary condition (no false alarm when an ack
    sent by a killed process was lost and the message settled again later).

    Kills excuse nothing: a head whose consumer was killed (or that was released, or
    timed out) is not settled; it comes back and its group waits for it. A message never
    settled (lost) flags every later message of its group that was delivered.
    """
    first_recv: dict[str, float] = {}
    settled_at: dict[str, float] = dict(dead_lettered_s)
    for log in logs:
        for t, i, _c in log.recv:
            first_recv[i] = min(t, first_recv.get(i, t))
        for i, t in log.settling.items():
            settled_at[i] = min(t, settled_at.get(i, t))
    out: list[str] = []
    for ids in groups.values():
        bar = -math.inf  # the latest settlement of an earlier message of the group
        for i in ids:
            t = first_recv.get(i)
            if t is not None and t < bar:
                out.append(i)
            bar = max(bar, settled_at.get(i, math.inf))
    return sorted(out)


def _count_by(dead_letters: dict[str, str], sent: set[str]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for i, reason in dead_letters.items():
        if i in sent:
            out[reason] += 1
    return dict(out)
