"""docs/cli.md's `kmq send` and `kmq receive` against the embedded broker and the shared
tracker, as a user runs them: stdin lines sent (bytes as given), the `sent ...` line, a receive
without `--ack` releasing at exit, so the next receive gets the same messages with one more
delivery, a receive with `--ack` on an ordered queue getting a group's messages one after
another in one call, and a purge without `--yes` that asks."""

from __future__ import annotations

import json
import time

from click.testing import CliRunner

import kmq

from kmq.cli import main
from kmq.dev.devstack import settings_env
from tests.conftest import wait_for
from tests.integration.views import tracker_sees


def test_send_from_stdin_and_a_receive_without_ack_releases_at_exit(shared_settings, tracker, queue):
    runner = CliRunner()
    env = settings_env(shared_settings)
    out = runner.invoke(main, ["send", queue], input="first\r\nsecond\n", env=env)
    assert out.exit_code == 0 and out.output.startswith(f"sent 2 messages to {queue}: "), out.output
    out = runner.invoke(main, ["send", queue], input="", env=env)
    assert out.exit_code == 0 and out.output == f"sent 0 messages to {queue}\n"

    def receive(*extra: str) -> list[dict]:
        # --max 2 stops as soon as both are in; the timeout only bounds a failure.
        got = runner.invoke(main, ["receive", queue, "--max", "2", "--timeout-s", "60", "--json", *extra], env=env)
        assert got.exit_code == 0, got.output
        return [json.loads(line) for line in got.output.splitlines()]

    looked = receive()
    assert sorted(m["value"] for m in looked) == ["first", "second"]
    assert {m["delivery_count"] for m in looked} == {1} and not any(m["acked"] for m in looked)
    again = receive("--ack")  # released at exit: delivered again at once, counted
    assert sorted(m["id"] for m in again) == sorted(m["id"] for m in looked)
    assert {m["delivery_count"] for m in again} == {2} and all(m["acked"] for m in again)


def test_send_repeat_sends_each_value_that_many_times_in_order(shared_settings, tracker, queue):
    runner = CliRunner()
    env = settings_env(shared_settings)
    out = runner.invoke(main, ["send", queue, "a", "b", "--repeat", "4"], env=env)
    assert out.exit_code == 0 and out.output == f"sent 8 messages to {queue}\n", out.output  # no ids past 5
    got = runner.invoke(main, ["receive", queue, "--ack", "--max", "8", "--timeout-s", "60", "--json"], env=env)
    assert got.exit_code == 0, got.output
    values = [json.loads(line)["value"] for line in got.output.splitlines()]
    assert sorted(values) == ["a"] * 4 + ["b"] * 4


def test_a_receive_with_ack_of_an_ordered_queue_gets_each_groups_next_message_in_the_same_call(
        shared_settings, tracker, queue):
    # Acked only at exit, the gate held each group's next message for the whole call:
    # m0 and h0 after the full --timeout-s (an audit: 2 of 6 after 5.4 s of a 4 s timeout).
    with kmq.Client(settings=shared_settings) as client:
        client.configure_queue(queue, ordering="group", dispatch="shared")
        tracker_sees(tracker, queue, ordering="group", dispatch="shared")
        for i in range(5):
            client.send(queue, f"m{i}".encode(), group="G")
        client.send(queue, b"h0", group="H")
        client.flush()
    timeout_s = 30
    started = time.monotonic()
    # A visibility far past the timeout: nothing comes twice, whatever the machine's load.
    out = CliRunner().invoke(main, ["receive", queue, "--ack", "--max", "6", "--timeout-s", str(timeout_s),
                                    "--visibility-timeout-s", "120", "--json"], env=settings_env(shared_settings))
    elapsed_s = time.monotonic() - started
    assert out.exit_code == 0, out.output
    got = [json.loads(line) for line in out.output.splitlines()]
    assert [m["value"] for m in got if m["value"].startswith("m")] == ["m0", "m1", "m2", "m3", "m4"]
    assert sorted(m["value"] for m in got) == ["h0", "m0", "m1", "m2", "m3", "m4"] and all(m["acked"] for m in got)
    assert {m["delivery_count"] for m in got} == {1}
    assert elapsed_s < timeout_s  # --max 6 reached: the timeout only bounds a failure


def test_a_purge_without_yes_asks_and_a_no_aborts(shared_settings, queue):
    runner = CliRunner()
    env = settings_env(shared_settings)
    for args in (["dlq", "purge", queue], ["queue", "purge", queue]):
        out = runner.invoke(main, args, input="n\n", env=env)
        assert out.exit_code == 1 and "? [y/N]: " in out.output and out.output.endswith("Aborted!\n"), out.output


def test_bytes_that_are_not_utf8_are_sent_as_they_are(shared_settings, tracker, queue):
    runner = CliRunner()
    env = settings_env(shared_settings)
    # An argument with bytes that are not UTF-8 reaches Python as surrogate escapes; stdin as bytes.
    out = runner.invoke(main, ["send", queue, "a\udcff"], env=env)
    assert out.exit_code == 0, out.output
    out = runner.invoke(main, ["send", queue], input=b"b\xfe\n", env=env)
    assert out.exit_code == 0, out.output
    with kmq.Client(settings=shared_settings) as client, client.consumer(queue) as c:
        got: list = []
        wait_for(lambda: got.extend(c.receive_batch(2, timeout_s=0.2)) or len(got) >= 2, 60,
                 what="both messages")
        for m in got:
            m.ack()
    assert sorted(m.value for m in got) == [b"a\xff", b"b\xfe"]


def test_a_tracker_changelog_that_does_not_exist_names_kmq_app_id(shared_settings):
    # kmq spark overdue / inflight read <KMQ_APP_ID>-tracker-changelog: with another app id
    # the error named only the topic ("option subscribe names topics that do not exist")
    import pytest

    from kmq.errors import ConfigError
    from kmq.spark.cli import Inputs

    with pytest.raises(ConfigError, match="KMQ_APP_ID='no-such-app': set KMQ_APP_ID to the tracker's"):
        Inputs(None, shared_settings.replace(app_id="no-such-app")).state()
