"""docs/workers.md's claims about bad input to `@kmq.handler` and `kmq worker`, checked
without a broker: each mistake is a ConfigError (or a usage error) naming the argument or
option and the fix, never a traceback, and never taken silently."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import kmq
from kmq.errors import ConfigError


def test_a_single_non_retryable_type_is_a_config_error_naming_the_argument():
    # `non_retryable=ValueError` (no tuple) was a TypeError from tuple() at import.
    with pytest.raises(ConfigError, match=r"non_retryable=.*ValueError.*tuple of exception types"):
        kmq.handler("emails", non_retryable=ValueError)(lambda m: None)
    h = kmq.handler("emails", non_retryable=[ValueError])(lambda m: None)  # a list is still fine
    assert h.non_retryable == (ValueError,)


def test_the_decorator_without_its_queue_is_a_config_error_saying_how_to_call_it():
    # A bare `@kmq.handler` silently replaced the function with the decorator itself:
    # `kmq worker` then found no handler, and calling the function built one for a message.
    with pytest.raises(ConfigError, match=r'@kmq.handler\("emails"\)'):
        @kmq.handler
        def send_email(msg):
            pass


def test_a_bad_queue_name_is_refused_when_the_decorator_is_called():
    from kmq.errors import InvalidQueueNameError

    with pytest.raises(InvalidQueueNameError, match="queue='a b'"):
        kmq.handler("a b")


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf"])
def test_a_connect_timeout_that_is_not_a_positive_number_of_seconds_is_refused_by_name(value, monkeypatch):
    # -1 waited for a broker without end (librdkafka's "no timeout"); 0 gave up without trying.
    import kmq.cli.connect
    from kmq.cli.worker import worker

    checked = []  # the broker check is not made here: it would wait without end on -1
    monkeypatch.setattr(kmq.cli.connect, "check_broker", lambda settings, timeout_s: checked.append(timeout_s))
    out = CliRunner().invoke(worker, ["no_such_jobs_module", "--connect-timeout-s", value])
    assert checked == [] and out.exit_code == 2, (checked, out.output)
    assert "--connect-timeout-s" in out.output and "Traceback" not in out.output


def test_queue_names_in_queues_may_have_spaces_after_the_commas(tmp_path, monkeypatch):
    import kmq.cli.connect
    import kmq.worker.main
    from kmq.cli.worker import worker

    monkeypatch.setattr(kmq.cli.connect, "check_broker", lambda settings, timeout_s: None)
    seen = {}
    monkeypatch.setattr(kmq.worker.main, "run_worker", lambda module, **kw: seen.update(kw) or 0)
    out = CliRunner().invoke(worker, ["jobs", "--queues", "emails, sms ,"])
    assert out.exit_code == 0, out.output
    assert seen["queues"] == ["emails", "sms"]


def test_a_metrics_host_that_is_no_address_here_names_metrics_host(tmp_path, monkeypatch):
    # It said "--metrics-port 0 on 256.0.0.1: ...; give a free port": the port was not the fault.
    from kmq.worker.main import run_worker

    (tmp_path / "jobs_metrics_host.py").write_text(
        "import kmq\n\n@kmq.handler('emails')\ndef send_email(msg):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=r"--metrics-host '256\.0\.0\.1'.*give an address of this host"):
        run_worker("jobs_metrics_host", metrics_port=0, metrics_host="256.0.0.1")


@pytest.mark.parametrize("args, named", [(["--max", "0"], "--max"), (["--max", "-5"], "--max"),
                                         (["--timeout-s", "-1"], "--timeout-s"), (["--timeout-s", "0"], "--timeout-s")])
def test_kmq_receive_refuses_a_count_or_wait_that_can_receive_nothing(args, named, monkeypatch):
    # README's `kmq receive orders --ack --max 10`: --max 0 or --timeout-s -1 printed an empty
    # table, exit status 0, as if the queue were empty.
    import kmq.cli.connect
    from kmq.cli import main

    monkeypatch.setattr(kmq.cli.connect, "check_broker", lambda settings, timeout_s: None)
    out = CliRunner().invoke(main, ["receive", "orders", *args])
    assert out.exit_code == 2 and named in out.output, out.output


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_grace_that_is_no_number_of_seconds_is_refused_by_name(value, monkeypatch):
    """click's FloatRange(0) took nan, and the worker then gave handlers no grace at all."""
    import kmq.cli.connect
    from kmq.cli.worker import worker

    monkeypatch.setattr(kmq.cli.connect, "check_broker", lambda settings, timeout_s: None)
    out = CliRunner().invoke(worker, ["no_such_jobs_module", "--grace-s", value])
    assert out.exit_code == 2 and "--grace-s" in out.output and "Traceback" not in out.output, out.output
