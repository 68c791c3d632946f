"""The queue detail view's dead letters come from the scanner's incremental fold: right after
new letters and a redrive, and no request reads the dead-letter topic (the dashboard polls the
view every 2 s; it read the whole partition each time)."""

from __future__ import annotations

import json
import urllib.request

from confluent_kafka import Producer

import kmq
from kmq.dev.devstack import TrackerProcess
from kmq.ops.deadletters import CONTROL, CONTROL_OFFSET, dlq_partition
from kmq.protocol import envelope
from tests.conftest import wait_for
from tests.integration.views import queue_detail

QUEUE = "dl-view"


def detail(t: TrackerProcess) -> dict | None:
    return queue_detail(t, QUEUE)


def write(s, records: list[tuple[bytes, list]]) -> list[int]:
    """Records on the queue's dead-letter partition, as the tracker and redrive write them."""
    offsets: list[int] = []
    p = Producer(s.client_config())
    for value, headers in records:
        p.produce(s.dlq_topic, value, QUEUE.encode(), partition=dlq_partition(s, QUEUE), headers=headers,
                  on_delivery=lambda err, m: offsets.append(m.offset()))
    assert p.flush(30) == 0
    return sorted(offsets)


def letter(i: int) -> tuple[bytes, list]:
    return (f"payload-{i}".encode(), [(envelope.ID, f"id-{i}".encode()), (envelope.DELIVERIES, b"2")]
            + envelope.dead_letter_headers("rejected", f"poison {i}", 1_000, 2_000 + i, 0, i))


def test_the_detail_view_counts_new_dead_letters_without_reading_the_topic(make_settings, artifacts):
    s = make_settings(stats_refresh_ms=200, dispatch="partition")
    with kmq.Client(settings=s) as client:  # the tracker finds the queue by its key
        client.send(QUEUE, b"x")
        client.flush()
    first = write(s, [letter(i) for i in range(5)])
    t = TrackerProcess(s, artifacts / "tracker-dl-view.log").start(timeout_s=120)
    try:
        def scanned():
            return t.health()["scanner"]

        def shows(count: int):
            d = detail(t)
            return d["dead_letters_detail"] if d and d["dead_letters_detail"]["count"] == count else None
        d = wait_for(lambda: shows(5), 60, interval_s=0.2, what="five dead letters in the view")
        assert [r["id"] for r in d["recent"]] == [f"id-{i}" for i in range(4, -1, -1)]  # newest first
        assert d["recent"][0]["detail"] == "poison 4" and d["recent"][0]["value_preview"] == "payload-4"
        assert scanned()["dlq_records_read"] == 5  # the topic holds these five, each read once

        # Requests while passes go on read nothing of the dead-letter topic.
        for _ in range(3):
            passes = scanned()["dlq_passes"]
            assert detail(t)["dead_letters_detail"]["count"] == 5
            wait_for(lambda: scanned()["dlq_passes"] >= passes + 2, 60, interval_s=0.1, what="two more passes")
        assert scanned()["dlq_records_read"] == 5

        # Three more letters and a redrive of the oldest: only those four records are read.
        write(s, [letter(i) for i in range(5, 8)]
              + [(b"", [(CONTROL, b"redriven"), (CONTROL_OFFSET, str(first[0]).encode())])])
        d = wait_for(lambda: shows(7), 60, interval_s=0.2, what="seven dead letters in the view")
        assert [r["id"] for r in d["recent"]] == [f"id-{i}" for i in range(7, 0, -1)]
        assert scanned()["dlq_records_read"] == 9
    finally:
        t.stop()


def test_dead_letter_records_whose_key_is_no_queue_id_are_counted_not_shown_as_queues(
        shared_settings, tracker, queue):
    # An audit: keys on the dead-letter topic that are no queue id (the tracker's own
    # `!malformed-markers`, another client's empty, null, non-UTF-8 or made-up keys) were queue
    # rows counted in the totals, whose detail pages were 404s and whose names the CLI refused.
    s = shared_settings
    strays = [b"!malformed-markers", b"", None, b"\xff\xfe", "队列-x".encode(), b"a b"]
    before = tracker.health()["scanner"]["dlq_records_of_no_queue"]
    p = Producer(s.client_config())
    for key in strays:
        p.produce(s.dlq_topic, b"stray", key)
    p.produce(s.dlq_topic, letter(0)[0], queue.encode(), partition=dlq_partition(s, queue), headers=letter(0)[1])
    assert p.flush(30) == 0

    def listed() -> dict | None:
        rows: dict[str, dict] = {}
        while True:  # every page: the session's other tests made more queues than one holds
            with urllib.request.urlopen(f"{tracker.url}/kmq/api/queues?limit=1000&offset={len(rows)}",
                                        timeout=30) as r:
                page = json.loads(r.read())
            rows.update((row["queue"], row) for row in page["queues"])
            if not page["queues"] or len(rows) >= page["total"]:
                break
        return rows if rows.get(queue, {}).get("dead_letters") == 1 else None
    rows = wait_for(listed, 60, interval_s=0.2, what="the queue's dead letter in the list")
    assert not {"!malformed-markers", "", "队列-x", "a b", "\ufffd\ufffd"} & set(rows)
    # Read in the same pass as the queue's letter (the partitions are read to their ends); the
    # tracker may set aside other tests' garbage markers meanwhile (key !malformed-markers).
    assert tracker.health()["scanner"]["dlq_records_of_no_queue"] - before >= len(strays)
