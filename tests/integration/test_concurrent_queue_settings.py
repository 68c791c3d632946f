"""Two clients change one queue's settings at once, and both changes stay (kmq.ops.config_update).

Each record replaces the queue's whole configuration: a client whose view had not read
another's change a moment before wrote it away (an audit: A's dispatch="partition" or B's
visibility_timeout_s=7 lost, 4 of 4 tries); and a client's own view showed the record
before its latest change for 0.25-0.5 s after configure_queue returned.
"""

from __future__ import annotations

import threading
import time

import kmq

ROUNDS = 3


def _settled(settings, queue: str):
    """The queue's settings as a client started now reads them."""
    with kmq.Client(settings=settings) as fresh:
        return fresh.queue_config(queue)


def test_a_change_another_client_made_a_moment_before_is_kept(shared_settings, make_client, queue):
    # Given two clients with their views running
    a, b = make_client(shared_settings), make_client(shared_settings)
    b.queue_configs()
    for i in range(ROUNDS):
        q = f"{queue}-{i}"
        # When A changes one setting and B another right after (B's view a moment behind)
        a.configure_queue(q, max_deliveries=5)
        returned = b.configure_queue(q, visibility_timeout_s=7)
        # Then the queue has both, and B's call said so
        cfg = _settled(shared_settings, q)
        assert (cfg.max_deliveries, cfg.visibility_timeout_s) == (5, 7.0), f"round {i}"
        assert returned.max_deliveries == 5


def test_changes_made_at_the_same_time_are_all_kept(shared_settings, make_client, queue):
    a, b = make_client(shared_settings), make_client(shared_settings)
    a.queue_configs(), b.queue_configs()
    for i in range(ROUNDS):
        q = f"{queue}-{i}"
        a.configure_queue(q, dead_letter_head="hold")
        start = threading.Barrier(2)
        errors: list[BaseException] = []

        def change(client, **settings) -> None:
            start.wait(10)
            try:
                client.configure_queue(q, **settings)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=change, args=(a,), kwargs={"max_deliveries": 4}),
                   threading.Thread(target=change, args=(b,), kwargs={"visibility_timeout_s": 9})]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors
        cfg = _settled(shared_settings, q)
        assert (cfg.dead_letter_head, cfg.max_deliveries, cfg.visibility_timeout_s) == ("hold", 4, 9.0), \
            f"round {i}"


def test_a_clients_own_view_does_not_go_back_after_configure_queue(shared_settings, make_client, queue):
    a = make_client(shared_settings)
    went_back = []
    for i in range(6):
        # Given back-to-back changes from one client
        first, last = 1.0 + 2 * i, 2.0 + 2 * i
        a.configure_queue(queue, visibility_timeout_s=first)
        a.configure_queue(queue, visibility_timeout_s=last)
        # Then its view shows the last from the moment the call returned, while its follower
        # reads both records (a fetch each 0.3-0.5 s on the embedded broker)
        deadline = time.monotonic() + 0.6
        while time.monotonic() < deadline:
            seen = a.queue_config(queue).visibility_timeout_s
            if seen != last:
                went_back.append((i, seen, last))
            time.sleep(0.005)
    assert not went_back, went_back[:3]
