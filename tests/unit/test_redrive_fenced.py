"""Two redrives of one queue: the newer one's producer fences the older one's transactional
id, and the older one ends in one error line saying so (a raw KafkaException traceback
before; then librdkafka's own lines on the fencing). A fake producer at the constructor: the
fencing is the broker's, its code and librdkafka's line are what this test gives (the real
broker's: tests/integration/test_dead_letters.py)."""

from __future__ import annotations

import sys

import pytest
from confluent_kafka import KafkaError, KafkaException

import kmq.ops.deadletters as deadletters
from kmq.errors import DeliveryError, KmqError
from kmq.ops.dead_letter_log import DeadLetter
from kmq.settings import Settings


def letter(offset: int) -> DeadLetter:
    return DeadLetter(queue="orders", offset=offset, id=f"m{offset}", value=b"v", headers={},
                      reason="rejected", detail="", deliveries=1, first_delivery_ms=0,
                      last_delivery_ms=0, dead_lettered_ms=0)


class Log:
    def pending(self) -> list[DeadLetter]:
        return [letter(0), letter(1), letter(2)]


class Stderr:
    """librdkafka's own printing, where no logger is given."""

    def log(self, level: int, msg: str, *args: object) -> None:
        print(f"%{level // 10}|{msg % args}", file=sys.stderr)


def fenced_at(code: int, commits_before: int, purged: list[str] | None = None) -> type:
    class FencedProducer:
        def __init__(self, conf: dict) -> None:
            self.commits = 0
            self.logger = conf.get("logger") or Stderr()

        def init_transactions(self, timeout_s: float) -> None:
            pass

        def begin_transaction(self) -> None:
            pass

        def produce(self, *args: object, **kwargs: object) -> None:
            pass

        def commit_transaction(self, timeout_s: float) -> None:
            if self.commits == commits_before:
                # librdkafka's line, served to the logger while the commit waits
                self.logger.log(50, "%s [%s] %s", "FATAL", "rdkafka#producer-1", "Fatal error: fenced")
                raise KafkaException(KafkaError(code, "Producer fenced by newer instance", fatal=True))
            self.commits += 1

        def poll(self, timeout_s: float) -> int:
            return 0

        def purge(self) -> None:
            if purged is not None:
                purged.append("purge")

        def flush(self, timeout_s: float) -> int:
            if purged is not None:
                purged.append(f"flush({timeout_s})")
            return 0

    return FencedProducer


@pytest.fixture
def queue_of_three(monkeypatch):
    monkeypatch.setattr(deadletters, "read_letter_log", lambda settings, queue: Log())
    monkeypatch.setattr(deadletters, "_partition_count", lambda producer, topic: 1)


@pytest.mark.parametrize("code", [KafkaError._FENCED, KafkaError.PRODUCER_FENCED])
def test_a_redrive_fenced_by_another_says_so_and_what_it_moved(monkeypatch, queue_of_three, code):
    monkeypatch.setattr(deadletters, "Producer", fenced_at(code, commits_before=1))
    with pytest.raises(KmqError, match=r"another redrive of 'orders' took over .* moved 1: nothing "
                                       r"was lost .*rerun") as caught:
        deadletters.redrive(Settings(), "orders", batch_size=1, rate_per_s=1e6)
    assert isinstance(caught.value.__cause__, KafkaException)


def test_another_kafka_error_is_not_taken_for_a_fencing(monkeypatch, queue_of_three):
    monkeypatch.setattr(deadletters, "Producer", fenced_at(KafkaError._TIMED_OUT, commits_before=0))
    with pytest.raises(DeliveryError, match="stopped after it moved 0: .*rerun it") as raised:
        deadletters.redrive(Settings(), "orders", batch_size=1, rate_per_s=1e6)
    assert isinstance(raised.value.__cause__, KafkaException)  # a KmqError: one line from `kmq dlq`


def test_kmq_dlq_redrive_fenced_is_one_error_line_and_exit_status_1(monkeypatch, queue_of_three):
    """Through the command: the broker check and the client are stand-ins; the redrive is the real one."""
    from click.testing import CliRunner

    import kmq.cli.connect
    import kmq.client
    from kmq.cli import main

    class OneRedriveClient:
        def __init__(self, settings: Settings) -> None:
            self.settings = settings

        def __enter__(self) -> "OneRedriveClient":
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def redrive(self, queue: str, **options: object):
            return deadletters.redrive(self.settings, queue, **options)

    monkeypatch.setattr(kmq.cli.connect, "check_broker", lambda settings, timeout_s: None)
    monkeypatch.setattr(kmq.client, "Client", OneRedriveClient)
    purged: list[str] = []
    monkeypatch.setattr(deadletters, "Producer", fenced_at(KafkaError._FENCED, commits_before=0, purged=purged))
    result = CliRunner().invoke(main, ["dlq", "redrive", "orders", "--batch-size", "1"])
    assert result.exit_code == 1 and not isinstance(result.exception, KafkaException), result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert errors == [line for line in errors if "another redrive of 'orders' took over" in line] and \
        len(errors) == 1 and "Traceback" not in result.output, result.output
    # the void transaction's records dropped, and librdkafka's line on the fencing left out
    assert purged == ["purge", "flush(0)"] and "rdkafka" not in result.output, result.output
