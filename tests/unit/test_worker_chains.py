"""kmq.worker on an ordered queue: a batch holding several messages of a group runs them
one after another (never two of a group at once), gives back the rest of a run after a
failure, and still runs different groups at once."""

from __future__ import annotations

import threading
from collections import defaultdict

import pytest

from kmq.message import ACKED
from kmq.worker.registry import Handler
from kmq.worker.runner import HandlerRunner
from kmq.worker.shutdown import ShutdownSignal
from tests.conftest import wait_for
from tests.gate_harness import Client, consumer, deliver, returned


@pytest.mark.parametrize("is_async", [False, True])
def test_a_worker_never_runs_two_of_a_group_at_once_and_gives_back_after_a_failure(is_async):
    c = consumer()
    runs = [deliver(c, ["a", "b", "a", "c", "a", "b", "b"]), deliver(c, ["c", "d", "c", "bad", "bad", "a"])]
    lock = threading.Lock()
    running: dict[str, int] = defaultdict(int)
    seen: list[tuple[str, bytes]] = []
    overlaps: list[str] = []
    most = [0]

    def body(msg):
        g = msg.group
        with lock:
            running[g] += 1
            if running[g] > 1:
                overlaps.append(g)
            most[0] = max(most[0], sum(running.values()))
            seen.append((g, msg.value))
        try:
            if g == "bad":
                raise RuntimeError("fails: its run's next is given back")
        finally:
            with lock:
                running[g] -= 1

    if is_async:
        async def fn(msg):
            body(msg)
    else:
        def fn(msg):
            body(msg)
    shutdown = ShutdownSignal(30.0)
    runner = HandlerRunner(Client(c), Handler(fn=fn, queue="q", concurrency=4), shutdown)
    t = threading.Thread(target=runner.run)
    t.start()
    try:
        wait_for(lambda: all(r.state[rel] for r in runs for rel in r.rels), 30,
                 what="every message settled")
    finally:
        shutdown.signal(0.0)
        t.join(30)
    assert not overlaps
    by_group = defaultdict(list)
    for g, v in seen:
        by_group[g].append(int(v))
    assert all(vs == sorted(vs) for vs in by_group.values())
    assert by_group["bad"] == [runs[1].ref.start + 3]  # the second "bad" never ran ...
    assert returned(c) == [(runs[1], 4)]               # ... it was given back uncounted
    assert runner.queued == 0


def test_groups_whose_bytes_are_not_utf8_run_at_once():
    # b"\xff" and b"\xfe" both read as "\ufffd" in Message.group: chained as one group,
    # the second would wait for the first, which waits for it (until the deadline)
    c = consumer()
    run = deliver(c, [b"\xff", b"\xfe"])
    started = {b"\xff": threading.Event(), b"\xfe": threading.Event()}

    def fn(msg):
        started[msg.group_bytes].set()
        other = b"\xfe" if msg.group_bytes == b"\xff" else b"\xff"
        if not started[other].wait(10):
            raise RuntimeError("the other group never ran beside this one")

    shutdown = ShutdownSignal(30.0)
    runner = HandlerRunner(Client(c), Handler(fn=fn, queue="q", concurrency=2), shutdown)
    t = threading.Thread(target=runner.run)
    t.start()
    try:
        wait_for(lambda: all(run.state[rel] for rel in run.rels), 30, what="both settled")
    finally:
        shutdown.signal(0.0)
        t.join(30)
    assert [run.state[rel] for rel in run.rels] == [ACKED, ACKED] and not returned(c)
    assert all(e.is_set() for e in started.values())


def test_no_handler_runs_before_the_worker_says_ready():
    # docs/workers.md: `ready` once every handler's consumer is open. A runner received,
    # handled and logged as soon as its own consumer was open, ahead of that line.
    c = consumer(ordering="none")
    deliver(c, [None])
    asked = []
    receive_batch = c.receive_batch
    c.receive_batch = lambda *args: asked.append(1) or receive_batch(*args)
    handled = threading.Event()
    shutdown = ShutdownSignal(30.0)
    runner = HandlerRunner(Client(c), Handler(fn=lambda msg: handled.set(), queue="q"), shutdown)
    runner.go.clear()  # as kmq.worker.main does, until its `ready` line
    t = threading.Thread(target=runner.run)
    t.start()
    try:
        wait_for(runner.ready.is_set, 30, what="the consumer open")
        assert asked == []  # it waits for the line (it would have asked at once)
        runner.go.set()
        wait_for(handled.is_set, 30, what="the message handled")
    finally:
        shutdown.signal(0.0)
        t.join(30)
