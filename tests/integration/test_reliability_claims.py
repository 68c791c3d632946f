"""docs/reliability.md read as a user, against the session's broker and tracker.

- "pass ``config={"queued.max.messages.kbytes": ...}`` to ``client.consumer``": taken in
  both dispatch modes, and one librdkafka refuses is a ConfigError naming ``config=``.
- A settle for a copy the tracker took back is the queue's ``late`` count in all three
  places the doc names (``late_per_min``, ``since_start.late``,
  ``kmq_queue_messages_total{event="late"}``); a forged ACK beyond the queue partition's
  cursor is ``unknown-range`` and a consumer's START on a shared queue ``start-on-shared``.
"""

from __future__ import annotations

import json
import urllib.request

import pytest
from confluent_kafka import Producer

import kmq
from kmq.errors import ConfigError
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.protocol.placement import markers_partition
from tests.conftest import partition_mode, wait_for
from tests.integration.views import queue_detail

pytestmark = pytest.mark.usefixtures("tracker")


def get_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def test_a_consumer_config_is_taken_in_both_modes_and_a_bad_one_is_named(make_client, shared_settings, queue):
    client = make_client(shared_settings)
    for mode in ("shared", "partition"):
        q = f"{queue}-{mode}"
        if mode == "partition":
            partition_mode(client, q)
        client.send(q, b"x")
        client.flush()
        with client.consumer(q, config={"queued.max.messages.kbytes": 16384}) as c:
            m = wait_for(lambda: c.receive(0.2), 30, what=f"a message of the {mode} queue")
            m.ack()
        with pytest.raises(ConfigError, match=r"config=.*no\.such\.property"):
            client.consumer(q, config={"no.such.property": 1})


def test_late_settles_are_counted_where_the_doc_says_and_forged_markers_by_reason(
        make_client, shared_settings, tracker, queue):
    client = make_client(shared_settings)
    client.send(queue, b"slow")
    client.flush()
    with client.consumer(queue, visibility_timeout_s=1) as c:
        first = wait_for(lambda: c.receive(0.2), 30, what="the first delivery")
        again = wait_for(lambda: c.receive(0.2), 30, what="the redelivery")
        first.ack()  # its copy was taken back: late
        c.flush()
        detail = wait_for(lambda: (lambda d: d if d and d["since_start"]["late"] else None)(
            queue_detail(tracker, queue)), 20, what="the late ack counted")
        assert detail["since_start"]["late"] == 1, detail
        # One answer: its per-minute count is not behind its count since start (it was: the
        # row was read before an await, since_start after it, late 1 and late_per_min 0).
        assert detail["late_per_min"] == 1, {k: v for k, v in detail.items() if "late" in k or k == "since_start"}
        metrics = get_text(tracker.url + "/metrics")
        assert f'kmq_queue_messages_total{{event="late",queue="{queue}"}} 1.0' in metrics.splitlines(), \
            [line for line in metrics.splitlines() if "late" in line]

        before = json.loads(get_text(tracker.url + "/kmq/health"))["set_aside"]
        raw = Producer(shared_settings.client_config())
        part = markers_partition(queue, shared_settings.markers_partitions)
        beyond = M.RangeRef(queue, again.partition, again.offset + 10_000, again.offset + 10_001)
        for marker in (M.Ack(beyond, 1), M.Start(beyond, 1000, 1)):
            raw.produce(shared_settings.markers_topic, marker_codec.encode([marker]), partition=part)
        raw.flush(10)

        def counted():
            now = json.loads(get_text(tracker.url + "/kmq/health"))["set_aside"]
            grew = {k: now[k] - before[k] for k in now if now[k] != before[k]}
            return grew if grew.get("start-on-shared") and grew.get("unknown-range") else None
        # Other tests share this tracker: at least ours are counted, by their reasons.
        grew = wait_for(counted, 20, what="the forged markers set aside")
        assert grew["start-on-shared"] >= 1 and grew["unknown-range"] >= 1, grew
        again.ack()
