"""The tracker runs on pinned dependencies, and what app/consumer_tuning.py patches is still there.

constraints.txt pins kmq[tracker] and everything it pulls in; the image installs exactly
that and ./scripts/bootstrap installs with it as constraints. These tests fail loudly
when the installed versions leave the pins, a new dependency is not pinned, or the
private Faust/aiokafka attributes the tuning patches change.
"""

from __future__ import annotations

import inspect
import re
from importlib.metadata import PackageNotFoundError, distribution, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins() -> dict[str, str]:
    out = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, pinned = line.partition("==")
            assert pinned, f"constraints.txt: {line!r} is not name==version"
            out[norm(name)] = pinned
    return out


def tracker_closure() -> set[str]:
    """Every distribution kmq[tracker] needs here, transitively (installed metadata)."""
    seen: set[str] = set()

    def walk(name: str, extras: tuple[str, ...] = ()) -> None:
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            return  # a marker-excluded requirement (other platform or Python)
        key = norm(name)
        if key in seen and not extras:
            return
        seen.add(key)
        for raw in dist.requires or []:
            req = Requirement(raw)
            if req.marker and not any(req.marker.evaluate({"extra": e}) for e in (extras or ("",))):
                continue
            walk(req.name, tuple(req.extras))

    walk("kmq", ("tracker",))
    return seen - {"kmq"}


def test_every_dependency_of_the_tracker_is_pinned():
    missing = tracker_closure() - set(pins())
    assert not missing, f"pin these in constraints.txt: {sorted(missing)}"


@pytest.mark.parametrize("name", sorted(pins()))
def test_the_installed_version_is_the_pinned_one(name):
    assert version(name) == pins()[name], \
        f"{name} {version(name)} is installed, constraints.txt pins {pins()[name]}: ./scripts/bootstrap dev"


def test_the_pins_satisfy_pyproject():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for raw in project["dependencies"] + project["optional-dependencies"]["tracker"]:
        req = Requirement(raw)
        assert req.specifier.contains(pins()[norm(req.name)], prereleases=True), raw


def test_the_attributes_consumer_tuning_patches_exist_with_the_shapes_it_assumes():
    from aiokafka.consumer.consumer import AIOKafkaConsumer
    from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

    # Wrapped methods: names, arguments and sync/async as app/consumer_tuning.py calls them.
    create = AIOKafkaConsumerThread.__dict__.get("_create_worker_consumer")
    highwaters = AIOKafkaConsumerThread.__dict__.get("_highwaters")
    assert create is not None and list(inspect.signature(create).parameters) == ["self", "transport"]
    assert highwaters is not None and inspect.iscoroutinefunction(highwaters)
    assert list(inspect.signature(highwaters).parameters) == ["self", "partitions"]
    # Attributes set on the consumer before it starts: aiokafka must still store them
    # under these names and hand them to its fetcher when it starts.
    source = inspect.getsource(AIOKafkaConsumer)
    for attr, arg in (("_fetch_max_wait_ms", "fetch_max_wait_ms"), ("_isolation_level", "isolation_level")):
        assert f"self.{attr} = {arg}" in source, f"aiokafka no longer keeps {arg} in {attr}"
        assert f"{arg}=self.{attr}" in source, f"aiokafka no longer reads {attr} when it starts"


def test_the_fetch_app_fetch_wait_wraps_has_the_shape_it_assumes():
    from aiokafka.consumer.fetcher import Fetcher, FetchResult, PartitionRecords
    from aiokafka.consumer.subscription_state import TopicPartitionState

    # aiokafka's own (app.fetch_wait keeps it aside when it wraps it)
    proc = Fetcher.__dict__.get("_kmq_proc_fetch_request") or Fetcher.__dict__["_proc_fetch_request"]
    assert inspect.iscoroutinefunction(proc)
    assert list(inspect.signature(proc).parameters) == ["self", "assignment", "node_id", "request"]
    source = inspect.getsource(proc)
    # The request's partitions and offsets, the state it updates, and where records go.
    assert "for partition, offset, _ in partitions:" in source
    assert "tp_state.highwater = highwater" in source and "tp_state.lso = lso" in source
    assert "self._records[tp] = FetchResult(" in source and "partition_records=partition_records" in source
    assert "self._partition_records = partition_records" in inspect.getsource(FetchResult.__init__)
    assert "self._records = records" in inspect.getsource(PartitionRecords.__init__)
    # The wait is read per request, from the attribute app.fetch_wait raises.
    assert "self._fetch_max_wait_ms," in inspect.getsource(Fetcher._get_actions_per_node)
    init = inspect.getsource(TopicPartitionState.__init__)
    assert "self.highwater = None" in init and "self.lso = None" in init


def test_the_rocksdb_store_opens_each_table_partition_where_the_tuning_checks_its_age():
    from faust.stores.rocksdb import Store

    opener = Store.__dict__.get("_open_for_partition")
    assert opener is not None and list(inspect.signature(opener).parameters) == ["self", "partition"]
    assert "self._open_for_partition(partition)" in inspect.getsource(Store._db_for_partition)
    assert list(inspect.signature(Store.partition_path).parameters) == ["self", "partition"]


def test_the_batch_reader_app_consumer_tuning_wraps_has_the_shape_it_assumes():
    from aiokafka.consumer.fetcher import PartitionRecords

    # aiokafka's own (app.consumer_tuning keeps it aside when it wraps it)
    unpack = PartitionRecords.__dict__.get("_kmq_unpack_records") or PartitionRecords.__dict__.get("_unpack_records")
    assert unpack is not None and list(inspect.signature(unpack).parameters) == ["self"]
    source = inspect.getsource(unpack)
    # It reads batches from self._records, may resume after a skipped one, and tracks the position.
    assert "records = self._records" in source and "records.next_batch()" in source
    assert "self._tp" in source and "self.next_fetch_offset = next_batch.next_offset" in source
    assert "self._records_iterator = self._unpack_records()" in inspect.getsource(PartitionRecords.__init__)


def test_the_fetch_app_changelog_refetch_wraps_still_drops_what_it_says():
    from aiokafka.consumer.subscription_state import TopicPartitionState
    from faust.tables.manager import TableManager
    from faust.transport.consumer import Consumer
    from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

    # Faust's own (app.changelog_refetch keeps them aside when it wraps them)
    getmany = Consumer.__dict__.get("_kmq_getmany") or Consumer.__dict__["getmany"]
    wait = Consumer.__dict__.get("_kmq_wait_next_records") or Consumer.__dict__["_wait_next_records"]
    assert inspect.isasyncgenfunction(getmany) and list(inspect.signature(getmany).parameters) == ["self", "timeout"]
    assert inspect.iscoroutinefunction(wait) and list(inspect.signature(wait).parameters) == ["self", "timeout"]
    source = inspect.getsource(getmany)
    # The drops it mends: records fetched, then given up when the flow stopped or the
    # generation changed (a seek back to committed offsets, which changelogs have none of).
    assert "records, active_partitions = await self._wait_next_records(timeout)" in source
    assert "if not self.flow_active:" in source and "await self.perform_seek()" in source
    assert "return records, active_partitions" in inspect.getsource(wait)
    # What it uses to seek back on the consumer's thread.
    assert inspect.iscoroutinefunction(AIOKafkaConsumerThread.call_thread)
    assert "_ensure_consumer" in AIOKafkaConsumerThread.__dict__
    assert isinstance(TableManager.__dict__["changelog_topics"], property)
    assert {"has_valid_position", "position"} <= set(TopicPartitionState.__dict__)


def test_a_flow_resume_empties_the_changelog_queue_as_app_changelog_refetch_assumes():
    from faust.app.base import App
    from faust.tables.manager import TableManager
    from mode.utils.queues import FlowControlEvent

    # The changelog queue is one the flow control empties on resume (kept aside when wrapped).
    queue = TableManager.__dict__.get("_kmq_changelog_queue") or TableManager.__dict__["changelog_queue"]
    assert isinstance(queue, property) and "clear_on_resume=True" in inspect.getsource(queue.fget)
    # A resume empties its queues with the flow active; a rebalance suspends it first.
    assert "self._resume.set()\n        self.clear()" in inspect.getsource(FlowControlEvent.resume)
    assert "return not self._suspend.is_set()" in inspect.getsource(FlowControlEvent.is_active)
    revoked = inspect.getsource(App._on_partitions_revoked)
    assert revoked.index("self.flow_control.suspend") < revoked.index("self.flow_control.clear")


def test_the_heartbeat_aiokafka_sends_is_what_app_membership_notes():
    from aiokafka.consumer.group_coordinator import GroupCoordinator
    from aiokafka.protocol.group import HeartbeatRequest

    send = GroupCoordinator.__dict__.get("_send_req")
    assert send is not None and inspect.iscoroutinefunction(send)
    assert list(inspect.signature(send).parameters) == ["self", "request"]
    heartbeat = inspect.getsource(GroupCoordinator._do_heartbeat)
    assert "HeartbeatRequest(" in heartbeat and "self._send_req(request)" in heartbeat
    assert "resp.error_code" in heartbeat
    init = inspect.getsource(GroupCoordinator.__init__)
    for attr in ("self._session_timeout_ms = session_timeout_ms",
                 "self._rebalance_timeout_ms = rebalance_timeout_ms", "self.group_id = group_id"):
        assert attr in init, f"aiokafka's GroupCoordinator no longer sets {attr}"
    assert isinstance(HeartbeatRequest("g", 1, "m"), HeartbeatRequest)


def test_the_pinned_aiokafka_picks_each_requests_version_from_what_the_broker_offers():
    """Kafka 4.0 removed old protocol versions (KIP-896): a client sending fixed old versions
    (aiokafka before 0.13, and Faust's code for it) cannot talk to it (docs/deployment.md)."""
    from aiokafka.conn import AIOKafkaConnection
    from aiokafka.protocol.api import Request
    from faust.transport.drivers import aiokafka as driver

    assert "request.prepare(self._versions)" in inspect.getsource(AIOKafkaConnection.send)
    assert "reversed(self._CLASSES)" in inspect.getsource(Request.prepare), "the newest both know"
    assert driver._AIOKAFKA_HAS_API_VERSION is False, "Faust takes its negotiating path"


def test_the_drain_call_app_drain_fast_path_shortens_has_the_shape_it_assumes():
    from faust.transport.consumer import Consumer
    from mode.services import Service, WaitResults

    # Faust's drain hands each record on as (callback(message), an asyncio.Event's wait())
    assert "self.wait_first(\n                                callback(message), self.suspend_flow.wait()\n" \
        in inspect.getsource(Consumer._drain_messages)
    assert "self.suspend_flow = Event()" in inspect.getsource(Consumer.__init__)
    # mode's wait_first (kept aside when wrapped), its events and its result
    original = Consumer.__dict__.get("_kmq_wait_first") or Service.wait_first
    assert list(inspect.signature(original).parameters) == ["self", "coros", "timeout"]
    source = inspect.getsource(original)
    assert "stopped = self._stopped" in source and "crashed = self._crashed" in source
    assert list(WaitResults._fields) == ["done", "results", "stopped"]


def test_fausts_spinner_writes_cursor_codes_only_to_a_terminal_once_quieted():
    # KMQ_LOG_FORMAT=json: stdout began with "\x1b[?25l\b\x1b[?25h" and the first line did not parse.
    import io

    from faust.utils.terminal.spinners import Spinner

    from app.logs import quiet_spinner

    quiet_spinner()
    out = io.StringIO()
    spinner = Spinner(file=out)
    spinner.begin()
    spinner.update()
    spinner.finish()
    Spinner._finish(out, at_exit=True)
    assert out.getvalue() == ""
