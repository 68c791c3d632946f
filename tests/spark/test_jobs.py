"""The shipped jobs on a known workload: markers, queue and dead-letter records with known times.

The markers topic here uses CreateTime, so every marker's time is the one we
wrote and every expected number below is exact.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from kmq.protocol import entries as E
from kmq.protocol import envelope as H
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.spark import jobs
from kmq.spark.changelog import inflight_state
from kmq.spark.events import dead_letters, marker_events, queue_records
from kmq.spark.session import kafka_reader
from tests.spark.conftest import produce

pytestmark = pytest.mark.slow

T = 1_800_000_000_000  # marker time origin (ms)
A, B = "jobs-a", "jobs-b"


def rng(queue, part, start, end):
    return M.RangeRef(queue, part, start, end)


def markers_workload():
    """(time offset ms, markers) per record, all on markers partition 0, in order."""
    a = rng(A, 0, 0, 5)
    return [
        (0, [M.Start(a, 1000, a.full_mask), M.Start(rng(B, 1, 0, 2), 1000, 0b11)]),
        (100, [M.Ack(a, 0b00001)]),
        (200, [M.Ack(a, 0b00010), M.Release(a, 0b00100, 0)]),
        (300, [M.Reject(a, 0b10000, "bad payload")]),
        (400, [M.Ack(rng(B, 1, 0, 2), 0b01)]),
        (500, [M.Extend(rng(B, 1, 0, 2), 0b10, 1000)]),   # deadline moves to T+1500
        (600, [M.Ack(rng(B, 1, 0, 2), 0b10)]),
        (2000, [M.Start(rng(A, 0, 5, 6), 10_000, 0b1), M.Tick(T + 2000)]),  # m3 again
    ]


@pytest.fixture(scope="module")
def workload(spark, broker, make_topic):
    bs = broker.bootstrap_servers
    markers, queue, dlq, changelog = (make_topic("markers"), make_topic("queue", 2),
                                      make_topic("dlq"), make_topic("changelog", 2))
    recs = [dict(value=marker_codec.encode(ms), key=b"q", partition=0, timestamp=T + dt)
            for dt, ms in markers_workload()]
    recs.insert(3, dict(value=b"\x09garbage", key=b"q", partition=0, timestamp=T + 250))
    produce(bs, markers, recs)

    def qrec(queue_id, part, i, deliveries=None):
        headers = [(H.ID, f"{queue_id}-m{i}".encode())]
        if deliveries is not None:
            headers.append((H.DELIVERIES, str(deliveries).encode()))
        return dict(value=b"payload", key=queue_id.encode(), partition=part, headers=headers,
                    timestamp=T - 1000)
    produce(bs, queue, [qrec(A, 0, i) for i in range(5)] + [qrec(A, 0, 3, deliveries=1)]
            + [qrec(B, 1, i) for i in range(2)])
    produce(bs, dlq, [
        dict(value=b"payload", key=A.encode(), headers=[
            (H.ID, f"{A}-m4".encode()), (H.DELIVERIES, b"1"), (H.DLQ_REASON, b"rejected"),
            (H.DLQ_DETAIL, b"bad payload"), (H.ENQUEUED_MS, str(T - 1000).encode()),
            (H.DLQ_AT_MS, str(T + 350).encode())]),
        dict(value=b"\x09garbage", key=b"!malformed-markers",
             headers=[(H.DLQ_REASON, b"malformed-marker")]),
        # Another client's keys that are no queue id: no queue's letters (the views agree).
        *[dict(value=b"stray", key=k, headers=[(H.DLQ_REASON, b"rejected")])
          for k in (None, b"", f"{A}\n".encode(), "\u961f\u5217".encode(), b"\xff\xfe")],
    ])
    # The tracker's changelog for the same moment: m3's second delivery in flight, one
    # scheduled send, one range that was fully acked (tombstoned), and index keys.
    live = E.range_key(rng(A, 0, 5, 6))
    done = E.range_key(rng(B, 1, 0, 2))
    sched = E.schedule_key(A, "later")
    entry = E.InFlight(T + 2000, 10_000, [E.Group(T + 12_000, E.Cause.TIMEOUT, "", 0b1)], T + 12_000)
    produce(bs, changelog, [
        dict(key=done, value=E.encode_inflight(E.InFlight(T, 1000, [E.Group(T + 1000, E.Cause.TIMEOUT,
                                                                          "", 0b11)], T + 1000)),
             partition=1),
        dict(key=E.index_key(T + 12_000, live), value=b"\x01", partition=0),
        dict(key=live, value=E.encode_inflight(entry), partition=0),
        dict(key=sched, value=E.encode_scheduled(E.Scheduled(T + 3000, b"x", (), T + 3000)),
             partition=0),
        dict(key=done, value=None, partition=1),
    ])
    read = lambda t, h=False: kafka_reader(spark, bs, subscribe=t, includeHeaders=h).load()  # noqa
    events = marker_events(read(markers)).cache()
    return dict(events=events, records=queue_records(read(queue, True)),
                dead=dead_letters(read(dlq, True)), state=inflight_state(read(changelog)),
                topics=dict(markers=markers, queue=queue, dlq=dlq, changelog=changelog))


def test_markers_become_per_offset_events_and_garbage_is_counted(workload):
    ev = workload["events"]
    counts = {r.event: r["count"] for r in ev.groupBy("event").count().collect()}
    assert counts == {"start": 8, "ack": 4, "release": 1, "reject": 1, "extend": 1, "tick": 1,
                      "malformed": 1}


def test_deliveries_end_as_the_markers_say(workload):
    dels = jobs.deliveries(workload["events"], as_of_ms=T + 5000)
    got = {(r.queue, r.offset): (r.outcome, r.processing_ms, r.deadline_ms) for r in dels.collect()}
    assert got == {
        (A, 0): ("acked", 100, T + 1000), (A, 1): ("acked", 200, T + 1000),
        (A, 2): ("released", None, T + 1000), (A, 3): ("timed-out", None, T + 1000),
        (A, 4): ("rejected", None, T + 1000), (A, 5): ("in-flight", None, T + 12_000),
        (B, 0): ("acked", 400, T + 1000), (B, 1): ("acked", 600, T + 1500)}


def test_processing_time_percentiles_per_queue(workload):
    p = jobs.percentiles(jobs.deliveries(workload["events"], T + 5000))
    got = {r.queue: (r.acked, r.p50_ms, r.p90_ms, r.p99_ms, r.max_ms) for r in p.collect()}
    assert got == {A: (2, 100, 200, 200, 200), B: (2, 400, 600, 600, 600)}


def test_redelivery_and_dead_letter_rates_per_queue_and_reason(workload):
    r = jobs.rates(jobs.deliveries(workload["events"], T + 5000), workload["dead"],
                   workload["records"])
    got = {(x.queue, x.kind, x.reason): (x["count"], x.total, round(x.rate, 4)) for x in r.collect()}
    assert got == {(A, "redelivery", "released"): (1, 6, 0.1667),
                   (A, "redelivery", "timed-out"): (1, 6, 0.1667),
                   (A, "dead-letter", "rejected"): (1, 5, 0.2)}
    summary = jobs.dead_letter_summary(workload["dead"]).collect()
    assert [(s.queue, s.reason, s["count"], s.max_deliveries, s.p50_age_ms) for s in summary] == \
        [(A, "rejected", 1, 1, 1350)]


def test_never_acked_messages_and_what_became_of_them(workload):
    n = jobs.never_acked(jobs.deliveries(workload["events"], T + 5000), workload["records"],
                         workload["dead"])
    got = {r.message_id: (r.copies, r.deliveries, r.last_outcome, r.dead_letter_reason)
           for r in n.collect()}
    assert got == {f"{A}-m2": (1, 1, "released", None), f"{A}-m3": (2, 2, "in-flight", None),
                   f"{A}-m4": (1, 1, "rejected", "rejected")}


def test_inflight_state_and_overdue_entries_from_the_changelog(workload):
    state = workload["state"]
    got = {(r.kind, r.queue): (r.start, r.end, r.pending_count, r.message_id, r.next_deadline_ms)
           for r in state.collect()}
    assert got == {("range", A): (5, 6, 1, None, T + 12_000),
                   ("schedule", A): (None, None, None, "later", T + 3000)}
    assert jobs.overdue(state, as_of_ms=T + 2000).count() == 0
    late = jobs.overdue(state, as_of_ms=T + 13_000).collect()
    assert [(r.cause, r["count"], r.overdue_ms) for r in late] == [("scheduled", 1, 10_000),
                                                              ("timeout", 1, 1000)]
    summary = jobs.inflight_summary(state).collect()
    assert [(s.queue, s.ranges, s.pending, s.scheduled) for s in summary] == [(A, 1, 1, 1)]


def test_the_cli_runs_a_job_and_writes_parquet(workload, spark, broker, tmp_path, monkeypatch):
    from kmq.cli import main

    t = workload["topics"]
    monkeypatch.setenv("KMQ_MARKERS_TOPIC", t["markers"])
    monkeypatch.setenv("KMQ_QUEUE_TOPIC", t["queue"])
    monkeypatch.setenv("KMQ_DLQ_TOPIC", t["dlq"])
    result = CliRunner().invoke(main, ["spark", "rates", "--out", str(tmp_path), "--show", "0",
                                       "--bootstrap-servers", broker.bootstrap_servers,
                                       "--as-of-ms", str(T + 5000)])
    assert result.exit_code == 0, result.output
    assert "rates: 3 rows" in result.output
    assert spark.read.parquet(str(tmp_path / "rates")).count() == 3


def test_an_error_inside_the_data_source_is_one_cli_error_line(spark, broker, tmp_path):
    # The missing topic is found while Spark plans the read (in a Python worker): the
    # ConfigError reaches the driver inside an AnalysisException, its message comes out whole.
    from kmq.cli import main

    result = CliRunner().invoke(main, ["spark", "snapshot", "--topic", "jobs-no-such-topic",
                                       "--out", str(tmp_path), "--show", "0",
                                       "--bootstrap-servers", broker.bootstrap_servers])
    assert result.exit_code == 1, result.output
    assert result.stderr == "error: option subscribe names topics that do not exist: " \
                            "jobs-no-such-topic\n"
    assert result.stdout == ""
