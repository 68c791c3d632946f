"""Chaos harness: a workload over several queues while consumers and trackers are killed, then exact accounting.

What one run does (bounded in time and count, loopback only, and it ends only
the processes it started, by their pid):

1. Starts ``trackers`` tracker workers (each its own web port and data dir) and
   ``consumers_per_queue`` consumer processes per queue (``bench/chaos_consumer.py``).
2. Sends ``messages_per_queue`` messages to each queue, paced over the chaos phase.
3. Meanwhile: SIGKILLs a random consumer every ~``chaos_s / kills`` seconds and
   starts a new one in its place; at the times in ``tracker_kills`` SIGKILLs a
   tracker worker and restarts it on its data dir (``keep``) or an empty one
   (``wipe``); starts and later stops (SIGTERM) extra consumers (rebalances); with
   ``flip_modes``, flips each queue's mode (``bench/chaos_flips.py``), shared at the end.
4. Drains: waits until every sent id is accounted for, then watches for a quiet
   period (anything acked must not come back), stops everything, and applies
   the ledger's rules (bench/chaos_ledger.py).

    python -m bench.chaos [--kills 200] [--messages 20000] [--seconds 240]   # writes bench/results/chaos.json
    python -m bench.chaos --dispatch shared --ordered-queues 2 --groups 10   # ordered groups: order per group
    python -m bench.chaos --dispatch shared --flip-modes partition,shared,ordered   # modes flip (chaos_flips)
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

import kmq
from bench import tracker_status
from bench.chaos_accounting import RunAccounting, tracker_warnings
from bench.chaos_config import ChaosConfig, parse_config
from bench.chaos_flips import Flipper, flip_schedule
from bench.chaos_processes import Child
from kmq.dev.devstack import TrackerProcess
from kmq.dev.embedded import free_port
from kmq.settings import Settings


class Harness(RunAccounting):
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
        self.flipped = list(self.queues) if config.flip_modes else []
        # ordered or flipped queue -> group -> ids in send order (bench/chaos_ledger.py, rule 4)
        self.groups: dict[str, dict[str, list[str]]] = {q: {} for q in self.ordered + self.flipped}
        self.sent_at: dict[str, float] = {}  # id -> epoch s just before its send (grouped sends)
        self.flippers: list[Flipper] = []
        self._spawned = 0
        self._last_kill: dict[str, float] = {}  # queue -> monotonic time of its last consumer kill
        self._shares: dict[str, tuple[int, tuple]] = {}  # child -> (log bytes read, its shares)
        self._pace = threading.Event()  # never set: waits on it are the chaos pacing
        # A run reusing a directory starts empty: trackers' data dirs from an earlier run
        # (another broker) are ahead of this broker's changelog and Faust refuses them.
        shutil.rmtree(self.work, ignore_errors=True)
        (self.work / "logs").mkdir(parents=True)

    # -- trackers ------------------------------------------------------------------

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
            for f in self.flippers:  # (done already, unless the run was cut short)
                f.finish(final=False)
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
        if not result["ok"]:
            self._explain(result)
        return result

    def _chaos(self, client: kmq.Client) -> dict:
        cfg = self.cfg
        start = time.monotonic()
        hard_end = start + (cfg.chaos_limit_s or 2 * cfg.chaos_s)
        kill_every_s = cfg.chaos_s / max(1, cfg.kills)
        next_kill = start + self.rng.uniform(0.5, 1.5) * kill_every_s
        tracker_plan = sorted((start + f * cfg.chaos_s, mode) for f, mode in cfg.tracker_kills)
        extra_plan = sorted(start + self.rng.uniform(0.1, 0.8) * cfg.chaos_s for _ in range(cfg.rebalances))
        extras: list[tuple[float, Child]] = []
        self.flippers = [Flipper(self.s, q, flip_schedule(cfg.seed * 1000 + k, cfg.chaos_s, cfg.flip_every_s,
                                                          cfg.flip_modes, cfg.flip_second_pct)).start(start)
                         for k, q in enumerate(self.flipped)]
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
            if done and all(f.done for f in self.flippers):
                break
            self._pace.wait(0.2)
        for f in self.flippers:  # the last planned flips (cut short at the hard end), then shared
            f.finish()
        return {"flips": [flip for f in self.flippers for flip in f.flips],
                "consumer_kills": kills, "tracker_kills": tracker_kills, "consumer_crashes": crashes,
                "rebalances": rebalances, "seconds": round(time.monotonic() - start, 1),
                "sent": sum(len(v) for v in self.sent.values()),
                "tracker_modes": [e["mode"] for e in self.events if e["kind"] == "tracker-kill"]}

    def _send_ordered(self, client: kmq.Client, queue: str, n: int) -> None:
        """``n`` more messages, round-robin over the queue's groups (payload: group, seq)."""
        for _ in range(n):
            k = len(self.sent[queue])
            group = f"g{k % self.cfg.groups_per_queue}"
            ids = self.groups[queue].setdefault(group, [])
            sent_at = time.time()  # before the send: ordered periods count only sends inside
            msg_id = client.send(queue, b"chaos %s %d" % (group.encode(), len(ids)), group=group)
            ids.append(msg_id)
            self.sent_at[msg_id] = sent_at
            self.sent[queue].append(msg_id)

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


def run_chaos(settings: Settings, config: ChaosConfig, workdir: Path | None = None,
              say: Callable[[str], None] = print) -> dict:
    """One chaos run against ``settings``' broker (topics must exist); returns the result.

    ``workdir`` (a new temporary directory if None) is emptied first: it holds this run only."""
    work = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="kmq-chaos-"))
    result = Harness(settings, config, work, say).run()
    result["workdir"] = str(work)
    return result


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
           f"--work-ms {args.work_ms:g} --ordered-queues {args.ordered_queues} --groups {args.groups} "
           f"--consumers {args.consumers} --tracker-kills {args.tracker_kills}"
           + (f" --flip-modes {args.flip_modes} --flip-every-s {args.flip_every_s}" if args.flip_modes else "")
           + (f" --lanes {args.lanes}" if args.lanes else ""))
    name = "chaos" if args.dispatch == "partition" else "chaos_ordered" if args.ordered_queues else \
        "chaos_flips" if args.flip_modes else "chaos_shared"
    print(f"saved {save(name, {'command': cmd, **result})}")
    sys.exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    main()
