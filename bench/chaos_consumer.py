"""One consumer process of a chaos run: receive, settle, and log each step (see bench/chaos_ledger.py).

    python -m bench.chaos_consumer QUEUE LOG_PATH [--release-pct 2] [--reject-pct 1] [--transactional-id ID]

Settings come from ``KMQ_*`` variables. Most messages are acked; a message is
rejected if its id hashes into ``--reject-pct`` percent, released once (on its
first delivery, 0.2 s delay) if it hashes into the next ``--release-pct``
percent. Every log write is one ``os.write`` of whole lines to a file opened
with O_APPEND, so a SIGKILL leaves at worst a torn last line, which the ledger
ignores. SIGTERM: finish the batch, close (which gives back what is held), exit 0.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import threading
import time
import zlib

import kmq
from kmq.consumer import lane_choice

RELEASE_DELAY_S = 0.2


def fate(msg_id: str, delivery_count: int, reject_pct: int, release_pct: int) -> str:
    """What the workload does with one delivery: ack, release or reject (deterministic)."""
    bucket = zlib.crc32(msg_id.encode()) % 100
    if bucket < reject_pct:
        return "reject"
    if bucket < reject_pct + release_pct and delivery_count == 1:
        return "release"
    return "ack"


class JsonLines:
    """Append-only JSON-lines log; one write() per call."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, **event) -> None:
        os.write(self._fd, (json.dumps({**event, "t": time.time()}) + "\n").encode())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("queue")
    ap.add_argument("log_path")
    ap.add_argument("--release-pct", type=int, default=2)
    ap.add_argument("--reject-pct", type=int, default=1)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--visibility-s", type=float, default=4.0)
    ap.add_argument("--transactional-id", help="transactional STARTs, with this stable instance id")
    ap.add_argument("--work-ms", type=float, default=0.0,
                    help="time each batch takes to handle, so that kills catch messages held")
    args = ap.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    log = JsonLines(args.log_path)
    log.write(e="start", pid=os.getpid())
    # The consumer's own notes (a lane move, a missing FAREWELL) go to the child's .out file.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("kmq.consumer").setLevel(logging.INFO)
    if os.environ.get("KMQ_CHAOS_LANE_MOVE_BYTES"):  # lane moves at chaos's small sizes (bench.chaos --lanes)
        lane_choice.MIN_OTHER_BYTES = int(os.environ["KMQ_CHAOS_LANE_MOVE_BYTES"])
        lane_choice.FIRST_MOVE_AFTER_S = 0.2
    client = kmq.Client()
    # batch_size = what one receive_batch takes: nothing fetched waits unlogged in a buffer.
    options = {"transactional": True, "transactional_id": args.transactional_id} \
        if args.transactional_id else {}
    if os.environ.get("KMQ_CHAOS_DEBUG"):  # librdkafka debug contexts, e.g. "cgrp" (to stderr)
        options["config"] = {"debug": os.environ["KMQ_CHAOS_DEBUG"]}
    c = client.consumer(args.queue, visibility_timeout_s=args.visibility_s,
                        max_in_flight=args.batch, batch_size=args.batch, **options)
    shares: tuple | None = None
    while not stop.is_set():
        batch = c.receive_batch(args.batch, timeout_s=0.5)
        if (c.assignment, c.group_share) != shares:  # the harness paces kills by these
            shares = (c.assignment, c.group_share)
            log.write(e="assigned", p=sorted(shares[0]), g=sorted(shares[1]))
        if not batch:
            continue
        log.write(e="recv", m=[[m.id, m.delivery_count, m.partition, m.offset] for m in batch])
        if args.work_ms:
            stop.wait(args.work_ms / 1000)  # the work itself (a SIGTERM cuts it short)
        fates = [(m, fate(m.id, m.delivery_count, args.reject_pct, args.release_pct)) for m in batch]
        done: dict[str, list[str]] = {
            kind: [m.id for m, what in fates if what == verb]
            for kind, verb in (("acked", "ack"), ("released", "release"), ("rejected", "reject"))}
        # Before any settlement is sent: an ordered group may go on only after this line.
        log.write(e="acking", ids=done["acked"], rejecting=done["rejected"])
        for m, what in fates:
            if what == "reject":
                m.reject("chaos-reject")
            elif what == "release":
                m.release(RELEASE_DELAY_S)
            else:
                m.ack()
        c.flush()  # durable from here on: these must never come back
        log.write(e="settled", **done)
    c.close()
    client.close()
    log.write(e="stop")


if __name__ == "__main__":
    main()
