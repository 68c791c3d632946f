"""``kmq.aio`` ``await client.send(...)`` names a bad argument before it looks up the queue's
placement on the broker: with nothing listening it said the broker's error instead (and
waited for it). Nothing listens on the address here, and nothing is sent."""

from __future__ import annotations

import asyncio
import time

import pytest

import kmq
import kmq.aio


@pytest.mark.parametrize("method", ["send", "send_and_wait"])
@pytest.mark.parametrize("args, kwargs, named", [
    (("orders", "not bytes"), {}, "value"),
    (("bad queue!", b"x"), {}, "queue"),
    (("orders", b"x"), {"headers": {"kmq.id": "x"}}, "kmq.id"),
    (("orders", b"x"), {"group": ""}, "group"),
    (("orders", b"x"), {"delay_s": -1}, "delay_s"),
    (("orders", b"x"), {"deliver_at": float("nan")}, "deliver_at"),
])
def test_a_bad_send_argument_is_named_before_the_broker_is_asked(method, args, kwargs, named):
    # send_and_wait said the broker's error after its 15 s timeout (an audit); each of these
    # takes microseconds, so 5 s tells the two apart on any machine.
    async def attempt():
        async with kmq.aio.Client("127.0.0.1:1") as client:
            started = time.monotonic()
            with pytest.raises(kmq.ConfigError, match=named):
                await getattr(client, method)(*args, **kwargs)
            assert time.monotonic() - started < 5  # at once: no broker round trip
    asyncio.run(attempt())


@pytest.mark.parametrize("args, named", [(("bad queue!", [b"x"]), "queue"), (("orders", [b"x"], {"kmq.id": "x"}), "kmq.id"),
                                         (("orders", b"xy"), "values")])
def test_a_bad_send_batch_argument_is_named_before_the_broker_is_asked(args, named):
    async def attempt():
        async with kmq.aio.Client("127.0.0.1:1") as client:
            started = time.monotonic()
            with pytest.raises(kmq.ConfigError, match=named):
                await client.send_batch(*args)
            assert time.monotonic() - started < 5
    asyncio.run(attempt())
