"""``kmq queue show | set | purge`` against the embedded broker and a tracker, as an operator
runs them: a mode switch from the shell that consumers follow, settings shown with their
defaults, bad values refused with the option named, a purge the tracker confirms, and with
auth on a missing or wrong token refused naming --token."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import kmq
from kmq.cli import main
from kmq.dev.devstack import settings_env
from kmq.ops.queues_writes import publish_auth
from tests.conftest import wait_for


@pytest.fixture
def cli(shared_settings, tracker):
    env = settings_env(shared_settings)
    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(main, ["queue", *args], env=env)

    return run


def test_show_marks_the_deployments_defaults(cli, queue, shared_settings):
    out = cli("show", queue, "--json")
    assert out.exit_code == 0, out.output
    d = json.loads(out.output)
    assert d["queue"] == queue and d["dispatch"] == shared_settings.dispatch
    assert d["visibility_timeout_s"] == shared_settings.visibility_timeout_s
    assert {"dispatch", "visibility_timeout_s", "max_deliveries"} <= set(d["defaults"])
    table = cli("show", queue)
    assert table.exit_code == 0 and "visibility_timeout_s" in table.output and "(default)" in table.output


def test_set_switches_the_mode_at_run_time_and_consumers_follow(cli, queue, shared_settings):
    with kmq.Client(settings=shared_settings) as client:
        client.send_batch(queue, [b"a", b"b"])
        client.flush()
        out = cli("set", queue, "--dispatch", "partition", "--visibility-timeout-s", "30", "--backoff", "fixed:2",
                  "--json")
        assert out.exit_code == 0, out.output
        d = json.loads(out.output)
        assert d["dispatch"] == "partition" and d["visibility_timeout_s"] == 30.0
        assert d["backoff"]["kind"] == "fixed" and d["backoff"]["base_s"] == 2.0
        assert "visibility_timeout_s" not in d["defaults"]
        # This client's view of the queues topic sees the command's write a moment later; before
        # that, the old settings say no handover is pending too.
        switched = lambda cfg: cfg.dispatch == "partition" and not cfg.handover_pending  # noqa: E731
        wait_for(lambda: switched(client.queue_config(queue)), 60, what="the switch and the tracker's handover")
        with client.consumer(queue) as c:
            assert c.mode == "partition" and c.visibility_timeout_s == 30.0
            got = []
            wait_for(lambda: got.extend(c.receive_batch(2, timeout_s=0.2)) or len(got) >= 2, 60,
                     what="both messages in partition mode")
            got[0].ack()
            # Back to shared, the visibility back to the deployment's default: the consumer follows.
            out = cli("set", queue, "--dispatch", "shared", "--visibility-timeout-s", "default")
            assert out.exit_code == 0, out.output
            extra = []  # the consumer acts on a switch when user code receives
            wait_for(lambda: extra.extend(c.receive_batch(10, timeout_s=0.1)) or c.mode == "shared", 60,
                     what="the consumer to follow the switch")
            assert not extra
            got[1].ack()
        assert client.queue_config(queue).visibility_s(shared_settings) == shared_settings.visibility_timeout_s


def test_bad_values_are_refused_with_the_option_named_and_nothing_written(cli, queue, shared_settings):
    out = cli("set", queue, "--max-deliveries", "three")
    assert out.exit_code == 1 and "--max-deliveries 'three': give a whole number or 'default'" in out.output
    out = cli("set", queue, "--visibility-timeout-s", "-5")
    assert out.exit_code == 1 and "--visibility-timeout-s -5: visibility_timeout_s=-5.0 must be a number of seconds" \
        in out.output
    out = cli("set", queue, "--ordering", "group", "--spread", "2")
    assert out.exit_code == 1 and "--ordering group: ordering='group' needs spread=1" in out.output
    out = cli("set", queue)  # a usage error, before the broker check
    assert out.exit_code == 2 and "give at least one setting to change: --dispatch" in out.output
    with kmq.Client(settings=shared_settings) as client:
        assert client.queue_config(queue).updated_at_ms == 0  # never written


def test_purge_drops_what_was_enqueued(cli, queue, shared_settings):
    with kmq.Client(settings=shared_settings) as client:
        client.send_batch(queue, [b"x"] * 5)
        client.flush()
        out = cli("purge", queue, "--yes")
        assert out.exit_code == 0, out.output
        assert f"purged {queue}: every record below offset" in out.output
        client.send(queue, b"after")
        client.flush()
        with client.consumer(queue) as c:
            got = []
            wait_for(lambda: got.extend(c.receive_batch(10, timeout_s=0.2)) or got, 60, what="a message")
            assert [m.value for m in got] == [b"after"]  # none of the five purged before it
            got[0].ack()


def test_with_auth_on_a_missing_or_wrong_token_is_refused_naming_the_token_option(make_settings):
    # The CLI said "(KMQ_TOKEN or token=...)", the SDK's keyword; its option is --token.
    settings = make_settings(auth="on", admin_token="admin-" + "x" * 20)
    publish_auth(settings)  # what a tracker with KMQ_AUTH=on writes at start; the SDK checks it itself
    env = {k: v for k, v in settings_env(settings).items() if k not in ("KMQ_AUTH", "KMQ_ADMIN_TOKEN")}
    runner = CliRunner()
    for args in (["queue", "show", "qa"], ["queue", "set", "qa", "--max-deliveries", "3"], ["dlq", "list", "qa"]):
        out = runner.invoke(main, args, env={**env, "KMQ_TOKEN": ""})
        assert out.exit_code == 1 and out.output == \
            "error: this kmq deployment requires a token (--token / KMQ_TOKEN)\n", (args, out.output)
    out = runner.invoke(main, ["queue", "show", "qa", "--token", "not-a-token"], env=env)
    assert out.exit_code == 1 and out.output == "error: the token is not valid here (--token / KMQ_TOKEN)\n", out.output
    with kmq.Client(settings=settings.replace(token="")) as client:  # the SDK's words stay its own
        with pytest.raises(kmq.PermissionDeniedError, match=r"requires a token \(KMQ_TOKEN or token=\.\.\.\)$"):
            client.queue_config("qa")
