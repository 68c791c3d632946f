"""The default max processing time (5 min) against the visibility timeout (crash detection).

A consumer keeps a message its user code holds invisible up to ``max_processing_s``
(default ``KMQ_MAX_PROCESSING_S`` = 300 s), however short the visibility timeout; a consumer
that dies stops the keepalive, and its messages come back after the visibility timeout.
Both queue modes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kmq
from kmq.dev.devstack import settings_env
from kmq.settings import DEFAULT_MAX_PROCESSING_S
from tests.conftest import partition_mode, wait_for

pytestmark = pytest.mark.usefixtures("tracker")
HELPERS = Path(__file__).parent / "helpers"


@pytest.fixture
def client(default_settings, queue, mode):
    with kmq.Client(settings=default_settings) as c:
        if mode == "partition":
            partition_mode(c, queue)
        else:
            c.configure_queue(queue, dispatch="shared")
        yield c


def test_a_slow_handler_is_not_redelivered_while_it_runs(client, queue):
    msg_id = client.send(queue, b"slow")
    client.flush()
    with client.consumer(queue, visibility_timeout_s=1) as c:
        assert c.max_processing_s == DEFAULT_MAX_PROCESSING_S
        m = wait_for(lambda: c.receive(0.2), 30, what="the message")
        assert m.id == msg_id
        # Five visibility timeouts (and many tracker ticks) while "the handler runs": no copy
        # comes back (in either mode it would come to this, the queue's only consumer), and
        # the held one has not lapsed.
        assert c.receive_batch(10, timeout_s=5.0) == []
        assert not m.lapsed and m.delivery_count == 1
        m.ack()
        c.flush()
        assert c.receive_batch(10, timeout_s=2.0) == []


def test_a_dead_consumers_messages_come_back_after_the_visibility_timeout(
        client, queue, default_settings):
    ids = client.send_batch(queue, [b"m%d" % i for i in range(6)])
    client.flush()
    env = {**os.environ, **settings_env(default_settings),
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    child = subprocess.Popen([sys.executable, str(HELPERS / "consume_then_hang.py"), queue, "6", "1000"],
                             env=env, stdout=subprocess.PIPE, text=True)
    try:
        received = json.loads(child.stdout.readline())["received"]
        assert sorted(received) == sorted(ids)
        assert child.stdout.readline() and child.stdout.readline().strip() == "ready"
    finally:
        child.kill()  # a crash: no release, no keepalive from here
        child.wait()
    with client.consumer(queue, visibility_timeout_s=30) as c:
        back = []
        wait_for(lambda: back.extend(c.receive_batch(6, 0.2)) or len(back) >= 6, 60,
                 what="the dead consumer's messages")
        assert sorted(m.id for m in back) == sorted(ids)
        assert {m.delivery_count for m in back} == {2}
        for m in back:
            m.ack()
        c.flush()
