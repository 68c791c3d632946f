"""The size of a chaos run (bench/chaos.py) and the command's options that ask for one.

A wrong size is refused before anything starts: :class:`ChaosConfig` raises a
``ConfigError`` naming the field, and ``python -m bench.chaos`` says it as a usage error
naming its option.
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass, field

from bench.chaos_flips import MODES
from kmq.errors import ConfigError

DESCRIPTION = ("Chaos harness: a workload over several queues while consumers and trackers are killed, "
               "then exact accounting.")


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
    # Non-empty: every queue's mode flips among these ("partition", "shared", "ordered"; see
    # bench/chaos_flips.py) every ``flip_every_s`` seconds (uniform between the bounds), and
    # ``flip_second_pct`` percent of flips are followed by a second within 100 ms. Needs
    # dispatch="shared" (the mode at the start and, for the drain, at the end of the chaos
    # phase); messages go round-robin to ``groups_per_queue`` groups, as for ordered queues.
    flip_modes: tuple = ()
    flip_every_s: tuple = (1.0, 5.0)
    flip_second_pct: float = 30.0

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
        if wrong is None and self.flip_modes:
            wrong = self._flips_wrong()
        if wrong:
            raise ConfigError(wrong)

    def _flips_wrong(self) -> str | None:
        lo, hi = self.flip_every_s
        if any(m not in MODES for m in self.flip_modes) or len(set(self.flip_modes)) < 2:
            return f"flip_modes={','.join(self.flip_modes)} must name two or more of {','.join(MODES)}"
        if not (math.isfinite(hi) and 0 < lo <= hi):
            return f"flip_every_s={lo:g},{hi:g} must be two numbers of seconds, 0 < MIN <= MAX"
        if self.dispatch != "shared":
            return f"flip_modes={','.join(self.flip_modes)} needs dispatch='shared' (the mode the drain runs in)"
        if self.ordered_queues:
            return f"ordered_queues={self.ordered_queues} with flip_modes: the flips set every queue's ordering"
        return None


# ChaosConfig's fields as this command's options name them (its usage errors say the option).
OPTION_OF = {"queues": "--queues", "messages_per_queue": "--messages", "kills": "--kills", "chaos_s": "--seconds",
             "trackers": "--trackers", "seed": "--seed", "transactional_queues": "--transactional-queues",
             "dispatch": "--dispatch", "work_ms": "--work-ms", "ordered_queues": "--ordered-queues",
             "groups_per_queue": "--groups", "flip_modes": "--flip-modes", "flip_every_s": "--flip-every-s",
             "consumers_per_queue": "--consumers"}


def parse_config(argv: list[str] | None = None) -> tuple[argparse.Namespace, ChaosConfig]:
    """This command's options and the run they ask for; a usage error (exit 2) naming the
    option for a wrong one, before anything starts."""
    ap = argparse.ArgumentParser(prog="python -m bench.chaos", description=DESCRIPTION)
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
    ap.add_argument("--consumers", type=int, default=2, help="consumer processes per queue")
    ap.add_argument("--tracker-kills", default="keep,wipe,keep,wipe",
                    help="tracker SIGKILLs in the chaos phase, each restarted on its data dir (keep) or an "
                         "empty one (wipe); spread evenly (default: at 20, 45, 70 and 90%%)")
    ap.add_argument("--flip-modes", default="",
                    help="flip every queue's mode among these at random (partition,shared,ordered; "
                         "needs --dispatch shared; bench/chaos_flips.py); default: no flips")
    ap.add_argument("--flip-every-s", default="1,5", metavar="MIN,MAX",
                    help="seconds between flips (uniform); 30%% of flips get a second one within 100 ms")
    args = ap.parse_args(argv)
    if args.lanes < 0:
        ap.error(f"--lanes {args.lanes}: give a number of lanes >= 1, or 0 for the default")
    kill_modes = [m for m in args.tracker_kills.split(",") if m]
    if any(m not in ("keep", "wipe") for m in kill_modes):
        ap.error(f"--tracker-kills {args.tracker_kills}: give keep or wipe for each kill, e.g. keep,keep,keep")
    kills = list(zip((0.2, 0.45, 0.7, 0.9), kill_modes)) if args.tracker_kills == "keep,wipe,keep,wipe" else \
        [((k + 1) / (len(kill_modes) + 1), m) for k, m in enumerate(kill_modes)]
    try:
        every_s = tuple(float(x) for x in args.flip_every_s.split(","))
        if len(every_s) != 2:
            raise ValueError
    except ValueError:
        ap.error(f"--flip-every-s {args.flip_every_s}: give MIN,MAX in seconds, e.g. 1,5")
    try:
        cfg = ChaosConfig(queues=args.queues, messages_per_queue=args.messages, kills=args.kills,
                          chaos_s=args.seconds, trackers=args.trackers, seed=args.seed,
                          transactional_queues=args.transactional_queues,
                          tracker_kills=kills, rebalances=8, dispatch=args.dispatch, work_ms=args.work_ms,
                          ordered_queues=args.ordered_queues, groups_per_queue=args.groups,
                          consumers_per_queue=args.consumers, flip_every_s=every_s,
                          flip_modes=tuple(m for m in args.flip_modes.split(",") if m))
    except ConfigError as exc:
        # The message in this command's words: "ordered_queues=2" -> "--ordered-queues 2".
        text = re.sub(r"\b([a-z_]+)=(\S+)", lambda m: f"{OPTION_OF[m[1]]} {m[2].strip(chr(39))}"
                      if m[1] in OPTION_OF else m[0], str(exc))
        ap.error(text)
    return args, cfg
