"""Bad arguments to the README's SDK calls, checked without a broker.

Each is a ConfigError naming the argument and the fix, raised before anything is read or
written: not a TypeError from deep inside, an empty answer, or (a purge) a traceback after
the purge was already sent.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import kmq

# No client: the checks come before the client touches its settings or the broker.
NO_CLIENT = SimpleNamespace()


@pytest.mark.parametrize("value", [b"abc", "abc", bytearray(b"abc")])
def test_send_batch_given_one_value_instead_of_a_list_says_so(value):
    client = kmq.Client(bootstrap_servers="127.0.0.1:1")
    with pytest.raises(kmq.ConfigError, match=r"values must be a list of bytes values.*client.send"):
        client.send_batch("orders", value)


def test_send_batch_names_the_index_of_a_value_that_is_not_bytes():
    client = kmq.Client(bootstrap_servers="127.0.0.1:1")
    with pytest.raises(kmq.ConfigError, match=r"values\[1\] must be bytes, not str"):
        client.send_batch("orders", [b"a", "b"])


@pytest.mark.parametrize("timeout", ["30", float("nan"), None, True, 0, -1])
def test_purge_with_a_timeout_that_is_not_seconds_is_refused_before_the_purge_is_sent(timeout):
    # Before, "30" was a TypeError after the PURGE marker was written; nan waited for ever.
    with pytest.raises(kmq.ConfigError, match=r"timeout_s=.* must be a finite number of seconds above 0"):
        kmq.Client.purge(NO_CLIENT, "orders", timeout_s=timeout)


@pytest.mark.parametrize("call", ["dead_letters", "redrive"])
@pytest.mark.parametrize("name", ["min_age_s", "max_age_s"])
@pytest.mark.parametrize("value", ["3600", float("nan"), True, -1])
def test_an_age_filter_that_is_not_seconds_is_refused_by_name(call, name, value):
    # "3600" was a TypeError once a dead letter was there; nan matched nothing, silently.
    with pytest.raises(kmq.ConfigError, match=rf"{name}=.* must be a number of seconds, 0 or more"):
        getattr(kmq.Client, call)(NO_CLIENT, "orders", **{name: value})


@pytest.mark.parametrize("value", [True, 1.5, "100", 0])
def test_a_redrive_batch_size_that_is_not_a_whole_number_from_1_is_refused(value):
    with pytest.raises(kmq.ConfigError, match=r"batch_size=.* must be a whole number >= 1"):
        kmq.Client.redrive(NO_CLIENT, "orders", batch_size=value)


@pytest.mark.parametrize("timeout", ["1", float("nan"), True, -1])
def test_flush_with_a_timeout_that_is_not_seconds_is_refused_by_name(timeout):
    # -1 is librdkafka's "for ever": a flush against a dead broker never returned.
    client = kmq.Client(bootstrap_servers="127.0.0.1:1")
    with pytest.raises(kmq.ConfigError, match=r"timeout_s=.* must be a finite number of seconds, 0 or more"):
        client.flush(timeout)


class _QueuedProducer:
    """Stands for a producer holding unsent messages: flush() says how many are left."""

    def flush(self, timeout_s: float) -> int:
        return 3


@pytest.mark.parametrize("timeout", ["1", float("nan"), -1])
def test_client_close_with_a_bad_timeout_keeps_what_it_has_not_sent(timeout):
    # close() dropped its producer in a finally after flush() refused the timeout: the
    # queued messages were lost and a second close() did nothing.
    client = kmq.Client(bootstrap_servers="127.0.0.1:1")
    client._producer = producer = _QueuedProducer()
    with pytest.raises(kmq.ConfigError, match=r"timeout_s=.* must be a finite number of seconds, 0 or more"):
        client.close(timeout)
    assert client._producer is producer


@pytest.mark.parametrize("settings", [{"bootstrap_servers": "127.0.0.1:9092"}, "127.0.0.1:9092"])
def test_a_client_given_settings_that_are_not_a_settings_object_says_what_to_give(settings):
    # It was taken, and the first send failed with an AttributeError.
    with pytest.raises(kmq.ConfigError, match=r"settings=.* must be a kmq.Settings.*Settings.from_env"):
        kmq.Client(settings=settings)


@pytest.mark.parametrize("policy", [kmq.Backoff.fixed(1), kmq.Backoff.exponential(base_s=1, max_s=300)])
@pytest.mark.parametrize("attempt", ["2", 2.0, True, None])
def test_compute_backoff_refuses_an_attempt_that_is_not_a_whole_number(policy, attempt):
    # "2" was 1 s for a fixed policy and a TypeError for an exponential one.
    with pytest.raises(kmq.ConfigError, match=r"attempt=.* must be a whole number"):
        kmq.compute_backoff(policy, attempt)


def test_compute_backoff_refuses_a_policy_that_is_not_a_backoff():
    with pytest.raises(kmq.ConfigError, match=r"policy=.* must be a kmq.Backoff"):
        kmq.compute_backoff("exponential", 2)


def test_the_asyncio_client_says_the_same_of_one_value_given_as_the_batch():
    import asyncio

    client = kmq.aio.Client(bootstrap_servers="127.0.0.1:1")
    with pytest.raises(kmq.ConfigError, match=r"values must be a list of bytes values"):
        asyncio.run(client.send_batch("orders", b"abc"))


def test_the_asyncio_client_close_with_a_bad_timeout_stays_open_to_close_again():
    # Its finally shut its executor down after the sync close refused the timeout: a
    # second close() then failed, the messages still queued in the sync client.
    import asyncio

    import kmq.aio

    client = kmq.aio.Client(bootstrap_servers="127.0.0.1:1")
    with pytest.raises(kmq.ConfigError, match=r"timeout_s='1' must be a finite number of seconds, 0 or more"):
        asyncio.run(client.close("1"))
    asyncio.run(client.close(1))  # nothing was sent: returns at once
