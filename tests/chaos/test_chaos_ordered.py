"""The chaos run on ordered queues in CI: message groups (docs/ordering.md) on shared queues,
three consumers per queue SIGKILLed at any moment while they hold group heads, consumers
joining and leaving; then every message id is accounted for and the order of every group is
checked (bench/chaos.py, rules in bench/chaos_ledger.py and docs/reliability.md).

Rule 4 of the ledger is causal, not timed: a group's message may be received only after an
earlier message of its group was settled (its ack or reject logged before it was sent, or its
dead-lettering by the tracker). A head whose consumer was killed is not settled: it comes back
after its visibility timeout and its group waits for it, so kills excuse no reordering.

No tracker is killed here: a dispatcher failover can still hand out again what was handed out
above an ordered queue's floor (docs/ordering.md, "Failover"), a known window until the
handed-out bitmap lands."""

from __future__ import annotations

import pytest

from bench.chaos_config import ChaosConfig
from tests.chaos.conftest import run_chaos_in_ci


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_ordered_groups_keep_their_order_and_lose_nothing_under_consumer_kills(make_settings, artifacts):
    settings = make_settings(queue_partitions=4, markers_partitions=4, dispatch="shared")
    cfg = ChaosConfig(queues=2, ordered_queues=2, groups_per_queue=10, consumers_per_queue=3,
                      trackers=2, messages_per_queue=400, kills=20, chaos_s=30.0, chaos_limit_s=90.0, tracker_kills=[],
                      rebalances=2, visibility_s=4.0, quiet_s=5.0, transactional_queues=0,
                      work_ms=100.0, dispatch="shared", prefix="chaos-ordered")
    result = run_chaos_in_ci(settings, cfg, artifacts, "chaos-ordered-ci")
    acc, chaos = result["accounting"], result["chaos"]
    assert chaos["consumer_kills"] >= 20
    assert chaos["rebalances"] >= 2
    assert acc["sent"] == 2 * 400
    assert result["by_mode"]["ordered"]["sent"] == 2 * 400
    assert acc["lost"] == 0, acc
    assert acc["reordered"] == 0, acc
    why = {"accounting": acc, "tracker_warnings": result["tracker_warnings"],
           "markers": result.get("markers_diagnosis"), "trace": result.get("trace")}
    assert acc["redelivered_after_durable_ack"] == 0, why
    assert acc["unexplained_duplicates"] == 0, why
    assert acc["unexpected_ids"] == 0, acc
    assert result["ok"], acc["violations"]
