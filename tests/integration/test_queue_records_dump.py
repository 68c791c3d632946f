"""bench.markers_dump: what a failed chaos run keeps besides the markers. The queue topic's
records of its queues (which copy of which message is where, never a payload), and the
tracker's changelog as Faust stored it (what a restoring worker read)."""

from __future__ import annotations

import json

import kmq
from bench.markers_dump import dump_changelog, dump_markers, dump_queue_records
from tests.conftest import wait_for


def test_the_dump_holds_each_record_of_the_named_queues_with_kmqs_headers_and_no_payload(make_settings, tmp_path):
    s = make_settings()
    with kmq.Client(settings=s) as client:
        ids = [client.send("dump-mine", b"secret payload") for _ in range(3)]
        client.send("dump-other", b"not mine")
        client.flush()
    out = tmp_path / "queue-records.jsonl"
    assert dump_queue_records(s, out, {"dump-mine"}) == 3
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [d["kmq.id"] for d in lines] == ids
    assert {d["q"] for d in lines} == {"dump-mine"}
    assert all({"p", "off", "ts"} <= d.keys() for d in lines)
    assert "secret payload" not in out.read_text()


def test_the_changelog_dump_holds_what_the_tracker_wrote_to_its_table(tracker, shared_settings, queue, tmp_path):
    with kmq.Client(settings=shared_settings) as client:
        client.send(queue, b"later", delay_s=3600)  # an entry in the tracker's table until then
        client.flush()
        out = tmp_path / "changelog.jsonl"

        def dumped_entry() -> bool:
            dump_changelog(shared_settings, out)
            return any(queue.encode().hex() in d["key"] + (d["value"] or "")
                       for d in map(json.loads, out.read_text().splitlines()))

        wait_for(dumped_entry, 60, what="the delayed send's entry in the changelog dump")
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert all({"p", "off", "ts", "key", "value"} <= d.keys() for d in lines)
    assert all(bytes.fromhex(d["key"]) is not None for d in lines)
    # The markers dump names the delayed send, of this queue only.
    markers = tmp_path / "markers.jsonl"
    assert dump_markers(shared_settings, markers, {queue}) >= 1
    named = [d for d in map(json.loads, markers.read_text().splitlines()) if "q" in d or "queue" in d]
    assert named and {d.get("q", d.get("queue")) for d in named} == {queue}
