"""The chaos run's accounting rules catch what they are meant to catch (bench/chaos_ledger.py)."""

import json

from bench.chaos_consumer import fate
from bench.chaos_ledger import account, parse_log


def lines(*events):
    return [json.dumps(e) for e in events]


def recv(t, *ids, count=1):
    return {"e": "recv", "m": [[i, count] for i in ids], "t": t}


def settled(t, acked=(), released=(), rejected=()):
    return {"e": "settled", "acked": list(acked), "released": list(released),
            "rejected": list(rejected), "t": t}


def test_a_clean_run_has_no_violations():
    a = parse_log("a", lines(recv(1, "m1", "m2"), {"e": "acking", "ids": ["m1", "m2"], "t": 1},
                             settled(2, acked=["m1", "m2"])))
    acc = account(["m1", "m2"], [a], {})
    assert acc.violations == [] and acc.acked == 2 and acc.duplicates == 0


def test_a_message_nobody_acked_or_dead_lettered_is_lost():
    a = parse_log("a", lines(recv(1, "m1", "m2"), settled(2, acked=["m1"])), "killed")
    acc = account(["m1", "m2"], [a], {})
    assert acc.lost == ["m2"] and acc.violations


def test_an_ack_in_transit_at_a_kill_that_never_came_back_is_not_lost():
    a = parse_log("a", lines(recv(1, "m1"), {"e": "acking", "ids": ["m1"], "t": 1}), "killed")
    acc = account(["m1"], [a], {})
    assert acc.lost == [] and acc.ack_in_transit == 1


def test_delivery_after_a_durable_ack_is_a_violation_unless_a_kill_held_it():
    a = parse_log("a", lines(recv(1, "m1"), settled(2, acked=["m1"])), "stopped")
    b = parse_log("b", lines(recv(3, "m1", count=2), settled(4, acked=["m1"])), "stopped")
    acc = account(["m1"], [a, b], {})
    assert acc.unexplained_after_ack == ["m1"] and acc.unexplained_duplicates == ["m1"]
    killed = parse_log("k", lines(recv(0.5, "m1")), "killed")
    acc = account(["m1"], [killed, a, b], {})
    assert acc.violations == [] and acc.redelivered_after_durable_ack == 1
    assert acc.duplicates_after_kill == 2


def test_a_redelivery_released_then_received_again_and_held_at_a_kill_explains_the_next():
    # Delivery 1 released, delivery 2 reached the same process, which was killed before it
    # settled it: delivery 3 elsewhere is explained by that kill (a run had it "unexplained").
    a = parse_log("a", lines(recv(1, "m1"), settled(2, released=["m1"]), recv(3, "m1", count=2),
                             {"e": "acking", "ids": ["m1"], "t": 3}), "killed")
    b = parse_log("b", lines(recv(9, "m1", count=3), settled(10, acked=["m1"])))
    acc = account(["m1"], [a, b], {})
    assert acc.violations == [] and acc.duplicates_after_kill == 1 and acc.requested_redeliveries == 1


def test_an_ack_in_transit_after_a_release_is_not_lost():
    # Delivery 1 released; delivery 2 to a process killed just after it sent the ack, which
    # landed (nothing came back): a run counted it as lost.
    a = parse_log("a", lines(recv(1, "m1"), settled(2, released=["m1"])))
    b = parse_log("b", lines(recv(3, "m1", count=2), {"e": "acking", "ids": ["m1"], "t": 3}), "killed")
    acc = account(["m1"], [a, b], {})
    assert acc.lost == [] and acc.ack_in_transit == 1 and acc.violations == []


def test_an_ack_in_transit_that_came_back_is_not_in_transit():
    a = parse_log("a", lines(recv(1, "m1"), {"e": "acking", "ids": ["m1"], "t": 1}), "killed")
    b = parse_log("b", lines(recv(5, "m1", count=2)), "killed")
    acc = account(["m1"], [a, b], {})
    assert acc.lost == ["m1"] and acc.ack_in_transit == 0


def test_a_release_asks_for_the_redelivery_it_gets():
    a = parse_log("a", lines(recv(1, "m1"), settled(2, released=["m1"])), "stopped")
    b = parse_log("b", lines(recv(3, "m1", count=2), settled(4, acked=["m1"])), "stopped")
    acc = account(["m1"], [a, b], {})
    assert acc.violations == [] and acc.requested_redeliveries == 1 and acc.duplicates == 0


def test_dead_letters_account_for_rejected_messages_and_torn_lines_are_ignored():
    text = lines(recv(1, "m1"), settled(2, rejected=["m1"])) + ['{"e": "recv", "m": [["m2"']
    a = parse_log("a", text, "killed")
    acc = account(["m1"], [a], {"m1": "rejected"})
    assert acc.violations == [] and acc.dead_lettered == {"rejected": 1}


def test_ids_nobody_sent_are_reported():
    a = parse_log("a", lines(recv(1, "x"), settled(2, acked=["x"])))
    assert account([], [a], {}).unexpected_ids == ["x"]


def test_the_workload_fate_is_deterministic_and_releases_only_a_first_delivery():
    ids = [f"id-{n}" for n in range(2000)]
    fates = [fate(i, 1, 1, 2) for i in ids]
    assert fates == [fate(i, 1, 1, 2) for i in ids]
    assert 0 < fates.count("reject") < 60 and 0 < fates.count("release") < 100
    assert all(fate(i, 2, 1, 2) != "release" for i in ids)


def test_paced_kills_wait_for_a_settled_group_and_for_the_gap(tmp_path):
    from bench.chaos import Harness
    from bench.chaos_config import ChaosConfig
    from bench.chaos_processes import Child
    from kmq.protocol.placement import queue_partitions
    from kmq.settings import Settings

    class Alive:  # stands in for a running process
        def poll(self):
            return None

    def share(p, g):
        return json.dumps({"e": "assigned", "p": p, "g": g, "t": 1}) + "\n"

    settings = Settings.from_env({}, queue_partitions=4)
    h = Harness(settings, ChaosConfig(queues=1, queue_kill_gap_s=4.0), tmp_path)
    (queue,) = h.queues
    (part,) = queue_partitions(queue, 4, 1)
    others = [p for p in range(4) if p != part]
    a, b = (Child(n, queue, n, tmp_path / f"{n}.jsonl", Alive()) for n in ("a", "b"))
    h.children += [a, b]
    a.log_path.write_text(share([], []))
    b.log_path.write_text(share([part], [part, others[0]]) + "{torn")
    assert h._killable(100.0) == [], "a has not joined yet: its group is forming"
    with open(a.log_path, "a") as f:  # the log grows: only the new part is read
        f.write(share([], others[1:2]))
    assert h._killable(100.0) == [], "a partition is still with a member that is gone"
    with open(a.log_path, "a") as f:
        f.write(share([], others[1:]))
    assert h._killable(100.0) == [a, b]
    h._last_kill[queue] = 98.0
    assert h._killable(100.0) == [], "within the gap after the queue's last kill"
    assert h._killable(102.0) == [a, b]
    with open(b.log_path, "a") as f:  # the torn line ends; b's share is revoked
        f.write("}\n" + share([], []))
    assert h._killable(110.0) == [], "b gave its share up: the group is rebalancing"
    assert not h._queue_held(queue)
    unpaced = Harness(settings, ChaosConfig(queues=1), tmp_path / "u")
    unpaced.children.append(Child("c", unpaced.queues[0], "c", tmp_path / "none.jsonl", Alive()))
    assert unpaced._killable(0.0) == unpaced.children


# -- rule 4: order per group (ordered queues) ------------------------------------------------


def acking(t, *ids, rejecting=()):
    return {"e": "acking", "ids": list(ids), "rejecting": list(rejecting), "t": t}


def test_a_group_handed_out_one_at_a_time_in_order_is_not_reordered():
    a = parse_log("a", lines(recv(1, "a1", "b1"), acking(2, "a1", rejecting=["b1"]), settled(3, acked=["a1"]),
                             recv(4, "a2", "b2"), acking(5, "a2", "b2"), settled(6, acked=["a2", "b2"])))
    acc = account(["a1", "a2", "b1", "b2"], [a], {"b1": "rejected"}, {"a": ["a1", "a2"], "b": ["b1", "b2"]})
    assert acc.reordered == [] and acc.violations == []


def test_a_message_delivered_while_an_earlier_one_of_its_group_is_held_is_reordered():
    # Two of group a in hand at once: a2 arrived while a1 was not settled yet.
    a = parse_log("a", lines(recv(1, "a1"), recv(2, "a2"), acking(3, "a1", "a2"), settled(4, acked=["a1", "a2"])))
    acc = account(["a1", "a2"], [a], {}, {"a": ["a1", "a2"]})
    assert acc.reordered == ["a2"] and acc.violations


def test_a_later_message_overtaking_a_released_head_is_reordered():
    # a1 released (not settled): a2 must wait for a1's second delivery to be settled.
    a = parse_log("a", lines(recv(1, "a1"), acking(2), settled(2, released=["a1"]), recv(3, "a2"),
                             acking(4, "a2"), settled(5, acked=["a2"]), recv(6, "a1", count=2),
                             acking(7, "a1"), settled(8, acked=["a1"])))
    acc = account(["a1", "a2"], [a], {}, {"a": ["a1", "a2"]})
    assert acc.reordered == ["a2"]


def test_a_head_held_by_a_killed_consumer_comes_back_and_its_group_waits_for_it():
    killed = parse_log("k", lines(recv(1, "a1")), "killed")
    b = parse_log("b", lines(recv(6, "a1", count=2), acking(7, "a1"), settled(8, acked=["a1"]),
                             recv(9, "a2"), acking(10, "a2"), settled(11, acked=["a2"])))
    acc = account(["a1", "a2"], [killed, b], {}, {"a": ["a1", "a2"]})
    assert acc.reordered == [] and acc.violations == [] and acc.duplicates_after_kill == 1
    # The kill excuses nothing: the group going on before its head came back is flagged.
    early = parse_log("b", lines(recv(3, "a2"), acking(4, "a2"), settled(5, acked=["a2"]),
                                 recv(6, "a1", count=2), acking(7, "a1"), settled(8, acked=["a1"])))
    assert account(["a1", "a2"], [killed, early], {}, {"a": ["a1", "a2"]}).reordered == ["a2"]


def test_an_ack_in_transit_at_a_kill_frees_its_group_from_when_it_was_sent():
    # The killed process sent a1's ack (logged "acking") and died before flush() returned:
    # the ack landed, a1 never came back, a2 went out after it.
    killed = parse_log("k", lines(recv(1, "a1"), acking(2, "a1")), "killed")
    b = parse_log("b", lines(recv(3, "a2"), acking(4, "a2"), settled(5, acked=["a2"])))
    acc = account(["a1", "a2"], [killed, b], {}, {"a": ["a1", "a2"]})
    assert acc.reordered == [] and acc.ack_in_transit == 1 and acc.violations == []


def test_a_head_dead_lettered_by_the_tracker_frees_its_group_from_that_moment():
    killed = parse_log("k", lines(recv(1, "a1")), "killed")
    b = parse_log("b", lines(recv(5, "a2"), acking(6, "a2"), settled(7, acked=["a2"])))
    groups = {"a": ["a1", "a2"]}
    dead = {"a1": "max-deliveries"}
    assert account(["a1", "a2"], [killed, b], dead, groups, {"a1": 4.0}).reordered == []
    assert account(["a1", "a2"], [killed, b], dead, groups, {"a1": 5.5}).reordered == ["a2"]
    # never settled at all: what came after it in its group is out of order
    assert account(["a1", "a2"], [killed, b], {}, groups).reordered == ["a2"]


def test_the_consumer_logs_its_settlements_before_it_sends_any():
    import inspect

    from bench import chaos_consumer
    src = inspect.getsource(chaos_consumer.main)
    assert src.index('e="acking"') < min(src.index("m.reject("), src.index("m.release("), src.index("m.ack()"))
