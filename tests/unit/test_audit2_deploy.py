"""docs/deployment.md, security.md and workers.md read as a user (a second audit): bad input
is a ConfigError or a usage error naming the field and the fix, never a traceback or a
setting silently kept; a handler's failure of any kind settles its message."""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest
from click.testing import CliRunner

from kmq.errors import ConfigError
from kmq.message import RELEASED
from kmq.settings import Settings
from kmq.worker.registry import Handler
from kmq.worker.runner import HandlerRunner
from kmq.worker.shutdown import ShutdownSignal
from tests.conftest import wait_for
from tests.gate_harness import Client, consumer, deliver


# -- security.md: `kmq acls`; deployment.md: a wildcard bind needs auth on -------------------

def test_acls_update_of_a_file_without_the_markers_is_a_usage_error(tmp_path):
    from kmq.cli import main

    doc = tmp_path / "notes.md"
    doc.write_text("# no checklist here\n")
    result = CliRunner().invoke(main, ["acls", "--update", str(doc)])
    assert result.exit_code == 2, result.output
    assert "--update" in result.output and "acl-checklist" in result.output
    assert isinstance(result.exception, SystemExit)  # a usage error, not a ValueError's traceback
    assert doc.read_text() == "# no checklist here\n"


@pytest.mark.parametrize("host", ["::0", "0:0:0:0:0:0:0:0", "[::]", "0", "0.0.0.00", "0x0", "000.0.0.0", "::%1",
                                  # IPv4-mapped: a dual-stack socket binds every IPv4 interface
                                  "::ffff:0.0.0.0", "[::ffff:0.0.0.0]", "::ffff:0:0", "0:0:0:0:0:ffff:0:0"])
def test_every_spelling_of_a_wildcard_web_bind_needs_auth_on(host):
    from app.settings import advertised_web_host, check_web_bind

    with pytest.raises(ConfigError, match="KMQ_WEB_HOST=.*KMQ_AUTH=off"):
        check_web_bind(Settings.from_env({}, web_host=host, auth="off"))
    on = Settings.from_env({}, web_host=host, auth="on", admin_token="x" * 32)
    check_web_bind(on)
    assert advertised_web_host(on) not in (host, host.strip("[]"))  # peers need a real name


# -- configuration bounds the deployment docs rely on ------------------------------------------

@pytest.mark.parametrize("overrides, named", [
    ({"queue_topic": "kmq.x", "markers_topic": "kmq.x"}, "KMQ_MARKERS_TOPIC.*KMQ_QUEUE_TOPIC|KMQ_QUEUE_TOPIC.*KMQ_MARKERS_TOPIC"),
    ({"dlq_topic": "kmq.queue"}, "KMQ_DLQ_TOPIC"),
    ({"queue_topic": "bad topic!"}, "KMQ_QUEUE_TOPIC"),
    ({"deliveries_topic": "a" * 250}, "KMQ_DELIVERIES_TOPIC"),
    ({"queues_topic": ".."}, "KMQ_QUEUES_TOPIC"),
    ({"app_id": "kmq tracker"}, "KMQ_APP_ID"),  # names the changelog topic
])
def test_topic_names_that_kafka_refuses_or_that_collide_are_refused(overrides, named):
    with pytest.raises(ConfigError, match=named):
        Settings.from_env({}, **overrides)


@pytest.mark.parametrize("env, named", [
    # accepted before, and the worker tracked the changelog as markers: it delivered nothing
    ({"KMQ_APP_ID": "aud-col", "KMQ_MARKERS_TOPIC": "aud-col-tracker-changelog"},
     "KMQ_MARKERS_TOPIC='aud-col-tracker-changelog' is the tracker table's changelog of "
     "KMQ_APP_ID='aud-col': give KMQ_MARKERS_TOPIC another name (or KMQ_APP_ID another value)"),
    ({"KMQ_QUEUE_TOPIC": "kmq-tracker-tracker-changelog"},
     "KMQ_QUEUE_TOPIC='kmq-tracker-tracker-changelog' is the tracker table's changelog of KMQ_APP_ID='kmq-tracker'"),
    ({"KMQ_APP_ID": "t", "KMQ_DELIVERIES_TOPIC": "t-__assignor-__leader"},
     "KMQ_DELIVERIES_TOPIC='t-__assignor-__leader' is Faust's leader topic of KMQ_APP_ID='t'"),
])
def test_a_topic_named_like_one_of_fausts_topics_of_the_app_id_is_refused(env, named):
    with pytest.raises(ConfigError) as caught:
        Settings.from_env(env)
    assert str(caught.value).startswith(named)


def test_topic_names_from_the_environment_are_checked_too():
    with pytest.raises(ConfigError, match="KMQ_DLQ_TOPIC"):
        Settings.from_env({"KMQ_DLQ_TOPIC": "kmq.markers"})


@pytest.mark.parametrize("variable, value", [
    ("KMQ_DELIVERY_TIMEOUT_MS", "3000000000"),    # librdkafka: message.timeout.ms <= 2^31-1
    ("KMQ_MAX_MESSAGE_BYTES", "2000000000"),      # librdkafka: message.max.bytes <= 1e9
    ("KMQ_SESSION_TIMEOUT_MS", "10000000"),       # librdkafka: session.timeout.ms <= 1 h
])
def test_values_librdkafka_would_refuse_at_the_first_send_are_refused_at_start(variable, value):
    with pytest.raises(ConfigError, match=variable):
        Settings.from_env({variable: value})


# -- workers.md --------------------------------------------------------------------------------

@pytest.mark.parametrize("queues", [",", " , ", ""])
def test_worker_queues_naming_no_queue_is_a_usage_error(queues):
    from kmq.cli import main

    # Checked before the broker: nothing listens on port 1.
    result = CliRunner().invoke(main, ["worker", "jobs", "--queues", queues,
                                       "--bootstrap-servers", "127.0.0.1:1", "--connect-timeout-s", "0.5"])
    assert result.exit_code == 2, result.output
    assert "--queues" in result.output


def _run_one(fn) -> int:
    """Run handler ``fn`` on one message of a broker-less consumer; its settlement state."""
    c = consumer(ordering="none")
    run = deliver(c, [None])
    shutdown = ShutdownSignal(30.0)
    runner = HandlerRunner(Client(c), Handler(fn=fn, queue="q"), shutdown)
    t = threading.Thread(target=runner.run)
    t.start()
    try:
        wait_for(lambda: run.state[run.rels[0]], 10, what="the message settled")
    finally:
        shutdown.signal(0.0)
        t.join(10)
    return run.state[run.rels[0]]


def test_a_sync_handler_that_raises_systemexit_has_its_message_released():
    # "raises anything else: released with the queue's backoff"; it stayed held until
    # max_processing_s (5 minutes) and then came back as a lapse
    def fn(msg):
        sys.exit(3)

    assert _run_one(fn) == RELEASED


def test_an_async_handler_whose_own_await_is_cancelled_has_its_message_released():
    # a CancelledError the handler's own code raised (not the runner's cancel at shutdown)
    async def fn(msg):
        inner = asyncio.get_running_loop().create_future()
        inner.cancel()
        await inner

    assert _run_one(fn) == RELEASED


def test_an_async_handler_that_cancels_its_own_task_has_its_message_released():
    # An audit: taken for the runner's cancel at shutdown, the message was neither settled
    # nor given back (held until close or max_processing_s), with no log line.
    async def fn(msg):
        asyncio.current_task().cancel()
        await asyncio.sleep(0)

    assert _run_one(fn) == RELEASED


def test_an_async_handler_that_raises_systemexit_has_its_message_released():
    async def fn(msg):
        raise SystemExit(3)

    assert _run_one(fn) == RELEASED


# -- security.md: "Settings print secrets as ***" -------------------------------------------------

@pytest.mark.parametrize("field, env", [("admin_token", "KMQ_ADMIN_TOKEN"), ("token", "KMQ_TOKEN"),
                                        ("sasl_password", "KMQ_SASL_PASSWORD"),
                                        ("ssl_key_password", "KMQ_SSL_KEY_PASSWORD")])
def test_a_secret_of_the_wrong_type_is_named_without_being_printed(field, env):
    with pytest.raises(ConfigError, match=env) as caught:
        Settings(**{field: b"kmq_s3cret-value-of-32-characters"})
    assert "s3cret" not in str(caught.value) and "***" in str(caught.value)


# -- workers.md, kmq.aio: `async with client.consumer(q) as c` -----------------------------------

def test_an_aio_consumer_with_a_misspelt_option_or_queue_is_refused_at_the_call():
    import kmq.aio

    client = kmq.aio.Client("127.0.0.1:1")  # nothing listens: the checks come first
    with pytest.raises(ConfigError, match="no option 'visiblity_timeout_s'"):
        client.consumer("orders", visiblity_timeout_s=3)
    with pytest.raises(ConfigError):
        client.consumer("bad queue!")


def test_a_handler_decorator_called_without_its_queue_is_a_config_error():
    # "so is ... a bare @kmq.handler (no queue)": @kmq.handler() was a TypeError
    import kmq

    with pytest.raises(ConfigError, match=r'@kmq.handler\("emails"\)'):
        kmq.handler()(lambda msg: None)


def test_worker_metrics_ports_beyond_65535_for_its_processes_are_a_usage_error_before_the_broker():
    from kmq.cli import main

    result = CliRunner().invoke(main, ["worker", "jobs", "--processes", "4", "--metrics-port", "65533",
                                       "--bootstrap-servers", "127.0.0.1:1", "--connect-timeout-s", "0.5"])
    assert result.exit_code == 2, result.output
    assert "--metrics-port 65533 with --processes 4" in result.output


def _run_one_collecting(fn) -> int:
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "coroutine ... was never awaited", before
        return _run_one(fn)


def test_a_handler_object_with_an_async_call_is_awaited_before_its_ack():
    # "return = ack": its coroutine was never run, and the message acked (lost)
    from kmq.message import ACKED
    ran = []

    class Thumbnails:
        async def __call__(self, msg):
            ran.append(msg.id)

    assert _run_one_collecting(Thumbnails()) == ACKED
    assert len(ran) == 1


def test_a_plain_function_that_returns_a_coroutine_is_not_acked():
    # an async def behind a decorator that is not async: the work never ran, yet it was acked
    import functools
    ran = []

    async def work(msg):
        ran.append(msg.id)

    @functools.wraps(work)
    def logged(msg):
        return work(msg)

    assert _run_one_collecting(logged) == RELEASED
    assert not ran


@pytest.mark.parametrize("module", ["./jobs.py", ".jobs", "", "jobs.py"])
def test_a_module_given_as_a_path_is_a_config_error_naming_the_module_to_give(module):
    # `kmq worker jobs` (./jobs.py): a path was a TypeError or ValueError traceback
    from kmq.worker.registry import handlers_in

    with pytest.raises(ConfigError, match="kmq worker jobs|module path"):
        handlers_in(module)
