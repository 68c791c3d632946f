"""Many logical queues on shared topics: exact per-queue accounting, spread growth, tenant isolation."""

from __future__ import annotations

from collections import Counter

import pytest

import kmq
from kmq.dev.devstack import TrackerProcess
from kmq.errors import PermissionDeniedError
from kmq.protocol.placement import queue_partitions
from tests.conftest import partition_mode, wait_for


def test_interleaved_queues_each_get_exactly_their_own_messages(make_client, shared_settings, tracker, queue):
    client = make_client(shared_settings)
    queues = [f"{queue}-{i}" for i in range(24)]  # 24 queues on 4 partitions: shared partitions
    sent: dict[str, set[str]] = {q: set() for q in queues}
    for round_ in range(10):
        for q in queues:
            sent[q] |= set(client.send_batch(q, [f"{q}/{round_}".encode()] * 2))
    client.flush()
    consumers = {q: client.consumer(q, visibility_timeout_s=30) for q in queues}
    got: dict[str, Counter] = {q: Counter() for q in queues}
    try:
        def step():
            for q, c in consumers.items():
                batch = c.receive_batch(100, 0.01)
                for m in batch:
                    got[q][m.id] += 1
                    assert m.queue == q and m.value.startswith(q.encode() + b"/")
                batch.ack()
            return all(sum(got[q].values()) >= len(sent[q]) for q in queues)
        wait_for(step, 90, what="every queue's messages")
    finally:
        for c in consumers.values():
            c.close()
    for q in queues:
        assert set(got[q]) == sent[q], f"{q}: lost or foreign messages"
        assert max(got[q].values()) == 1


def test_growing_a_queues_spread_loses_nothing_in_flight_or_enqueued(make_client, shared_settings, tracker, queue):
    client = make_client(shared_settings)
    partition_mode(client, queue)  # spread spreads a consumer group over more partitions
    before = client.send_batch(queue, [b"before%d" % i for i in range(60)])
    client.flush()
    n = client.partition_count(shared_settings.queue_topic)
    c1 = client.consumer(queue, visibility_timeout_s=3, batch_size=20)
    c2 = client.consumer(queue, visibility_timeout_s=3, batch_size=20)
    seen: Counter = Counter()
    acked: set[str] = set()
    try:
        held = wait_for(lambda: c1.receive_batch(20, 0.2) or c2.receive_batch(20, 0.2), 30,
                        what="messages in flight")
        for m in held:
            seen[m.id] += 1  # held, not acked: they must come back
        cfg = client.configure_queue(queue, spread=3)
        assert cfg.spread == 3 and len(cfg.partition_starts) == 2
        after = client.send_batch(queue, [b"after%d" % i for i in range(90)])
        client.flush()
        parts_used = set(queue_partitions(queue, n, 3))

        def step():
            for c in (c1, c2):
                batch = c.receive_batch(100, 0.05)
                for m in batch:
                    seen[m.id] += 1
                    acked.add(m.id)
                    assert m.partition in parts_used
                batch.ack()
            return acked >= set(before) | set(after)
        wait_for(step, 90, what="every message, old and new")
        assert set(seen) == set(before) | set(after)

        def shares_cover_the_topic():
            for c in (c1, c2):
                assert len(c.receive_batch(10, 0.05)) == 0  # all acked; this polls the group too
            return c1.group_share | c2.group_share == set(range(n)) and not c1.group_share & c2.group_share
        wait_for(shares_cover_the_topic, 30, what="the group's shares covering the topic")
        # Each fetches only the queue's partitions among what the group gave it.
        assert c1.assignment == c1.group_share & parts_used and c2.assignment == c2.group_share & parts_used
    finally:
        c1.close()
        c2.close()
    with pytest.raises(kmq.ConfigError, match="only grows"):
        client.configure_queue(queue, spread=2)


def test_tenants_reach_only_their_own_queues(make_client, make_settings, artifacts):
    admin_token = "admin-" + "x" * 20
    settings = make_settings(auth="on", admin_token=admin_token)
    with TrackerProcess(settings, artifacts / "tracker-auth.log"):
        admin = make_client(settings.replace(token=admin_token))
        wait_for(lambda: admin.queue_configs().admin_hash(), 20, what="the auth record")
        acme_token = admin.create_tenant("acme")
        beta_token = admin.create_tenant("beta")
        admin.configure_queue("acme-orders", tenant="acme")
        admin.configure_queue("beta-orders", tenant="beta")
        acme = make_client(settings.replace(token=acme_token))
        wait_for(lambda: "beta" in acme.queue_configs().tenants(), 20, what="tenants to propagate")
        assert acme.configure_queue("acme-orders", max_deliveries=2).max_deliveries == 2
        assert acme.dead_letters("acme-orders") == []
        for call in (lambda: acme.configure_queue("beta-orders", max_deliveries=2),
                     lambda: acme.dead_letters("beta-orders"), lambda: acme.redrive("beta-orders"),
                     lambda: acme.purge_dead_letters("beta-orders"),
                     lambda: acme.queue_config("beta-orders"),  # was shown, its tenant with it
                     lambda: acme.dead_letters("no-such-queue")):
            with pytest.raises(PermissionDeniedError, match="not found or not yours") as info:
                call()
            assert "beta" not in str(info.value).replace("beta-orders", "")
        with pytest.raises(PermissionDeniedError, match="admin token"):
            acme.configure_queue("acme-orders", tenant="beta")
        with pytest.raises(PermissionDeniedError, match="admin token"):
            acme.create_tenant("gamma")
        assert acme.queue_config("acme-orders").max_deliveries == 2
        nobody = make_client(settings.replace(token=""))
        with pytest.raises(PermissionDeniedError, match="requires a token"):
            nobody.dead_letters("acme-orders")
        with pytest.raises(PermissionDeniedError, match="requires a token"):
            nobody.queue_config("acme-orders")
        wrong = make_client(settings.replace(token="not-a-token"))
        with pytest.raises(PermissionDeniedError, match="not valid"):
            wrong.configure_queue("acme-orders", max_deliveries=3)
        assert beta_token != acme_token
