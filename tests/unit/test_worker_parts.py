"""The worker's pure parts: the retry/dead-letter decision, the shutdown state machine,
the decorator's checks and the metrics page."""

import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import kmq
from kmq.errors import ConfigError
from kmq.worker.main import select
from kmq.worker.metrics import WorkerMetrics
from kmq.worker.outcome import REASON_MAX_BYTES, Reject, decide, failure_reason, truncate_utf8
from kmq.worker.shutdown import Shutdown, ShutdownSignal


class Fatal(Exception):
    pass


failures = st.sampled_from([ValueError("v"), TimeoutError("t"), Fatal("f"), Reject("r"), KeyError("k")])


@given(exc=st.none() | failures, count=st.integers(1, 50), max_deliveries=st.integers(1, 50))
def test_return_acks_reject_and_non_retryable_dead_letter_now_others_retry_until_the_last(
        exc, count, max_deliveries):
    out = decide(exc, delivery_count=count, max_deliveries=max_deliveries, non_retryable=(Fatal,))
    if exc is None:
        assert out.verb == "ack"
    elif isinstance(exc, (Reject, Fatal)) or count >= max_deliveries:
        assert out.verb == "reject" and out.reason == failure_reason(exc)
    else:
        assert out.verb == "release"


def test_the_reason_is_type_and_message_on_one_line_truncated():
    assert failure_reason(ValueError("bad\njson")) == "ValueError: bad json"
    assert failure_reason(Reject("bad address")) == "bad address"
    assert failure_reason(KeyError()) == "KeyError"
    long = failure_reason(ValueError("é" * 1000))
    assert len(long.encode()) <= REASON_MAX_BYTES and long.endswith("...")


@example(text="line1\r\nline2\rline3\u2028end")
@given(text=st.text())
def test_the_reason_is_one_line_whatever_the_line_breaks(text):
    # A Reject's reason too: "on one line" (docs/workers.md), and a log line's `error`.
    for exc in (Reject(text), RuntimeError(text)):
        reason = failure_reason(exc)
        assert len(reason.splitlines()) <= 1, reason
    assert failure_reason(RuntimeError("a\nb\r\nc")) == "RuntimeError: a b c"
    assert failure_reason(Reject("line1\nline2")) == "line1 line2"


ANY_TEXT = st.text(st.characters(blacklist_categories=()))  # lone surrogates too


@given(text=ANY_TEXT, limit=st.integers(3, 600))
def test_truncation_keeps_valid_utf8_within_the_limit(text, limit):
    out = truncate_utf8(text, limit)
    assert len(out.encode()) <= limit
    sendable = text.encode(errors="replace").decode()  # a lone surrogate is "?"
    assert out == sendable if len(sendable.encode()) <= limit else out.endswith("...")


class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no")


@example(reason="bad \udc80 reason")
@given(reason=st.one_of(ANY_TEXT, st.integers(), st.none(), st.binary(max_size=20)))
def test_any_reason_a_handler_gives_is_one_a_message_can_be_rejected_with(reason):
    # An audit: Reject(123) and a lone surrogate made the settle raise, the message stayed
    # held until it lapsed and came back, the traceback logged at every delivery.
    for exc in (Reject(reason), RuntimeError(reason), Unprintable()):
        out = failure_reason(exc)
        assert isinstance(out, str) and len(out.encode()) <= REASON_MAX_BYTES and len(out.splitlines()) <= 1
        assert decide(exc, delivery_count=1, max_deliveries=5, non_retryable=(RuntimeError, Unprintable)).verb == "reject"
    assert Reject(404).reason == "404" and failure_reason(Reject(404)) == "404"
    assert failure_reason(Unprintable()) == "Unprintable: <Unprintable: str() raised RuntimeError>"


@given(grace_s=st.floats(0, 3600), t1=st.floats(0, 1e6), dt=st.floats(0, 1e4), more=st.integers(1, 5))
@example(grace_s=1e-05, t1=131072.0, dt=0.0, more=1)  # times near 1e5 s: float error ~1e-11 s
def test_first_signal_drains_within_the_grace_second_forces(grace_s, t1, dt, more):
    s = Shutdown(grace_s)
    assert s.phase == "running" and math.isinf(s.grace_left_s(t1))
    s = s.on_signal(t1)
    assert s.phase == "draining" and s.grace_left_s(t1) == pytest.approx(grace_s, abs=1e-6)
    assert s.grace_left_s(t1 + dt) == pytest.approx(max(0.0, grace_s - dt), abs=1e-6)
    for _ in range(more):
        s = s.on_signal(t1 + dt)
        assert s.phase == "forced" and s.grace_left_s(t1 + dt) == 0.0


def test_a_second_signal_the_process_exits_on_wakes_no_thread_first():
    """``kmq worker``'s signal handler exits at the second signal itself: were ``forced`` set
    first, a runner woke and logged grace_over (and flushed) before the exit, which
    docs/workers.md rules out."""
    s = ShutdownSignal(30.0)
    assert s.signal(1.0, announce_force=False).phase == "draining" and s.stopping.is_set()
    assert s.signal(2.0, announce_force=False).phase == "forced" and not s.forced.is_set()
    other = ShutdownSignal(30.0)  # a runner that failed stops the others: they are told
    other.signal(1.0)
    assert other.signal(2.0).phase == "forced" and other.forced.is_set()


def test_a_second_signal_inside_the_first_ones_handler_forces_without_waiting_for_it():
    # SIGTERM then SIGINT at once: the second handler ran inside the first, which held the
    # lock, and waited for it for ever (a CI run's worker never exited).
    import threading

    s = ShutdownSignal(30.0)
    inner = []
    on_signal = Shutdown.on_signal

    def interrupted(state, now):  # the second signal's handler runs here, lock held
        if not inner:
            inner.append(s.signal(now + 0.001, announce_force=False))
        return on_signal(state, now)

    done = threading.Event()

    def first_signal():
        Shutdown.on_signal = interrupted
        try:
            s.signal(100.0, announce_force=False)
        finally:
            Shutdown.on_signal = on_signal
            done.set()
    threading.Thread(target=first_signal, daemon=True).start()
    assert done.wait(5), "the second signal waited for the first one's lock"
    assert inner[0].phase == "forced"


def test_a_decorated_function_stays_callable_and_says_how_it_runs():
    @kmq.handler("emails", concurrency=32, non_retryable=(Fatal,), visibility_timeout_s=60)
    def send_email(msg):
        return msg * 2

    @kmq.handler("pings")
    async def ping(msg):
        return msg

    assert send_email(21) == 42
    assert (send_email.queue, send_email.concurrency, send_email.is_async) == ("emails", 32, False)
    assert send_email.max_in_flight == 32 + 256 and send_email.consumer_options == {"visibility_timeout_s": 60}
    assert ping.is_async and ping.concurrency == 1
    assert [h.queue for h in select([send_email, ping], ["pings"], 4)] == ["pings"]
    assert select([send_email], (), 4)[0].concurrency == 4


@pytest.mark.parametrize("kwargs, field", [
    ({"concurrency": 0}, "concurrency"), ({"concurrency": True}, "concurrency"),
    ({"prefetch": -1}, "prefetch"), ({"non_retryable": (1,)}, "non_retryable"),
    ({"max_in_flight": 5}, "max_in_flight"),
    # checked when decorated (an audit: accepted, then `kmq worker` refused them at start)
    ({"visibility_timeout_s": float("nan")}, r"^@kmq.handler\('q'\): visibility_timeout_s=nan"),
    ({"batch_size": 0}, "batch_size"), ({"max_processing_s": -1}, "max_processing_s")])
def test_bad_handler_arguments_name_the_argument(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        kmq.handler("q", **kwargs)(lambda m: None)


class Sender:
    def __call__(self, msg):
        pass


def test_a_handler_is_labelled_module_and_name_an_object_by_its_class():
    assert kmq.handler("q")(Sender()).name == f"{__name__}.Sender"  # no repr with an address
    assert kmq.handler("q")(Sender.__call__).name == f"{__name__}.Sender.__call__"


def test_selecting_a_queue_without_a_handler_names_it():
    h = kmq.handler("emails")(lambda m: None)
    with pytest.raises(ConfigError, match="sms"):
        select([h], ["sms"])
    with pytest.raises(ConfigError, match="no @kmq.handler"):
        select([])


def test_the_metrics_page_counts_outcomes_failures_durations_and_running():
    h = kmq.handler("emails")(lambda m: None)
    m = WorkerMetrics()
    m.in_flight(h, +1)
    m.handled(h, "ack", failed=False, duration_s=0.02)
    m.handled(h, "reject", failed=True, duration_s=3.0)
    page = m.render()
    labels = f'queue="emails",handler="{h.name}"'
    assert f'kmq_worker_messages_total{{{labels},outcome="acked"}} 1' in page
    assert f'kmq_worker_messages_total{{{labels},outcome="rejected"}} 1' in page
    assert f"kmq_worker_failures_total{{{labels}}} 1" in page
    assert f"kmq_worker_in_flight{{{labels}}} 1" in page
    assert f'kmq_worker_handler_seconds_bucket{{{labels},le="0.025"}} 1' in page
    assert f'kmq_worker_handler_seconds_bucket{{{labels},le="+Inf"}} 2' in page


def test_kmq_worker_names_a_queue_without_a_handler_and_a_module_it_cannot_import(tmp_path, monkeypatch):
    from click.testing import CliRunner

    import kmq.cli.connect
    from kmq.cli.worker import worker

    # The broker check comes first (tests/unit/test_worker_cli.py); here a broker answers.
    monkeypatch.setattr(kmq.cli.connect, "check_broker", lambda settings, timeout_s: None)
    (tmp_path / "jobs_cli_test.py").write_text(
        "import kmq\n\n@kmq.handler('emails')\ndef send_email(msg):\n    pass\n")
    monkeypatch.chdir(tmp_path)  # `kmq worker jobs` finds ./jobs.py
    monkeypatch.syspath_prepend(str(tmp_path))
    out = CliRunner().invoke(worker, ["jobs_cli_test", "--queues", "sms,emails"])
    assert out.exit_code == 1 and "--queues sms: no @kmq.handler" in out.output and "emails" in out.output
    out = CliRunner().invoke(worker, ["no_such_jobs_module"])
    assert out.exit_code == 1 and "cannot import module 'no_such_jobs_module'" in out.output


def test_processes_are_started_without_the_processes_option():
    from kmq.cli.worker import _without_processes

    argv = ["jobs", "--processes", "4", "-c", "8", "--processes=2", "-p", "3", "-p2", "--grace-s", "5"]
    assert _without_processes(argv) == ["jobs", "-c", "8", "--grace-s", "5"]


def test_each_child_runs_one_process_with_a_metrics_port_of_its_own():
    # `-p2` was passed on to the children, each of which started two more, without end;
    # with --metrics-port P every child bound P and all but one failed.
    from kmq.cli.worker import _without_processes, child_argvs

    own = ["--processes", "1", "--parent-pid", "77"]
    assert child_argvs(["jobs"], 2, 9100, 77) == [["jobs", *own, "--metrics-port", "9100"],
                                                  ["jobs", *own, "--metrics-port", "9101"]]
    assert child_argvs(["jobs", "--metrics-port", "0"], 2, 0, 77) == [["jobs", "--metrics-port", "0", *own]] * 2
    assert child_argvs(["jobs"], 3, None, 77) == [["jobs", *own]] * 3
    # A value that only begins with -p is kept.
    assert _without_processes(["jobs", "--metrics-host", "-peer", "-p5"]) == ["jobs", "--metrics-host", "-peer"]


def test_an_unknown_option_is_a_config_error_naming_the_options():
    # A misspelt keyword was a TypeError from deep inside (a worker: a traceback at start).
    import kmq
    from kmq.errors import ConfigError

    with pytest.raises(ConfigError, match=r"@kmq.handler\('emails'\): no option 'visibilty_timeout_s'; "
                                          r"use one of .*visibility_timeout_s"):
        kmq.handler("emails", visibilty_timeout_s=30)
    kmq.handler("emails", visibility_timeout_s=30, batch_size=10)  # the consumer's own: fine


def test_client_consumer_refuses_an_unknown_option_before_any_broker_call():
    import kmq
    from kmq.errors import ConfigError
    from kmq.settings import Settings

    client = kmq.Client(settings=Settings(bootstrap_servers="127.0.0.1:1"))
    try:
        with pytest.raises(ConfigError, match=r"client.consumer\('orders'\): no option 'bogus'; use one of "
                                              r".*max_in_flight"):
            client.consumer("orders", bogus=1)
    finally:
        client.close(timeout_s=0)


def test_a_consumer_option_refused_at_start_names_its_handler():
    # With many handlers, "visibility_timeout_s=-5 must be ..." left the user searching.
    from kmq.worker.runner import HandlerRunner

    class Refusing:
        def consumer(self, queue, **options):
            raise ConfigError(f"visibility_timeout_s={options['visibility_timeout_s']} must be a number of seconds")

    @kmq.handler("q-orders", visibility_timeout_s=5)  # refused by the stand-in (a value is checked when decorated)
    def charge(msg):
        pass

    with pytest.raises(ConfigError, match=r"^handler .*charge of queue 'q-orders': visibility_timeout_s=5 must"):
        HandlerRunner(Refusing(), charge, ShutdownSignal(1.0))._open()
