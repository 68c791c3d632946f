"""The consumer processes of a chaos run (bench/chaos.py): started, killed, stopped,
replaced, and what their groups gave them (the pacing of kills waits for settled groups).

Mixed into :class:`bench.chaos.Harness`; ends only the processes it started, by pid.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.chaos_config import ChaosConfig
from kmq.dev.devstack import settings_env
from kmq.protocol.placement import queue_partitions
from kmq.settings import Settings

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Child:
    """One consumer process we started."""

    name: str
    queue: str
    slot: str
    log_path: Path
    popen: subprocess.Popen
    ending: str = "running"


class ConsumerProcesses:
    """The run's consumer processes (see the module docstring)."""

    s: Settings
    cfg: ChaosConfig
    work: Path
    queues: list[str]
    children: list[Child]
    _spawned: int
    _last_kill: dict[str, float]   # queue -> monotonic time of its last consumer kill
    _shares: dict[str, tuple[int, tuple]]  # child -> (log bytes read, its shares)
    events: list[dict]

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

    def _group_states(self) -> dict:
        """For diagnosis of a drain that did not finish: each live consumer's last
        (fetched, given by the group) partitions. Tansu 0.6.0 answers no DescribeGroups."""
        return {"members": {c.name: self._share(c) for c in self.running()}}
