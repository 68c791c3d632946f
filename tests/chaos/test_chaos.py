"""The chaos run in CI: consumers SIGKILLed >= 50 times, trackers killed with and without
their data dirs, rebalances; then every message id is accounted for (bench/chaos.py).

Membership changes are paced per queue: a queue's consumer is SIGKILLed, and an extra
member leaves, only while the queue's group is settled (every running member joined and
their shares cover the topic), and kills 4 s apart. On the embedded broker, membership
changes landing mid-rebalance intermittently left a group assigning the queue's
partition to no live member for good (docs/reliability.md, "What remains").
Plain STARTs here; transactional kill windows are tested one at a time
(tests/chaos/test_transaction_window.py, tests/integration/test_crash_windows.py)."""

from __future__ import annotations

import pytest

from bench.chaos_config import ChaosConfig
from tests.chaos.conftest import run_chaos_in_ci


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_nothing_is_lost_under_kills_restarts_and_rebalances(make_settings, artifacts):
    settings = make_settings(queue_partitions=4, markers_partitions=4, dispatch="partition")  # groups, rebalances
    cfg = ChaosConfig(queues=5, consumers_per_queue=2, trackers=3, messages_per_queue=720,
                      kills=52, chaos_s=45.0, chaos_limit_s=180.0, queue_kill_gap_s=4.0,
                      tracker_kills=[(0.2, "keep"), (0.55, "wipe")],
                      rebalances=2, visibility_s=4.0, quiet_s=6.0, transactional_queues=0)
    result = run_chaos_in_ci(settings, cfg, artifacts, "chaos-ci")
    acc, chaos = result["accounting"], result["chaos"]
    assert chaos["consumer_kills"] >= 50
    assert chaos["tracker_modes"] == ["keep", "wipe"]
    assert chaos["rebalances"] >= 2
    assert acc["sent"] == 5 * 720
    # A queue stranded by the embedded broker's group fault (its partition fetched by no
    # live member through the whole drain; docs/reliability.md) is reported, not passed
    # off: at most one, and every other queue loses nothing.
    stranded = result["drain"]["stranded_queues"]
    if stranded:
        print(f"STRANDED by the broker's group fault: {stranded}; undelivered there: "
              f"{ {q: acc['lost_by_queue'][q] for q in stranded} }")
    assert len(stranded) <= 1, stranded
    assert sum(n for q, n in acc["lost_by_queue"].items() if q not in stranded) == 0, acc
    assert acc["lost"] == sum(acc["lost_by_queue"].values())
    assert acc["unexplained_after_ack"] == 0, acc
    assert acc["unexplained_duplicates"] == 0, acc
    assert acc["unexpected_ids"] == 0, acc
    assert acc["duplicates"] == (acc["duplicates_after_kill"] + acc["duplicates_after_graceful_stop"]
                                 + acc["duplicates_after_late_ack"])
    assert result["by_mode"]["plain"]["sent"] == 5 * 720
    assert result["ok"] or (stranded and all(" lost, e.g." in v for v in acc["violations"])), acc["violations"]
