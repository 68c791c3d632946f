"""app.drain_fast_path: Faust's per-record wait_first, without its tasks when the callback
finishes in one step, and the same as mode's otherwise (no Faust, no broker)."""

from __future__ import annotations

import asyncio

import pytest
from mode import Service

from app.drain_fast_path import Started, wait_first


class Consumer(Service):
    """A mode service, as Faust's consumer is one; counts mode's own wait_first calls."""

    def __init__(self) -> None:
        super().__init__()
        self.slow_calls = 0
        self.suspend_flow = asyncio.Event()

    async def original(self, *coros, timeout=None):
        self.slow_calls += 1
        return await Service.wait_first(self, *coros, timeout=timeout)


def run(coro):
    return asyncio.run(coro)


def test_a_callback_that_finishes_at_once_wins_without_mode_and_the_event_wait_never_runs():
    async def main():
        c = Consumer()
        handed = []

        async def callback(x):
            handed.append(x)
            return x * 2
        tasks_before = len(asyncio.all_tasks())
        result = await wait_first(Consumer.original, c, (callback(21), c.suspend_flow.wait()), None)
        assert len(asyncio.all_tasks()) == tasks_before
        return c, handed, result
    c, handed, result = run(main())
    assert handed == [21] and result.results == [42] and not result.stopped and c.slow_calls == 0


def test_a_callback_that_must_wait_goes_to_mode_started_and_finishes_there():
    async def main():
        c = Consumer()
        room = asyncio.Event()
        steps = []

        async def callback():
            steps.append("began")
            await room.wait()  # a full buffer
            steps.append("put")
            return "ok"
        asyncio.get_running_loop().call_later(0.05, room.set)
        result = await wait_first(Consumer.original, c, (callback(), c.suspend_flow.wait()), None)
        return c, steps, result
    c, steps, result = run(main())
    assert steps == ["began", "put"] and result.results == ["ok"] and c.slow_calls == 1


def test_a_suspension_while_the_callback_waits_cuts_it_short_as_mode_does():
    async def main():
        c = Consumer()
        cancelled = []

        async def callback():
            try:
                await asyncio.Event().wait()  # never room
            except asyncio.CancelledError:
                cancelled.append(True)
                raise
        asyncio.get_running_loop().call_later(0.05, c.suspend_flow.set)
        result = await wait_first(Consumer.original, c, (callback(), c.suspend_flow.wait()), None)
        await asyncio.sleep(0)  # the loser's cancellation is delivered
        return result, cancelled
    result, cancelled = run(main())
    assert result.results == [True] and cancelled == [True]  # the event won; the put was cancelled


def test_an_error_in_the_first_step_is_raised():
    async def main():
        c = Consumer()

        async def callback():
            raise KeyError("no stream")
        with pytest.raises(KeyError):
            await wait_first(Consumer.original, c, (callback(), c.suspend_flow.wait()), None)
    run(main())


@pytest.mark.parametrize("case", ["suspended", "stopped", "timeout", "three"])
def test_any_other_call_is_mode_s_own(case):
    async def main():
        c = Consumer()

        async def callback():
            return 1
        coros = (callback(), c.suspend_flow.wait())
        timeout = None
        if case == "suspended":
            c.suspend_flow.set()
        elif case == "stopped":
            c._stopped.set()
        elif case == "timeout":
            timeout = 5.0
        else:
            coros = (*coros, asyncio.sleep(10))
        await wait_first(Consumer.original, c, coros, timeout)
        return c.slow_calls
    assert run(main()) == 1


def test_started_goes_on_with_values_and_errors_sent_in():
    async def inner(fut1, fut2):
        a = await fut1
        try:
            await fut2
        except ValueError as exc:
            return a, str(exc)

    async def main():
        loop = asyncio.get_running_loop()
        fut1, fut2 = loop.create_future(), loop.create_future()
        coro = inner(fut1, fut2)
        pending = coro.send(None)
        assert pending is fut1
        task = asyncio.ensure_future(_await(Started(coro, pending)))
        loop.call_soon(fut1.set_result, "a")
        loop.call_later(0.01, fut2.set_exception, ValueError("b"))
        return await task
    assert run(main()) == ("a", "b")


async def _await(x):
    return await x


class Msg:
    def __init__(self, offset: int) -> None:
        self.topic, self.partition, self.offset = "t-changelog", 3, offset


def test_a_record_cut_short_is_noted_once_per_partition_and_one_handed_on_is_not():
    async def main():
        c = Consumer()
        c._kmq_cut = {}
        never = asyncio.Event()

        async def callback(message):
            if message.offset >= 11:
                await never.wait()  # a full buffer that never empties
            return message.offset
        assert (await wait_first(Consumer.original, c, (callback(Msg(10)), c.suspend_flow.wait()), None)).results == [10]
        assert c._kmq_cut == {}
        asyncio.get_running_loop().call_later(0.05, c.suspend_flow.set)
        await wait_first(Consumer.original, c, (callback(Msg(11)), c.suspend_flow.wait()), None)
        # The flow stays suspended: Faust's drain goes on past the next record too.
        await wait_first(Consumer.original, c, (callback(Msg(12)), c.suspend_flow.wait()), None)
        return c._kmq_cut
    assert run(main()) == {("t-changelog", 3): 11}


def test_a_consumer_that_keeps_no_count_is_left_as_it_is():
    async def main():
        c = Consumer()

        async def callback(message):
            await asyncio.Event().wait()
        c.suspend_flow.set()
        result = await wait_first(Consumer.original, c, (callback(Msg(5)), c.suspend_flow.wait()), None)
        return c, result
    c, result = run(main())
    assert not hasattr(c, "_kmq_cut") and result.results == [True]
