"""A chaos run's verdict (bench/chaos.py): the ledger's rules applied to every consumer's
log, the markers topic and the dead letters (bench/chaos_ledger.py), and on a violation
what to read it by: the markers diagnosis, the queue records and changelog as stored, and
a trace of a few ids the rules name.

Mixed into :class:`bench.chaos.Harness`.
"""

from __future__ import annotations

import json
import math
import urllib.request
from pathlib import Path

from bench.chaos_processes import ConsumerProcesses
from bench.chaos_deadlines import late_acks
from bench.chaos_ledger import ProcessLog, account, read_log
from bench.chaos_periods import ordered_periods, reordered_in_periods, repeat_figures
from bench.chaos_trace import trace
from bench.chaos_unseen import Ended, held_by_the_dead, unseen_starts
from bench.markers_diagnosis import diagnose
from bench.markers_dump import dump_changelog, dump_markers, dump_queue_records
from kmq.ops.deadletters import list_dead_letters


class RunAccounting(ConsumerProcesses):
    """The verdict of a run (see the module docstring)."""

    ordered: list[str]
    flipped: list[str]  # queues whose mode flips (bench/chaos_flips.py)
    sent: dict[str, list[str]]
    sent_at: dict[str, float]
    groups: dict[str, dict[str, list[str]]]
    flippers: list

    def _explain(self, result: dict) -> None:
        """A violation: what the markers say, which copy of a message is where on the queue
        topic (who wrote what, when), what a restoring worker read, and the named ids' story."""
        result["markers_diagnosis"] = self._diagnose()
        dump_queue_records(self.s, self.work / "queue-records.jsonl", set(self.queues))
        dump_changelog(self.s, self.work / "changelog.jsonl")
        result["trace"] = self._trace(result)
        if self.groups:  # an ordered queue's groups, to read rule 4 by
            (self.work / "groups.json").write_text(json.dumps(self.groups))
        if self.flipped:  # when each grouped message was sent, to read the ordered periods by
            (self.work / "sent_at.json").write_text(json.dumps(self.sent_at))

    def _account(self) -> dict:
        dead_at: dict[str, float] = {}
        dead = self._dead_letters(dead_at)
        parsed = {c.name: read_log(c.log_path, c.ending) for c in self.children}  # each log once
        markers = self._dump_markers()
        late = self._acked_late(parsed, markers)
        unseen = self._held_unseen(parsed, markers)
        groups = {f"{q}/{g}": ids for q in self.ordered for g, ids in self.groups[q].items()}
        if self._shared:  # consumers of a shared queue write no STARTs, in no transaction
            modes = {"ordered": list(self.ordered), "flipped": list(self.flipped),
                     "shared": [q for q in self.queues if q not in self.ordered + self.flipped]}
        else:
            modes = {"transactional": [q for q in self.queues if self.transactional(q)],
                     "plain": [q for q in self.queues if not self.transactional(q)]}
        by_mode = {}
        for mode, queues in modes.items():
            if queues:
                logs = [parsed[c.name] for c in self.children if c.queue in queues]
                by_mode[mode] = account([i for q in queues for i in self.sent[q]], logs, dead,
                                        groups if mode == "ordered" else None, dead_at, late, unseen)
        if "flipped" in by_mode:  # rule 4 only inside ordered periods (bench/chaos_periods.py)
            by_mode["flipped"].reordered, periods = self._reordered_in_periods(parsed, dead_at)
        violations = [f"{mode}: {v}" for mode, acc in by_mode.items() for v in acc.violations]
        # Transactional STARTs close the START/commit window, and a shared queue has none
        # (the dispatcher acquires before it delivers): nothing acked comes back at all. A
        # flipped queue's partition periods are plain: a kill may explain one (rule 2).
        for strict in ("transactional", "shared", "ordered"):
            acc = by_mode.get(strict)
            if acc is not None and acc.redelivered_after_durable_ack:
                violations.append(f"{strict}: {acc.redelivered_after_durable_ack} delivered after a durable ack")
        logs = list(parsed.values())
        everything = account([i for ids in self.sent.values() for i in ids], logs, dead, groups, dead_at, late,
                             unseen)
        total = everything.summary()
        queue_of = {i: q for q, ids in self.sent.items() for i in ids}
        total["lost_by_queue"] = {q: sum(1 for i in everything.lost if queue_of[i] == q) for q in self.queues}
        total["violations"] = violations
        summaries = {m: a.summary() for m, a in by_mode.items()}
        if "flipped" in summaries:
            summaries["flipped"].update(periods, **repeat_figures([parsed[c.name] for c in self.children
                                                                   if c.queue in self.flipped]))
            total["reordered"] += len(by_mode["flipped"].reordered)
        return {"accounting": total, "by_mode": summaries,
                "ok": not violations,
                "processes": {e: sum(1 for c in self.children if c.ending == e)
                              for e in ("killed", "stopped", "crashed", "running")}}

    def _accounted(self) -> bool:
        """Every sent id acked, dead-lettered, or acked by a killed process (in transit)."""
        logs = [read_log(c.log_path, "killed" if c.ending != "running" else "running")
                for c in self.children]
        acked = set().union(*(set(lg.acked) for lg in logs), *(lg.acking for lg in logs
                                                               if lg.ending == "killed"))
        missing = {i for ids in self.sent.values() for i in ids} - acked
        if missing:
            missing -= set(self._dead_letters())
        self._missing = len(missing)
        return not missing

    def _tracker_in_flight(self) -> int | None:
        """In-flight messages of this run's queues, as the trackers' list view reports."""
        for t in self.trackers:
            try:
                url = f"{t.url}/kmq/api/queues?prefix={self.cfg.prefix}-{self.cfg.seed}-&limit=1000"
                with urllib.request.urlopen(url, timeout=10) as r:
                    return sum(row["in_flight"] for row in json.loads(r.read())["queues"])
            except (OSError, ValueError, KeyError):
                continue
        return None

    def _reordered_in_periods(self, parsed: dict[str, ProcessLog],
                              dead_at: dict[str, float]) -> tuple[list[str], dict[str, int]]:
        """Rule 4 on the flipped queues, each inside its ordered periods (bench/chaos_periods.py),
        and how much it covered."""
        out: list[str] = []
        figures = {"ordered_periods": 0, "order_checked": 0}
        for q in self.flipped:
            flips = [f for flipper in self.flippers for f in flipper.flips if f["queue"] == q]
            periods = ordered_periods(flips, end=math.inf)
            logs = [parsed[c.name] for c in self.children if c.queue == q]
            flagged, checked = reordered_in_periods(self.groups[q], self.sent_at, periods, logs, dead_at)
            out += flagged
            figures["ordered_periods"] += len(periods)
            figures["order_checked"] += checked
        return sorted(out), figures

    def _dead_letters(self, at: dict[str, float] | None = None) -> dict[str, str]:
        """id -> reason of this run's dead letters; ``at`` gets id -> when (epoch s)."""
        out = {}
        for q in self.queues:
            for d in list_dead_letters(self.s, q):
                out[d.id] = d.reason
                if at is not None:
                    at[d.id] = min(d.dead_lettered_ms / 1000, at.get(d.id, math.inf))
        return out

    def _dump_markers(self) -> list[dict]:
        """The markers topic of the run's queues, kept as markers.jsonl and read back once."""
        dump = self.work / "markers.jsonl"
        dump_markers(self.s, dump, set(self.queues))
        with dump.open() as f:
            return [json.loads(line) for line in f]

    def _acked_late(self, parsed: dict[str, ProcessLog], markers: list[dict]) -> set[str]:
        """Ids whose first durable ack came behind a TICK past its copy's deadline
        (bench/chaos_deadlines.py), from the markers dump."""
        late = late_acks(markers)
        first: dict[str, tuple[float, tuple[str, int, int]]] = {}  # id -> its earliest durable ack
        for c in self.children:
            log = parsed[c.name]
            for i, (qp, offset) in log.acked_copy.items():
                if i not in first or log.acked[i] < first[i][0]:
                    first[i] = (log.acked[i], (c.queue, qp, offset))
        return {i for i, (_t, copy) in first.items() if copy in late}

    def _held_unseen(self, parsed: dict[str, ProcessLog], markers: list[dict]) -> set[str]:
        """Ids a killed consumer STARTed and never logged receiving (bench/chaos_unseen.py),
        from the markers dump."""
        received: dict[tuple[str, int, int], list[float]] = {}
        id_of: dict[tuple[str, int, int], str] = {}
        for c in self.children:
            for t, i, qp, offset in parsed[c.name].copies:
                received.setdefault((c.queue, qp, offset), []).append(t)
                id_of[(c.queue, qp, offset)] = i
        died = {e["name"]: e["t"] for e in self.events
                if e["kind"] in ("consumer-kill", "consumer-crash")
                or (e["kind"] == "consumer-stop" and e.get("ending") in ("killed", "crashed"))}
        ended = [Ended(c.queue, died[c.name], tuple(parsed[c.name].assigned))
                 for c in self.children if c.name in died]
        return held_by_the_dead(unseen_starts(markers, received), id_of, ended)

    def _trace(self, result: dict) -> dict:
        """What happened to a few ids a rule names (bench/chaos_trace.py), from the logs and
        the markers dump ``_dump_markers`` wrote."""
        acc = result["accounting"]
        ids = {i for key in ("unexplained_after_ack_examples", "unexplained_duplicates_examples",
                             "lost_examples", "reordered_examples") for i in acc.get(key, ())[:3]}
        queue_of = {i: q for q, sent in self.sent.items() for i in sent}
        logs = {c.name: c.log_path.read_text(errors="replace").splitlines()
                for c in self.children if c.log_path.exists()}
        with (self.work / "markers.jsonl").open() as f:
            return trace(ids, queue_of, logs, (json.loads(line) for line in f),
                         {c.name: c.ending for c in self.children})

    def _diagnose(self) -> dict:
        dump = self.work / "markers.jsonl"  # written by _dump_markers
        resumes = [line for log in sorted(self.work.glob("tracker*.log"))
                   for line in log.read_text(errors="replace").splitlines() if "resuming at" in line]
        with dump.open() as f:
            return diagnose((json.loads(line) for line in f), resumes)


# Tracker log lines that explain a violation of the strict rule on shared queues
# (agents/dispatch/dispatcher.py): counted, with a few examples, in every result.
TRACKER_WARNINGS = ("ACQUIRE fenced", "acquired but not delivered", "did not stop in time",
                    "ACQUIRE record of", "dispatching paused", "had not been handed")


def tracker_warnings(paths: list[Path]) -> dict:
    counts = dict.fromkeys(TRACKER_WARNINGS, 0)
    examples: list[str] = []
    for path in paths:
        for line in path.read_text(errors="replace").splitlines():
            for w in TRACKER_WARNINGS:
                if w in line:
                    counts[w] += 1
                    if len(examples) < 5:
                        examples.append(f"{path.name}: {line[-300:]}")
    return {"counts": counts, "examples": examples}
