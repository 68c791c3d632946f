"""The tracker runtime's lifecycle keeps the dispatcher handover rules (docs/shared-queues.md).

Revocation suspends the dispatcher and waits for its quiesce off the event loop before
returning; assignment resumes it and makes owned partitions re-read their table; the
service starts the dispatcher thread only after the redeliverer's warm-up, and its stop
(at ``on_before_shutdown``, before the consumer leaves the group) quiesces, then stops
the dispatcher, once. The dispatcher and redeliverer are fakes: the seam is their calls.
"""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

from agents.partitions import OwnedPartitions
from agents.runtime import TrackerRuntime, runtime


class FakeDispatcher:
    """Records each call and whether it ran on the event loop's thread."""

    def __init__(self, calls: list) -> None:
        self.calls = calls
        self.loop_thread = threading.get_ident()
        self.started = asyncio.Event()  # made inside the test's event loop

    def _note(self, what: str) -> None:
        self.calls.append((what, threading.get_ident() == self.loop_thread))

    def suspend(self) -> None:
        self._note("suspend")

    def quiesce(self) -> bool:
        self._note("quiesce")
        return True

    def resume(self) -> None:
        self._note("resume")

    def start(self) -> None:
        self._note("start")
        self.started.set()

    def stop(self) -> None:
        self._note("stop")


class FakeRedeliverer:
    def __init__(self, calls: list) -> None:
        self.calls = calls

    async def warm_up(self) -> None:
        self.calls.append(("warm_up", True))


def _runtime(calls: list) -> TrackerRuntime:
    return TrackerRuntime(OwnedPartitions(4), FakeRedeliverer(calls), FakeDispatcher(calls))


def test_revocation_suspends_then_waits_for_quiesce_off_the_event_loop():
    calls: list = []

    async def main():
        await _runtime(calls).on_partitions_revoked(None, set())

    asyncio.run(main())
    assert calls == [("suspend", True), ("quiesce", False)]


def test_assignment_resumes_and_owned_partitions_read_their_table_again():
    calls: list = []

    async def main():
        rt = _runtime(calls)
        rt.owned[1] = SimpleNamespace(gauges_built=True, applied_offset=41)
        await rt.on_partitions_assigned(None, set())
        return rt.owned[1]

    part = asyncio.run(main())
    assert calls == [("resume", True)]
    assert (part.gauges_built, part.applied_offset) == (False, None)


def test_start_warms_up_before_the_dispatcher_thread_starts():
    calls: list = []

    async def main():
        rt = _runtime(calls)
        await rt.start()
        await asyncio.wait_for(rt.dispatcher.started.wait(), timeout=10)  # warm-up runs in the background
        await rt.stop()

    asyncio.run(main())
    assert calls[:2] == [("warm_up", True), ("start", True)]


def test_shutdown_quiesces_then_stops_the_dispatcher_once():
    calls: list = []

    async def main():
        rt = _runtime(calls)
        await rt.start()
        await asyncio.wait_for(rt.dispatcher.started.wait(), timeout=10)
        calls.clear()
        await rt.on_before_shutdown(None)
        await rt.stop()  # the app stops its services after the signal: nothing more happens

    asyncio.run(main())
    assert calls == [("quiesce", False), ("stop", True)]


def test_the_worker_has_one_runtime_registered_on_the_app():
    from app import app

    assert runtime() is runtime()
    assert [s for s in app._extra_services if isinstance(s, TrackerRuntime)] == [runtime()]
