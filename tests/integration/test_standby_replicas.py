"""A worker promoted from its standby replica of a table partition knows everything the
changelog held before the replica started (app/changelog_refetch.py).

Faust dropped the standby's first fetch when it came back while recovery had the flow
paused, and never read those changelog records again: the promoted worker's table held
only what was written after it joined, so messages in flight (or scheduled) before were
never redelivered (the shared chaos run lost 20). Here worker A holds a delayed send of
every queue (an entry in its table and changelog), worker B joins and keeps standby
replicas of A's partitions, A is killed, and B must know every one of them.

Without the fix this failed in 2 of 3 runs (the drop needs a fetch to race the flow's
pause: many entries and writes during the join make it likely); with it 3 of 3 passed,
B logging "fetching them again" each time.
"""

from __future__ import annotations

import time

import pytest

import kmq
from kmq.dev.devstack import TrackerProcess
from kmq.dev.embedded import free_port
from kmq.protocol.placement import markers_partition
from tests.conftest import wait_for
from tests.integration.views import scheduled

QUEUES = 12  # spread over the 4 markers partitions
EACH = 50    # delayed sends per queue: a standby's first fetch is a long batch


def owned(t: TrackerProcess) -> set[int]:
    return set((t.health() or {}).get("partitions", []))


@pytest.mark.slow
def test_a_worker_promoted_from_its_standby_replica_knows_what_came_before_it(make_settings, artifacts, tmp_path):
    s = make_settings()
    queues = [f"standby-{s.app_id}-{i}" for i in range(QUEUES)]
    # Two picks before either is bound may agree: B's must differ from A's.
    port_a = free_port()
    port_b = wait_for(lambda: (lambda p: p if p != port_a else None)(free_port()), 10, what="a second free port")
    a = TrackerProcess(s.replace(data_dir=str(tmp_path / "a"), web_port=port_a),
                       artifacts / f"tracker-standby-a-{s.app_id}.log").start(timeout_s=120)
    b = TrackerProcess(s.replace(data_dir=str(tmp_path / "b"), web_port=port_b),
                       artifacts / f"tracker-standby-b-{s.app_id}.log")
    try:
        with kmq.Client(settings=s) as client:
            # Given: every markers partition's table (and changelog) holds entries.
            for q in queues:
                for i in range(EACH):
                    client.send(q, b"delayed %d" % i, delay_s=3600)
            client.flush()
            wait_for(lambda: all(scheduled(a, q) == EACH for q in queues), 60, what="the entries at A")
            # When: B joins while A keeps writing (B's standby fetches race recovery's
            # pauses of the flow, which is when Faust dropped them); B keeps standby
            # replicas of A's partitions.
            b.start(wait=False)
            filler = 0

            def shared_out() -> bool:
                nonlocal filler
                for q in queues:
                    client.send(f"{q}-filler-{filler % 50}", b"delayed", delay_s=3600)
                filler += 1
                client.flush()
                return bool(owned(b)) and owned(a) | owned(b) == set(range(s.markers_partitions)) \
                    and not owned(a) & owned(b)
            wait_for(shared_out, 120, what="A and B sharing the partitions")
            # A record on one of B's own partitions, sent after the changelog records:
            # once B applied it, its fetches (standbys included) came past them.
            mine = next(f"standby-{s.app_id}-probe-{i}" for i in range(1000)
                        if markers_partition(f"standby-{s.app_id}-probe-{i}", s.markers_partitions) in owned(b))
            client.send(mine, b"delayed", delay_s=3600)
            client.flush()
            wait_for(lambda: scheduled(b, mine) == 1, 60, what="B applying a record of its own")
        a.kill()  # B takes A's partitions over from its standby replicas
        a = None
        wait_for(lambda: owned(b) == set(range(s.markers_partitions)), 120, what="B owning every partition")
        # Then: B knows every entry A's partitions held before it joined.
        deadline = time.monotonic() + 30
        missing = {q: None for q in queues}
        while missing and time.monotonic() < deadline:
            missing = {q: n for q in queues if (n := scheduled(b, q)) != EACH}
            time.sleep(0.1)
        assert not missing, f"B does not know these queues' delayed sends: {missing}"
    finally:
        if a is not None:
            a.stop()
        b.stop()
