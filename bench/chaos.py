"""Chaos harness: a workload over several queues while consumers and trackers are killed, then exact accounting.

What one run does (bounded in time and count, loopback only, and it ends only
the processes it started, by their pid):

1. Starts ``trackers`` tracker workers (each its own web port and data dir) and
   ``consumers_per_queue`` consumer processes per queue (``bench/chaos_consumer.py``).
2. Sends ``messages_per_queue`` messages to each queue, paced over the chaos phase.
3. Meanwhile: SIGKILLs a random consumer every ~``chaos_s / kills`` seconds and
   starts a new one in its place; at the times in ``tracker_kills`` SIGKILLs a
   tracker worker and restarts it on its data dir (``keep``) or an empty one
   (``wipe``); starts and later stops (SIGTERM) extra consumers (rebalances).
4. Drains: waits until every sent id is accounted for, then watches for a quiet
   period (anything acked must not come back), stops everything, and applies
   the ledger's rules (bench/chaos_ledger.py).

    python -m bench.chaos [--kills 200] [--messages 20000] [--seconds 240]   # writes bench/results/chaos.json
    python -m bench.chaos --dispatch shared --ordered-queues 2 --groups 10   # ordered groups: order per group
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import kmq
from bench.chaos_deadlines import late_acks
from bench.chaos_ledger import ProcessLog, account, read_log
from bench.chaos_trace import trace
from bench.chaos_unseen import Ended, held_by_the_dead, unseen_starts
from bench.markers_diagnosis import diagnose
from bench import tracker_status
from bench.markers_dump import dump_changelog, dump_markers, dump_queue_records
from kmq.ops.deadletters import list_dead_letters
from kmq.dev.devstack import TrackerProcess, settings_env
from kmq.dev.embedded import free_port
from kmq.errors import ConfigError
from kmq.protocol.placement import queue_partitions
from kmq.settings import Settings

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class ChaosConfig:
    """The size of a run; every phase has a time bound."""

    queues: int = 3
    consumers_per_queue: int = 2
    trackers: int = 3
    messages_per_queue: int = 2000
    kills: int = 55                 # consumer SIGKILLs
    chaos_s: float = 75.0           # the chaos phase lasts about this long
    # ... and ends by this bound even with kills or sends left (default 2 x chaos_s): paced
    # kills wait for settled groups, which a loaded machine forms more slowly.
    chaos_limit_s: float = 0.0
    # (fraction of the chaos phase, "keep" | "wipe"): tracker SIGKILL + restart
    tracker_kills: list = field(default_factory=lambda: [(0.25, "keep"), (0.6, "wipe")])
    rebalances: int = 3             # extra consumers started, and later stopped gracefully
    visibility_s: float = 4.0
    max_deliveries: int = 10
    consumer_session_timeout_ms: int = 3000
    tracker_ready_s: float = 180.0
    drain_s: float = 120.0
    quiet_s: float = 10.0
    seed: int = 7
    prefix: str = "chaos"
    # The first this many queues' consumers write STARTs and offset commits in one
    # transaction (each consumer slot with a stable transactional id); the rest plainly.
    # None: 1 in partition mode, 0 in shared (a shared queue's consumers write no STARTs).
    transactional_queues: int | None = None
    # > 0: a queue's consumer is killed only when its group is settled (every running
    # member joined, their shares cover the topic) and its last kill is this long ago.
    # The embedded broker can leave a group assigning a partition to a dead member forever
    # when members die mid-rebalance (docs/reliability.md). 0: kill at any moment.
    queue_kill_gap_s: float = 0.0
    # Every queue's dispatch mode: "partition" (consumer groups; kills may be paced, see
    # above) or "shared" (the tracker dispatches; no group, so nothing to pace or strand).
    dispatch: str = "partition"
    work_ms: float = 0.0            # how long a consumer works on each batch it received
    # The first this many queues have ordering="group" (shared dispatch only): messages go
    # round-robin to ``groups_per_queue`` groups, and the ledger checks order per group.
    ordered_queues: int = 0
    groups_per_queue: int = 10

    def __post_init__(self) -> None:
        # A wrong size is refused here, before a broker starts (it was a traceback after
        # the start-up, or a run that meant nothing: no trackers, no messages).
        if self.transactional_queues is None:
            self.transactional_queues = 1 if self.dispatch == "partition" else 0
        whole = lambda v, low: isinstance(v, int) and not isinstance(v, bool) and v >= low  # noqa: E731
        wrong = next((f"{name}={getattr(self, name)!r} must be a whole number >= {low}"
                      for name, low in (("queues", 1), ("consumers_per_queue", 1), ("trackers", 1),
                                        ("messages_per_queue", 1), ("kills", 0), ("rebalances", 0),
                                        ("groups_per_queue", 1), ("transactional_queues", 0),
                                        ("ordered_queues", 0))
                      if not whole(getattr(self, name), low)), None)
        if wrong is None and not (math.isfinite(self.chaos_s) and self.chaos_s > 0):
            wrong = f"chaos_s={self.chaos_s!r} must be a number of seconds > 0"
        if wrong is None and not (math.isfinite(self.work_ms) and self.work_ms >= 0):
            wrong = f"work_ms={self.work_ms!r} must be a number of milliseconds >= 0"
        if wrong is None and self.dispatch not in ("partition", "shared"):
            wrong = f"dispatch={self.dispatch!r} must be 'partition' or 'shared'"
        if wrong is None and self.transactional_queues > self.queues:
            wrong = f"transactional_queues={self.transactional_queues} is more than queues={self.queues}"
        if wrong is None and self.transactional_queues and self.dispatch == "shared":
            # It was ignored: a shared queue's consumers write no STARTs to put in a transaction.
            wrong = (f"transactional_queues={self.transactional_queues} needs dispatch='partition' "
                     "(a shared queue's consumers write no STARTs): give 0 with dispatch='shared'")
        if wrong is None and self.ordered_queues > self.queues:
            wrong = f"ordered_queues={self.ordered_queues} is more than queues={self.queues}"
        if wrong is None and self.ordered_queues and self.dispatch != "shared":
            wrong = f"ordered_queues={self.ordered_queues} needs dispatch='shared' (ordering='group' is dispatched)"
        if wrong:
            raise ConfigError(wrong)


@dataclass
class Child:
    """One consumer process we started."""

    name: str
    queue: str
    slot: str
    log_path: Path
    popen: subprocess.Popen
    ending: str = "running"


class Harness:
    """Runs one chaos run; see the module docstring."""

    def __init__(self, settings: Settings, config: ChaosConfig, workdir: Path,
                 say: Callable[[str], None] = print) -> None:
        self.s = settings
        self.cfg = config
        self.work = Path(workdir)
        self.say = say
        self.rng = random.Random(config.seed)
        self.queues = [f"{config.prefix}-{config.seed}-q{i}" for i in range(config.queues)]
        self.children: list[Child] = []
        self.trackers: list[TrackerProcess] = []
        self.events: list[dict] = []
        self.sent: dict[str, list[str]] = {q: [] for q in self.queues}
        if config.ordered_queues and config.dispatch != "shared":
            raise ValueError("ordered_queues needs dispatch='shared' (ordering='group' is dispatched)")
        self.ordered = self.queues[:config.ordered_queues]
        # ordered queue -> group -> ids in send order (bench/chaos_ledger.py, rule 4)
        self.groups: dict[str, dict[str, list[str]]] = {q: {} for q in self.ordered}
        self._spawned = 0
        self._last_kill: dict[str, float] = {}  # queue -> monotonic time of its last consumer kill
        self._shares: dict[str, tuple[int, tuple]] = {}  # child -> (log bytes read, its shares)
        self._pace = threading.Event()  # never set: waits on it are the chaos pacing
        # A run reusing a directory starts empty: trackers' data dirs from an earlier run
        # (another broker) are ahead of this broker's changelog and Faust refuses them.
        shutil.rmtree(self.work, ignore_errors=True)
        (self.work / "logs").mkdir(parents=True)

    # -- processes ---------------------------------------------------------------

    def _event(self, kind: str, **info) -> None:
        self.events.append({"t": round(time.time(), 3), "kind": kind, **info})

    def transactional(self, queue: str) -> bool:
        return not self._shared and self.queues.index(queue) < self.cfg.transactional_queues

    def spawn(self, queue: str, slot: str | None = None) -> Child:
        """Start a consumer; a replacement takes its predecessor's ``slot`` (its transactional id)."""
        self._spawned += 1
        name = f"{queue}-c{self._spawned}"
        slot = slot or f"{queue}-slot{self._spawned}"
        txn = ["--transactional-id", slot] if self.transactional(queue) else []
        log_path = self.work / "logs" / f"{name}.jsonl"
        env = {**os.environ, **settings_env(self.s), "PYTHONPATH": str(ROOT),
               "KMQ_SESSION_TIMEOUT_MS": str(self.cfg.consumer_session_timeout_ms)}
        out = open(self.work / "logs" / f"{name}.out", "wb")
        p = subprocess.Popen(
            [sys.executable, "-m", "bench.chaos_consumer", queue, str(log_path),
             "--visibility-s", str(self.cfg.visibility_s), "--work-ms", str(self.cfg.work_ms), *txn],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        out.close()
        child = Child(name, queue, slot, log_path, p)
        self.children.append(child)
        return child

    def kill(self, child: Child) -> None:
        """SIGKILL one consumer (by its pid) and note it."""
        child.popen.kill()
        child.popen.wait()
        child.ending = "killed"
        self._event("consumer-kill", name=child.name)

    def stop(self, child: Child, grace_s: float = 20.0) -> None:
        """SIGTERM: the consumer settles its batch, closes, exits."""
        child.popen.send_signal(signal.SIGTERM)
        try:
            child.popen.wait(grace_s)
            child.ending = "stopped" if child.popen.returncode == 0 else "crashed"
        except subprocess.TimeoutExpired:
            child.popen.kill()
            child.popen.wait()
            child.ending = "killed"
        self._event("consumer-stop", name=child.name, ending=child.ending)

    def running(self, queue: str | None = None) -> list[Child]:
        return [c for c in self.children if c.ending == "running" and (queue is None or c.queue == queue)]

    def reap(self) -> int:
        """Children that exited on their own: noted as crashed and replaced."""
        n = 0
        for c in self.running():
            if c.popen.poll() is not None:
                c.ending = "crashed"
                self._event("consumer-crash", name=c.name, returncode=c.popen.returncode)
                self.spawn(c.queue, c.slot)
                n += 1
        return n

    def start_tracker(self, k: int, data_dir: Path) -> TrackerProcess:
        s = self.s.replace(web_port=free_port(), data_dir=str(data_dir))
        t = TrackerProcess(s, self.work / f"tracker{k}.log").start(wait=False)
        return t

    def trackers_ready(self) -> bool:
        """Every worker answers and together they own every markers partition."""
        owned: set[int] = set()
        for t in self.trackers:
            h = t.health()
            if h is None or not h.get("ready", False):
                return False
            owned.update(h.get("partitions", []))
        return owned >= set(range(self.s.markers_partitions))

    def wait_until(self, what: str, condition: Callable[[], bool], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                why = "" if condition != self.trackers_ready else \
                    "\n" + tracker_status.describe(self.trackers, self.s.markers_partitions)
                raise TimeoutError(f"chaos: {what} not reached within {timeout_s:g}s ({self.work}){why}")
            self._pace.wait(0.25)

    # -- the run -------------------------------------------------------------------

    def run(self) -> dict:
        cfg = self.cfg
        t0 = time.monotonic()
        client = kmq.Client(settings=self.s)
        # Before the trackers start: each reads the settings to their end at start, so no
        # dispatcher ever takes an ordered queue for an unordered one.
        for q in self.queues:
            client.configure_queue(q, max_deliveries=cfg.max_deliveries, dispatch=cfg.dispatch,
                                   **({"ordering": "group"} if q in self.ordered else {}))
        try:  # (a SIGTERM while the trackers start stops those started too)
            for k in range(cfg.trackers):
                self.trackers.append(self.start_tracker(k, self.work / f"tracker{k}-data-0"))
            self.wait_until("tracker workers ready", self.trackers_ready, cfg.tracker_ready_s)
            for q in self.queues:
                for _ in range(cfg.consumers_per_queue):
                    self.spawn(q)
            # Failures start once each queue's group has formed (a deployment running, then
            # failing): on the embedded broker a member killed during a brand-new group's
            # first join left that group never assigning again (docs/reliability.md).
            self.wait_until("every queue's group settled", self._groups_settled, cfg.tracker_ready_s)
            self.say(f"chaos: {cfg.trackers} trackers ready, {len(self.queues)} groups formed after "
                     f"{time.monotonic() - t0:.0f}s; {len(self.children)} consumers")
            chaos = self._chaos(client)
            drain = self._drain()
        finally:
            for c in self.running():
                self.stop(c)
            for t in self.trackers:
                t.stop()
            client.close()
        result = self._account()
        result.update(chaos=chaos, drain=drain, config=asdict(cfg),
                      elapsed_s=round(time.monotonic() - t0, 1),
                      tracker_warnings=tracker_warnings(sorted(self.work.glob("tracker*.log"))))
        (self.work / "events.json").write_text(json.dumps(self.events, indent=1))
        if not result["ok"]:  # what the markers say, to read the violation by
            result["markers_diagnosis"] = self._diagnose()
            # and which copy of a message is where on the queue topic (who wrote what, when)
            dump_queue_records(self.s, self.work / "queue-records.jsonl", set(self.queues))
            dump_changelog(self.s, self.work / "changelog.jsonl")  # what a restoring worker read
            result["trace"] = self._trace(result)
            if self.groups:  # an ordered queue's groups, to read rule 4 by
                (self.work / "groups.json").write_text(json.dumps(self.groups))
        return result

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

    def _chaos(self, client: kmq.Client) -> dict:
        cfg = self.cfg
        start = time.monotonic()
        hard_end = start + (cfg.chaos_limit_s or 2 * cfg.chaos_s)
        kill_every_s = cfg.chaos_s / max(1, cfg.kills)
        next_kill = start + self.rng.uniform(0.5, 1.5) * kill_every_s
        tracker_plan = sorted((start + f * cfg.chaos_s, mode) for f, mode in cfg.tracker_kills)
        extra_plan = sorted(start + self.rng.uniform(0.1, 0.8) * cfg.chaos_s for _ in range(cfg.rebalances))
        extras: list[tuple[float, Child]] = []
        kills = tracker_kills = crashes = rebalances = 0
        generation = 0
        while time.monotonic() < hard_end:
            now = time.monotonic()
            sending = any(len(v) < cfg.messages_per_queue for v in self.sent.values())
            if sending:
                # Paced by the clock, not by loop turns: a loop slowed by a loaded machine sends
                # more a turn and still ends its sends in the first 80% of the phase.
                due = min(cfg.messages_per_queue,
                          1 + int(cfg.messages_per_queue * (now - start) / max(0.8 * cfg.chaos_s, 1e-3)))
                for q in self.queues:
                    n = max(0, due - len(self.sent[q]))
                    if n and q in self.groups:
                        self._send_ordered(client, q, n)
                    elif n:
                        self.sent[q] += client.send_batch(q, [b"chaos %d" % i for i in range(n)])
                client.flush()
            victims = self._killable(now) if kills < cfg.kills and now >= next_kill else []
            if victims:
                victim = self.rng.choice(victims)
                self.kill(victim)
                self._last_kill[victim.queue] = now
                if not any(e is victim for _, e in extras):
                    self.spawn(victim.queue, victim.slot)
                kills += 1
                next_kill = now + self.rng.uniform(0.5, 1.5) * kill_every_s
            if tracker_plan and now >= tracker_plan[0][0]:
                _, mode = tracker_plan.pop(0)
                k = tracker_kills % len(self.trackers)
                old = self.trackers[k]
                old.kill()
                generation += 1
                data = Path(old.settings.data_dir) if mode == "keep" else \
                    self.work / f"tracker{k}-data-{generation}"
                self._event("tracker-kill", worker=k, mode=mode)
                self.trackers[k] = self.start_tracker(k, data)
                tracker_kills += 1
            if extra_plan and now >= extra_plan[0]:
                extra_plan.pop(0)
                extras.append((now + self.rng.uniform(3, 8), self.spawn(self.rng.choice(self.queues))))
                self._event("rebalance-join", name=extras[-1][1].name)
                rebalances += 1
            for due, child in list(extras):
                # Paced like kills: an extra leaves a settled group, not one mid-rebalance.
                if now >= due and (not self._paced or self._group_settled(child.queue)):
                    extras.remove((due, child))
                    if child.ending == "running":
                        self.stop(child)
                        rebalances += 1
            crashes += self.reap()
            done = kills >= cfg.kills and not tracker_plan and not extra_plan and not extras and not sending
            if done:
                break
            self._pace.wait(0.2)
        return {"consumer_kills": kills, "tracker_kills": tracker_kills, "consumer_crashes": crashes,
                "rebalances": rebalances, "seconds": round(time.monotonic() - start, 1),
                "sent": sum(len(v) for v in self.sent.values()),
                "tracker_modes": [e["mode"] for e in self.events if e["kind"] == "tracker-kill"]}

    def _send_ordered(self, client: kmq.Client, queue: str, n: int) -> None:
        """``n`` more messages, round-robin over the queue's groups (payload: group, seq)."""
        for _ in range(n):
            k = len(self.sent[queue])
            group = f"g{k % self.cfg.groups_per_queue}"
            ids = self.groups[queue].setdefault(group, [])
            msg_id = client.send(queue, b"chaos %s %d" % (group.encode(), len(ids)), group=group)
            ids.append(msg_id)
            self.sent[queue].append(msg_id)

    @property
    def _shared(self) -> bool:
        """The run's queues are dispatched by the tracker: no consumer group at all."""
        return self.cfg.dispatch == "shared"

    def _queue_held(self, queue: str, shares: list[tuple] | None = None) -> bool:
        """The queue's partitions are fetched by its running consumers (their "assigned" lines);
        a shared queue's are read by its dispatcher whoever consumes."""
        if self._shared:
            return True
        shares = shares if shares is not None else [self._share(c) for c in self.running(queue)]
        held = {p for fetched, _ in shares for p in fetched or []}
        return held >= set(queue_partitions(queue, self.s.queue_partitions, 1))

    def _group_settled(self, queue: str) -> bool:
        """The queue's group is between rebalances: every running member has joined, their
        shares split the whole topic with nothing missing (a dead member still counted by
        the broker holds a share nobody running has), and the queue's partitions are fetched.
        A shared queue has no group: it is settled once a consumer runs."""
        if self._shared:
            return bool(self.running(queue))
        shares = [self._share(c) for c in self.running(queue)]
        if not shares or any(not given for _, given in shares):
            return False
        everything = sorted(p for _, given in shares for p in given)
        return everything == list(range(self.s.queue_partitions)) and self._queue_held(queue, shares)

    def _groups_settled(self) -> bool:
        return all(self._group_settled(q) for q in self.queues)

    @property
    def _paced(self) -> bool:
        """Membership changes wait for a settled group (``queue_kill_gap_s`` > 0)."""
        return self.cfg.queue_kill_gap_s > 0

    def _killable(self, now: float) -> list[Child]:
        """Consumers that may be killed now (all, unless the run is paced)."""
        if not self._paced:
            return self.running()
        gap = self.cfg.queue_kill_gap_s
        queues = [q for q in self.queues
                  if now - self._last_kill.get(q, -gap) >= gap and self._group_settled(q)]
        return [c for q in queues for c in self.running(q)]

    def _share(self, child: Child) -> tuple[list[int] | None, list[int] | None]:
        """What ``child`` last said it fetches and what its group gave it; reads only what
        its log gained since the previous call (the pacing asks several times a second)."""
        read_bytes, share = self._shares.get(child.name, (0, (None, None)))
        try:
            with open(child.log_path, "rb") as f:
                f.seek(read_bytes)
                new = f.read()
        except FileNotFoundError:
            return share
        complete = new[:new.rfind(b"\n") + 1]  # a torn last line waits for its end
        for line in complete.splitlines():
            if b'"assigned"' in line:
                try:
                    rec = json.loads(line)
                    share = (rec["p"], rec.get("g"))
                except (ValueError, KeyError):  # a torn line of a killed process
                    continue
        self._shares[child.name] = (read_bytes + len(complete), share)
        return share

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

    def _dead_letters(self, at: dict[str, float] | None = None) -> dict[str, str]:
        """id -> reason of this run's dead letters; ``at`` gets id -> when (epoch s)."""
        out = {}
        for q in self.queues:
            for d in list_dead_letters(self.s, q):
                out[d.id] = d.reason
                if at is not None:
                    at[d.id] = min(d.dead_lettered_ms / 1000, at.get(d.id, math.inf))
        return out

    def _drain(self) -> dict:
        start = time.monotonic()
        self.wait_until("tracker workers ready after the chaos", self.trackers_ready,
                        self.cfg.tracker_ready_s)
        self._missing = -1

        def settled() -> bool:
            self.reap()
            return self._accounted()
        try:
            self.wait_until("every sent id accounted for", settled, self.cfg.drain_s)
        except TimeoutError as exc:
            self.say(f"{exc}: {self._missing} missing")
        drained_s = time.monotonic() - start
        groups = self._group_states() if self._missing else None
        # Queues whose partition no live member fetches even after the whole drain: the
        # embedded broker's group fault (docs/reliability.md), reported apart from loss.
        stranded = [q for q in self.queues if not self._queue_held(q)] if self._missing else []
        self._pace.wait(self.cfg.quiet_s)  # the quiet period: nothing acked may come back
        return {"drain_s": round(drained_s, 1), "missing_at_drain_end": self._missing,
                "tracker_in_flight_at_end": self._tracker_in_flight(), "groups_at_drain_end": groups,
                "stranded_queues": stranded}

    def _group_states(self) -> dict:
        """For diagnosis of a drain that did not finish: each live consumer's last
        (fetched, given by the group) partitions. Tansu 0.6.0 answers no DescribeGroups."""
        return {"members": {c.name: self._share(c) for c in self.running()}}

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

    def _account(self) -> dict:
        dead_at: dict[str, float] = {}
        dead = self._dead_letters(dead_at)
        parsed = {c.name: read_log(c.log_path, c.ending) for c in self.children}  # each log once
        markers = self._dump_markers()
        late = self._acked_late(parsed, markers)
        unseen = self._held_unseen(parsed, markers)
        groups = {f"{q}/{g}": ids for q in self.ordered for g, ids in self.groups[q].items()}
        if self._shared:  # consumers of a shared queue write no STARTs, in no transaction
            modes = {"ordered": list(self.ordered),
                     "shared": [q for q in self.queues if q not in self.ordered]}
        else:
            modes = {"transactional": [q for q in self.queues if self.transactional(q)],
                     "plain": [q for q in self.queues if not self.transactional(q)]}
        by_mode = {}
        for mode, queues in modes.items():
            if queues:
                logs = [parsed[c.name] for c in self.children if c.queue in queues]
                by_mode[mode] = account([i for q in queues for i in self.sent[q]], logs, dead,
                                        groups if mode == "ordered" else None, dead_at, late, unseen)
        violations = [f"{mode}: {v}" for mode, acc in by_mode.items() for v in acc.violations]
        # Transactional STARTs close the START/commit window, and a shared queue has none
        # (the dispatcher acquires before it delivers): nothing acked comes back at all.
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
        return {"accounting": total, "by_mode": {m: a.summary() for m, a in by_mode.items()},
                "ok": not violations,
                "processes": {e: sum(1 for c in self.children if c.ending == e)
                              for e in ("killed", "stopped", "crashed", "running")}}


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


def run_chaos(settings: Settings, config: ChaosConfig, workdir: Path | None = None,
              say: Callable[[str], None] = print) -> dict:
    """One chaos run against ``settings``' broker (topics must exist); returns the result.

    ``workdir`` (a new temporary directory if None) is emptied first: it holds this run only."""
    work = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="kmq-chaos-"))
    result = Harness(settings, config, work, say).run()
    result["workdir"] = str(work)
    return result


# ChaosConfig's fields as this command's options name them (its usage errors say the option).
OPTION_OF = {"queues": "--queues", "messages_per_queue": "--messages", "kills": "--kills", "chaos_s": "--seconds",
             "trackers": "--trackers", "seed": "--seed", "transactional_queues": "--transactional-queues",
             "dispatch": "--dispatch", "work_ms": "--work-ms", "ordered_queues": "--ordered-queues",
             "groups_per_queue": "--groups"}


def parse_config(argv: list[str] | None = None) -> tuple[argparse.Namespace, ChaosConfig]:
    """This command's options and the run they ask for; a usage error (exit 2) naming the
    option for a wrong one, before anything starts."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=200)
    ap.add_argument("--messages", type=int, default=20000, help="messages per queue")
    ap.add_argument("--queues", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=240.0, help="length of the chaos phase")
    ap.add_argument("--trackers", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--transactional-queues", type=int, default=None,
                    help="how many queues' consumers use transactional STARTs (partition mode only; "
                         "default 1, 0 with --dispatch shared)")
    ap.add_argument("--dispatch", choices=("partition", "shared"), default="partition",
                    help="every queue's dispatch mode")
    ap.add_argument("--work-ms", type=float, default=0.0, help="time a consumer works on each batch")
    ap.add_argument("--ordered-queues", type=int, default=0,
                    help="how many queues have ordering='group' (needs --dispatch shared)")
    ap.add_argument("--groups", type=int, default=10, help="groups per ordered queue")
    ap.add_argument("--lanes", type=int, default=0,
                    help="KMQ_DELIVERIES_PARTITIONS (0: the default); a few make shared consumers share "
                         "lanes, and with them consumers move after 4 KiB of others' records "
                         "(kmq.consumer.lane_choice's threshold is for long-lived consumers)")
    args = ap.parse_args(argv)
    if args.lanes < 0:
        ap.error(f"--lanes {args.lanes}: give a number of lanes >= 1, or 0 for the default")
    try:
        cfg = ChaosConfig(queues=args.queues, messages_per_queue=args.messages, kills=args.kills,
                          chaos_s=args.seconds, trackers=args.trackers, seed=args.seed,
                          transactional_queues=args.transactional_queues,
                          tracker_kills=[(0.2, "keep"), (0.45, "wipe"), (0.7, "keep"), (0.9, "wipe")],
                          rebalances=8, dispatch=args.dispatch, work_ms=args.work_ms,
                          ordered_queues=args.ordered_queues, groups_per_queue=args.groups)
    except ConfigError as exc:
        # The message in this command's words: "ordered_queues=2" -> "--ordered-queues 2".
        text = re.sub(r"\b([a-z_]+)=(\S+)", lambda m: f"{OPTION_OF[m[1]]} {m[2].strip(chr(39))}"
                      if m[1] in OPTION_OF else m[0], str(exc))
        ap.error(text)
    return args, cfg


def main() -> None:
    from bench.common import save, stack

    args, cfg = parse_config()
    # A SIGTERM (`timeout`, a CI's cancel) unwinds like Ctrl-C: the finally blocks and the
    # stack stop the consumers, trackers and broker this run started, instead of leaving
    # them running (a run stopped by `timeout` left 11 processes behind).
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    lanes = {"deliveries_partitions": args.lanes} if args.lanes else {}
    if args.lanes:
        os.environ["KMQ_CHAOS_LANE_MOVE_BYTES"] = "4096"  # the consumers' environment
    with stack(tracker=False, dispatch=args.dispatch, queue_partitions=8, markers_partitions=8,
               visibility_timeout_s=cfg.visibility_s, **lanes) as (settings, _t, _b):
        result = run_chaos(settings, cfg)
    print(json.dumps({k: result[k] for k in ("ok", "chaos", "drain", "accounting", "by_mode")}, indent=1))
    cmd = (f"python -m bench.chaos --kills {args.kills} --messages {args.messages} --queues {args.queues} "
           f"--seconds {args.seconds:g} --trackers {args.trackers} --seed {args.seed} "
           f"--transactional-queues {cfg.transactional_queues} --dispatch {args.dispatch} "
           f"--work-ms {args.work_ms:g} --ordered-queues {args.ordered_queues} --groups {args.groups}"
           + (f" --lanes {args.lanes}" if args.lanes else ""))
    name = "chaos" if args.dispatch == "partition" else "chaos_ordered" if args.ordered_queues else "chaos_shared"
    print(f"saved {save(name, {'command': cmd, **result})}")
    sys.exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    main()
