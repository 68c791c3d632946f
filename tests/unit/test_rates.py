"""RateWindow: per-bucket counts over a sliding window, bounded memory, mergeable across workers."""

from kmq.stats.rates import OTHER, RateWindow, merge_histories


def test_events_in_the_last_minute_are_counted_and_older_ones_forgotten():
    w = RateWindow(bucket_s=10, buckets=6)
    w.add(("orders", "acked"), 5, now_s=1000.0)
    w.add(("orders", "acked"), 2, now_s=1055.0)
    w.add(("emails", "acked"), 1, now_s=1055.0)
    assert w.window(60, now_s=1055.0)[("orders", "acked")] == 7
    # 1000 is in the bucket [1000, 1010): six buckets later it has left the window.
    assert w.window(60, now_s=1060.0)[("orders", "acked")] == 2
    w.add(("orders", "acked"), 1, now_s=1200.0)  # a new bucket expires the old ones
    assert sorted(w._slots) == [120]


def test_history_has_one_point_per_bucket_grouped_by_event():
    w = RateWindow(bucket_s=10, buckets=3)
    w.add(("a", "acked"), 3, 100.0)
    w.add(("b", "acked"), 4, 112.0)
    w.add(("b", "redelivered"), 1, 125.0)
    h = w.history(125.0)
    assert list(h) == [100, 110, 120]
    assert h[100]["acked"] == 3 and h[110]["acked"] == 4 and h[120]["redelivered"] == 1
    only_a = w.history(125.0, keep=lambda k: k[0] == "a")
    assert only_a[110] == {} and only_a[100]["acked"] == 3


def test_keys_past_the_budget_of_a_bucket_are_folded_into_other():
    w = RateWindow(bucket_s=10, buckets=2, max_keys=2)
    for q in ("a", "b", "c", "d"):
        w.add((q, "acked"), 1, 5.0)
    counts = w.window(10, 5.0)
    assert counts[("a", "acked")] == 1 and counts[(OTHER, "acked")] == 2
    assert len(w._slots[0]) == 2 + 1


def test_histories_of_workers_merge_by_bucket_start():
    merged = merge_histories([{10: {"acked": 1}, 20: {"acked": 2}}, {"20": {"acked": 3, "sent": 1}}])
    assert merged == {10: {"acked": 1}, 20: {"acked": 5, "sent": 1}}
