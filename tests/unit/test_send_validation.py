"""Invalid sends fail before anything is written (no broker is reached)."""

import pytest

import kmq
from kmq.errors import ConfigError, InvalidQueueNameError, MessageTooLargeError

# An address nothing listens on: any attempt to write would hang or fail differently.
client = kmq.Client("127.0.0.1:1", max_message_bytes=1000)


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(queue="bad name", value=b"x"), InvalidQueueNameError, "queue="),
    (dict(queue="q", value="text"), ConfigError, "value must be bytes"),
    (dict(queue="q", value=b"x" * 2000), MessageTooLargeError, "KMQ_MAX_MESSAGE_BYTES"),
    (dict(queue="q", value=b"x", headers={"kmq.id": b"1"}), ConfigError, "kmq's own"),
    # 300 characters, 900 bytes: header names are counted in UTF-8 bytes
    (dict(queue="q", value=b"x" * 50, headers={"\u20ac" * 300: b""}), MessageTooLargeError,
     "KMQ_MAX_MESSAGE_BYTES"),
    (dict(queue="q", value=b"x", headers={"h": 5}), ConfigError, "bytes or str"),
    (dict(queue="q", value=b"x", delay_s=-1), ConfigError, "negative"),
    (dict(queue="q", value=b"x", delay_s="soon"), ConfigError, "delay_s"),
    (dict(queue="q", value=b"x", delay_s=float("nan")), ConfigError, "finite"),
    (dict(queue="q", value=b"x", delay_s=8 * 86400), ConfigError, "KMQ_MAX_DELAY_S"),
    (dict(queue="q", value=b"x", delay_s=1, deliver_at=2), ConfigError, "not both"),
])
def test_invalid_send_raises_before_writing(kwargs, error, words):
    with pytest.raises(error, match=words):
        client.send(kwargs.pop("queue"), kwargs.pop("value"), **kwargs)
    assert client._producer is None  # nothing was even connected


def test_send_batch_checks_every_value_first():
    with pytest.raises(MessageTooLargeError, match=r"values\[2\]"):
        client.send_batch("q", [b"a", b"b", b"x" * 5000])
    with pytest.raises(MessageTooLargeError, match=r"values\[0\]"):
        client.send_batch("q", [b"x" * 50], headers={"\u20ac" * 300: b""})
    assert client._producer is None
