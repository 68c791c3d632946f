"""docs/reliability.md read as a user, a second time: claims that need no broker.

- "``client.consumer(q, transactional=True, transactional_id=...)``;
  ``KMQ_TRANSACTIONAL_STARTS=on`` makes it every consumer's default": ``transactional`` is
  True, False or None (the setting's default). A string such as ``"off"`` was truthy and
  made the consumer transactional, the opposite of what it said.
- "odd ``kmq.*`` numbers (``int_header`` falls back)": a negative ``kmq.deliveries`` too.
- ``config={...}`` of ``client.consumer``: tuning only, not the properties at-least-once
  rests on.
- "every settled id **after** ``flush()`` returned (durable)": with transactional STARTs
  too, whose transaction may fail and be retried.
- the reasons, files, variables, modules and metrics the doc names exist.
"""

from __future__ import annotations

import pytest

from kmq.consumer.facade import Consumer
from kmq.errors import ConfigError
from kmq.settings import Settings

# No broker listens here: a bad argument is refused before anything connects.
SETTINGS = Settings.from_env({}, bootstrap_servers="127.0.0.1:9", profile="embedded",
                             dispatch="partition")


@pytest.mark.parametrize("transactional", ["off", "on", 1, 0, "False"])
def test_a_transactional_that_is_not_a_bool_is_refused_naming_it(transactional):
    with pytest.raises(ConfigError, match=r"transactional=.* must be True or False"):
        Consumer(SETTINGS, "orders", queue_topic_partitions=1, markers_topic_partitions=1,
                 transactional=transactional)


# -- "odd kmq.* numbers (int_header falls back ...)": any producer writes these headers ----
# A negative kmq.deliveries was taken as it is: delivery_count -4, and a poison message so
# forged went round a million times more than max_deliveries allows before dead-lettering.

# 10**40 and 2**63 reached user code as they were (an audit): past an i64, no count either.
@pytest.mark.parametrize("raw", [b"-5", b"-1000000", b"-0x1", b"x", b"9" * 40, b"%d" % (1 << 63)])
def test_a_deliveries_header_that_is_no_count_falls_back(raw):
    from kmq.protocol.envelope import Cause, DeadLetter, after_expiry
    from tests.unit.test_message_headers import message

    assert message([("kmq.deliveries", raw)]).delivery_count == 1
    plan = after_expiry([("kmq.id", b"poison"), ("kmq.deliveries", raw)], partition=0, offset=1,
                        record_timestamp_ms=1, cause=Cause.TIMEOUT, reason="", started_ms=1, now_ms=2,
                        max_deliveries=1)
    assert isinstance(plan, DeadLetter), plan  # its first delivery was its last


# -- "pass config={"queued.max.messages.kbytes": ...} to client.consumer" ------------------
# The dict went over kmq's own properties of its readers: {"auto.offset.reset": "latest"}
# made a partition-mode queue's new group skip every message sent before it joined (never
# delivered, never dead-lettered), {"enable.auto.offset.store": True, "enable.auto.commit":
# True} committed offsets before their STARTs were written, "isolation.level" delivered
# aborted sends. Tuning stays the user's; what keeps at-least-once is refused by name.

@pytest.mark.parametrize("mode", ["partition", "shared"])
@pytest.mark.parametrize("prop, value", [
    ("auto.offset.reset", "latest"), ("enable.auto.commit", True), ("enable.auto.offset.store", True),
    ("isolation.level", "read_uncommitted"), ("group.id", "mine"), ("enable.partition.eof", True),
    ("partition.assignment.strategy", "cooperative-sticky"), ("bootstrap.servers", "127.0.0.1:1"),
    ("topic.auto.offset.reset", "latest"), ("default.topic.config", {"auto.offset.reset": "latest"}),
])
def test_a_config_over_a_property_kmq_sets_for_at_least_once_is_refused_naming_it(mode, prop, value):
    from kmq.protocol.lane_layout import LaneLayout

    with pytest.raises(ConfigError, match=rf"config=.*{prop.replace('.', '[.]')}.* kmq sets"):
        Consumer(SETTINGS.replace(dispatch=mode), "orders", queue_topic_partitions=1,
                 markers_topic_partitions=1, lane_layout=LaneLayout("kmq.deliveries", 1, 1),
                 config={prop: value, "queued.max.messages.kbytes": 16384})


# -- "every settled id **after** flush() returned (durable)", with transactional STARTs ----
# A transactional consumer's verbs wait in its marker transaction; flush() ran that
# transaction once and, when the broker answered with a retriable error (or one that
# aborts it), returned as if all were durable: the acks were still only in memory.

class TransactionsThatFail:
    """The marker producer's transactional calls (a narrow seam: no broker here); the
    first ``failures`` commits fail with a retriable error."""

    def __init__(self, failures: int) -> None:
        self.failures, self.commits = failures, 0

    def __call__(self, conf):
        return self

    def init_transactions(self, *_):
        pass

    def begin_transaction(self):
        pass

    def produce(self, *args, **kwargs):
        pass

    def commit_transaction(self, *_):
        from confluent_kafka import KafkaError, KafkaException

        if self.failures:
            self.failures -= 1
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "broker away", retriable=True))
        self.commits += 1

    def poll(self, *_):
        return 0

    def flush(self, *_):
        return 0


@pytest.mark.parametrize("failures, durable", [(10**9, False), (1, True)])
def test_flush_returns_only_once_a_transactional_consumer_s_verbs_are_committed(monkeypatch, failures, durable):
    # (partition mode: a shared consumer asks the broker for its lane's ends as it starts;
    # both modes' flush() goes through the same wait)
    from kmq.consumer import marker_writer
    from kmq.errors import DeliveryError
    from kmq.protocol import markers as M

    producer = TransactionsThatFail(failures)
    monkeypatch.setattr(marker_writer, "Producer", producer)
    c = Consumer(SETTINGS, "orders", queue_topic_partitions=1, markers_topic_partitions=1,
                 transactional=True, flush_interval_s=3600)
    try:
        with c._lock:  # an ack recorded and turned into its marker, as the flusher does
            c._writer.send([M.Ack(M.RangeRef("orders", 0, 5, 6), 1)], [], lambda: None)
        if durable:
            c.flush(timeout_s=5)
            assert producer.commits >= 1 and not c._writer.has_pending
        else:
            with pytest.raises(DeliveryError, match=r"not committed within 0\.3 s"):
                c.flush(timeout_s=0.3)
            assert c._writer.has_pending  # kept for the next transaction
    finally:
        producer.failures = 0
        c.close(timeout_s=1)


# -- the names the doc gives a user to look for ----------------------------------------------

def _doc() -> str:
    from pathlib import Path
    return (Path(__file__).resolve().parents[2] / "docs" / "reliability.md").read_text()


def test_the_set_aside_reasons_the_doc_lists_are_the_tracker_s():
    import re

    from kmq.protocol.outcomes import SET_ASIDE

    listed = re.search(r"`set_aside` by reason: (.*?);", _doc(), re.S)[1]
    assert set(re.findall(r"`([a-z-]+)`", listed)) == {o.value for o in SET_ASIDE}


def test_every_file_variable_and_module_name_the_doc_gives_exists():
    import dataclasses
    import importlib
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    text = _doc()
    files = set(re.findall(r"`((?:kmq|agents|app|tables|web|tests|bench)/[\w/.]+\.py)`", text))
    assert files and not sorted(f for f in files if not (root / f).exists())
    read = {f.metadata["env"] for f in dataclasses.fields(Settings)}
    assert set(re.findall(r"\bKMQ_[A-Z0-9_]*[A-Z0-9]\b", text)) - {"KMQ_SETS"} <= read
    for dotted in set(re.findall(r"`((?:kmq|bench)\.[a-z_]+\.[\w.]+)`", text)):
        parts = dotted.split(".")
        if not any((root / parts[0] / parts[1]).with_suffix(x).exists() for x in ("", ".py")):
            continue  # a header's name (kmq.dlq.detail), not a module's
        at = len(parts)
        while True:  # the longest importable prefix, then attributes
            try:
                obj = importlib.import_module(".".join(parts[:at]))
                break
            except ModuleNotFoundError:
                at -= 1
        for name in parts[at:]:
            obj = getattr(obj, name)
    for metric in ("kmq_tracker_malformed_markers", "kmq_tracker_set_aside", "kmq_dispatcher_held_bytes"):
        assert f'"{metric}"' in (root / "web" / "metrics.py").read_text(), metric


def test_close_says_when_a_transactional_consumer_s_verbs_were_not_committed(monkeypatch, caplog):
    # close() ran the transaction once and, when it failed, dropped its verbs without a word
    # (a plain consumer's close warns of marker records not confirmed).
    from kmq.consumer import marker_writer
    from kmq.protocol import markers as M

    producer = TransactionsThatFail(10**9)
    monkeypatch.setattr(marker_writer, "Producer", producer)
    c = Consumer(SETTINGS, "orders", queue_topic_partitions=1, markers_topic_partitions=1,
                 transactional=True, flush_interval_s=3600)
    with c._lock:
        c._writer.send([M.Ack(M.RangeRef("orders", 0, 5, 6), 1)], [], lambda: None)
    with caplog.at_level("WARNING", logger="kmq.consumer"):
        c.close(timeout_s=0.3)
    assert "marker transaction not committed at close" in caplog.text, caplog.text
