"""Send -> receive latency of a shared queue, idle and under another tenant's flood.

    python -m bench.shared latency [--seconds 10] [--flood 300000] [--flood-in-process] [--worst N]

(the subcommand of bench/shared.py; see its docstring). A message every 20 ms, idle and
while another queue on the same partition gets ``--flood`` messages at once, sent by a
process of its own and drained by another; ``--flood-in-process``: by threads of the
probe's process, as measured before 2026-11-25 23:00. Both modes, partition mode's
flood on another queue of the same partition. ``--worst N``: print the N longest probes
under the flood, how long their own send took and when they were sent, and when the
flood was written.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import kmq
from bench.common import save, stack
from bench.shared import ROOT, Fleet, _argv, wait_handover
from kmq.dev.devstack import settings_env
from kmq.protocol.placement import queue_partitions


def _same_partition_queue(name: str, settings, prefix: str = "flood") -> str:
    """Another queue on the same queue-topic partition as ``name``."""
    target = queue_partitions(name, settings.queue_partitions)[0]
    i = 0
    while True:
        cand = f"{prefix}-{i}"
        if queue_partitions(cand, settings.queue_partitions)[0] == target:
            return cand
        i += 1


def _other_same_partition(name: str, settings) -> str:
    return _same_partition_queue(name, settings, prefix="flood-p")


def probe(client, queue: str, seconds: float, flood=None, worst: int = 0) -> list[float]:
    """Send a message every 20 ms for ``seconds``; latencies (s) of send -> receive.

    ``worst``: print that many of the longest, with when they were sent (s after the start)."""
    lat: list[float] = []
    sent_at: list[float] = []
    send_took: dict[float, float] = {}  # send time -> s until the broker had it
    done = threading.Event()
    with client.consumer(queue, visibility_timeout_s=30) as c:
        time.sleep(0.5)

        def receive() -> None:
            while not done.is_set():
                m = c.receive(0.1)
                if m is not None:
                    lat.append(time.time() - float(m.value))
                    sent_at.append(float(m.value))
                    m.ack()
        started = time.time()
        t = threading.Thread(target=receive)
        t.start()
        if flood is not None:
            flood()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            sent = time.time()
            client.send(queue, repr(sent).encode())
            client.flush()
            send_took[sent] = time.time() - sent
            time.sleep(0.02)
        time.sleep(1.0)
        done.set()
        t.join()
    if worst:
        longest = sorted(zip(lat, sent_at), reverse=True)[:worst]
        print("  longest (ms, of which its send; sent s after the start):", ", ".join(
            f"{x * 1000:.0f} ({send_took.get(at, float('nan')) * 1000:.0f}) @ {at - started:.2f}"
            for x, at in longest), flush=True)
        window = getattr(flood, "sent_between", None)
        if window:
            print("  the flood was sent and flushed from {:.2f} to {:.2f} s after the start".format(
                *(t - started for t in window())), flush=True)
    return lat


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(p * len(xs)))] * 1000, 1) if xs else float("nan")


FLOOD_SENDER = """import sys, time, kmq
c = kmq.Client()
t0 = time.time()
c.send_batch(sys.argv[1], [b"f" * 100] * int(sys.argv[2]))
c.flush(300)
print(t0, time.time(), flush=True)
"""


def _flood_in_process(settings, queue: str, n: int, stop: threading.Event):
    """The flood as first measured: sent and drained by threads of the probe's own process."""
    flooder = kmq.Client(settings=settings)

    def flood() -> None:
        def run() -> None:
            flooder.send_batch(queue, [b"f" * 100] * n)
            flooder.flush(300)
        threading.Thread(target=run, daemon=True).start()

        def drain() -> None:
            with flooder.consumer(queue, visibility_timeout_s=60, max_in_flight=20000, batch_size=5000) as ca:
                while not stop.is_set():
                    ca.receive_batch(5000, 0.2).ack()
        threading.Thread(target=drain, daemon=True).start()
    return flood


def latency(args) -> None:
    results = {}
    with stack(deliveries_partitions=16, dispatch="shared") as (settings, _tracker, _broker):
        client = kmq.Client(settings=settings)
        for mode in ("shared", "partition"):
            b = f"lat-{mode}"
            a = _same_partition_queue(b, settings) if mode == "shared" else _other_same_partition(b, settings)
            if mode == "partition":
                for q in (a, b):
                    client.configure_queue(q, dispatch=mode)
                    wait_handover(client, q)
            idle = probe(client, b, args.seconds)
            stop = threading.Event()
            if args.flood_in_process:  # the first measurements: the flood shared the probe's GIL
                flood = _flood_in_process(settings, a, args.flood, stop)
                drain = None
            else:  # another tenant: its sender and its consumer are processes of their own
                drain = Fleet(settings, a, 1, 0, max_in_flight=20000, batch=True)
                drain.wait(lambda: all(drain.ready), 120, "the flood's consumer ready")

                def flood() -> None:
                    env = {**os.environ, **settings_env(settings), "PYTHONPATH": str(ROOT)}
                    sender.append(subprocess.Popen([sys.executable, "-c", FLOOD_SENDER, a, str(args.flood)],
                                                   env=env, start_new_session=True, stdout=subprocess.PIPE,
                                                   text=True))
                sender: list = []
                flood.sent_between = lambda: tuple(map(float, sender[0].communicate(timeout=60)[0].split()))
            try:
                loaded = probe(client, b, args.seconds, flood, worst=args.worst)
            finally:
                stop.set()
                if drain is not None:
                    drain.stop()
            results[mode] = {
                "idle": {"n": len(idle), "p50_ms": _pct(idle, 0.5), "p99_ms": _pct(idle, 0.99)},
                "flood_same_partition": {"n": len(loaded), "p50_ms": _pct(loaded, 0.5),
                                         "p99_ms": _pct(loaded, 0.99)}}
            print(mode, results[mode], flush=True)
    path = save("shared_latency" + (f"-{args.name}" if args.name else ""),
                {"command": "python -m bench.shared latency " + _argv(args), "results": results,
                 **({"note": args.note} if args.note else {})})
    print(f"saved {path}")
