"""Hostile CREDITs: what made-up consumer ids and queues cost a shared queue's dispatcher.

Anyone who may write the markers topic may write a CREDIT naming any consumer id and
any queue, with a 12 h lease. This folds such CREDITs into a dispatcher (its event
handling, no broker: the lanes are stand-ins) and measures the consumers it keeps,
tracemalloc's view of the memory they hold, and what one round's lease expiry and
demand sum then take (``time.process_time``):

    python -m bench.hostile_credits [--credits 200000] [--queues 1]

``--queues 1``: every CREDIT a new id of one queue; ``--queues N``: spread over N
made-up queues. The dispatcher keeps at most ``MAX_CONSUMERS_PER_QUEUE`` of a queue and
``MAX_CONSUMERS_PER_PARTITION`` of a markers partition (kmq.protocol.limits).
"""

from __future__ import annotations

import argparse
import logging
import time
import tracemalloc
from types import SimpleNamespace

from agents.dispatch.dispatcher import Dispatcher
from agents.dispatch.epochs import OwnedPartition
from kmq.protocol import markers as M
from kmq.protocol.limits import MAX_TIMEOUT_MS
from kmq.settings import Settings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--credits", type=int, default=200_000)
    ap.add_argument("--queues", type=int, default=1)
    args = ap.parse_args()
    logging.getLogger("kmq.tracker.dispatcher").setLevel(logging.ERROR)
    d = Dispatcher(Settings(), configs=lambda: None)
    d._lanes = SimpleNamespace(layout=SimpleNamespace(count=256), farewell=lambda *a: None)
    part = d._parts[0] = OwnedPartition(7, ready=True)
    tracemalloc.start()
    for i in range(args.credits):
        d._credit(0, M.Credit(f"q{i % args.queues}", f"made-up-{i:012d}", 1, 0, 0, 5, MAX_TIMEOUT_MS, 30_000))
    held_mib = tracemalloc.get_traced_memory()[0] / 2**20
    tracemalloc.stop()
    started = time.process_time()
    d._expire_consumers(int(time.monotonic() * 1000))
    demand = sum(r.demand() for r in part.rosters.values())
    round_s = time.process_time() - started
    print(f"{args.credits:,} CREDITs over {args.queues:,} queue(s): {part.consumers:,} consumers kept in "
          f"{len(part.rosters):,} rosters (demand {demand:,}), {held_mib:.0f} MiB held, one round's expiry "
          f"and demand {round_s * 1000:.0f} ms, {d.stats.get('credits-refused', 0):,} refused")


if __name__ == "__main__":
    main()
