"""Faust hands each fetched record on without four asyncio tasks when it can, and says
which records it cut short.

Faust's consumer hands every record on with ``wait_first(callback(message),
suspend_flow.wait())``: mode's ``wait_first`` wraps both, and the consumer's stopped and
crashed events, in a task each, waits on all four and cancels three. The callback almost
always finishes at once (it puts the event in the stream's buffer, which has room), so
those tasks were most of what a marker record cost the tracker beyond its own work: 270-330
us of CPU a record, 3,200-3,900 records a second (bench.garbage_flood; docs/reliability.md,
"A flood on the markers topic").

Here the callback is run one step first. If that finishes it, the result is what
``wait_first`` would have returned (the callback the winner, none of the events set). If it
has to wait (a full buffer, the flow paused), the started callback goes on in mode's
``wait_first`` as it is (:class:`Started`), so a rebalance's ``suspend_flow`` still cuts it
short as before.

A record whose callback was cut short never reached its stream or table, yet Faust goes on
past it. Its offset is noted on the consumer (``_kmq_cut``, first per partition) for
``app.changelog_refetch``, which fetches a changelog's such records again: before, a
changelog record was counted handed on once the fetch yielded it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import Any

from mode.services import WaitResults

_EVENT_WAIT = asyncio.Event.wait.__code__


class Started:
    """An awaitable that goes on with ``coro``, which already yielded ``pending`` (what it
    waits for) to the task that began it: a task awaiting this waits for the same."""

    def __init__(self, coro: Coroutine, pending: Any) -> None:
        self.coro = coro
        self.pending = pending

    def __await__(self) -> Generator[Any, Any, Any]:
        pending = self.pending
        while True:
            try:
                sent = yield pending
            except BaseException as exc:  # a cancellation (or anything thrown in) goes on inside
                try:
                    pending = self.coro.throw(exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    pending = self.coro.send(sent)
                except StopIteration as done:
                    return done.value


async def go_on(coro: Coroutine, pending: Any) -> Any:
    return await Started(coro, pending)


def is_drain_call(coros: tuple, timeout: Any) -> bool:
    """Whether a ``wait_first`` call is the drain's: a coroutine, then an Event's ``wait()``."""
    return (len(coros) == 2 and timeout is None and asyncio.iscoroutine(coros[0])
            and getattr(coros[1], "cr_code", None) is _EVENT_WAIT)


async def wait_first(original: Any, service: Any, coros: tuple, timeout: Any) -> Any:
    """``original(service, *coros, timeout=timeout)``, without its tasks for Faust's drain
    call when the callback finishes in one step; a drain call's record cut short is noted."""
    if not is_drain_call(coros, timeout):
        return await original(service, *coros, timeout=timeout)
    first, event_wait = coros
    if (not event_wait.cr_frame.f_locals["self"].is_set()
            and not service._stopped.is_set() and not service._crashed.is_set()):
        try:
            pending = first.send(None)
        except StopIteration as done:
            event_wait.close()  # never started: nothing to undo
            return WaitResults([first], [done.value], False)
        except BaseException:
            event_wait.close()
            raise
        message = _message_of(first)  # waiting: its frame still holds it
        first = go_on(first, pending)
    else:
        message = _message_of(first)
    result = await original(service, first, event_wait, timeout=timeout)
    if first not in result.done:
        note_cut(service, message)
    return result


def _message_of(callback: Coroutine) -> Any:
    """The record a drain callback hands on, read off its frame only on the slow path (a
    frame's ``f_locals`` builds a dict: not per record)."""
    return callback.cr_frame.f_locals.get("message") if callback.cr_frame is not None else None


def note_cut(consumer: Any, message: Any) -> None:
    """Note ``message`` (a Faust Message) as never handed on, if the consumer keeps count
    (``app.changelog_refetch`` starts it for each fetch); the first per partition counts."""
    cut = getattr(consumer, "_kmq_cut", None)
    if cut is not None and message is not None:
        cut.setdefault((message.topic, message.partition), message.offset)


def install() -> None:
    """Give Faust's ``Consumer`` this ``wait_first`` (once per process)."""
    from faust.transport.consumer import Consumer

    if getattr(Consumer, "_kmq_drain_fast_path", False):
        return
    original = Consumer._kmq_wait_first = Consumer.wait_first  # mode's (tests/unit/test_dependencies.py)

    async def fast(self: Any, *coros: Any, timeout: Any = None) -> Any:
        return await wait_first(original, self, coros, timeout)

    Consumer.wait_first = fast
    Consumer._kmq_drain_fast_path = True
