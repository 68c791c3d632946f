"""``kmq.aio`` ``await client.send(...)`` names a bad argument before it looks up the queue's
placement on the broker: with nothing listening it said the broker's error instead (and
waited for it). Nothing listens on the address here, and nothing is sent."""

from __future__ import annotations

import asyncio
import time

import pytest

import kmq
import kmq.aio


@pytest.mark.parametrize("args, kwargs, named", [
    (("orders", "not bytes"), {}, "value"),
    (("bad queue!", b"x"), {}, "queue"),
    (("orders", b"x"), {"headers": {"kmq.id": "x"}}, "kmq.id"),
    (("orders", b"x"), {"group": ""}, "group"),
])
def test_a_bad_send_argument_is_named_before_the_broker_is_asked(args, kwargs, named):
    async def attempt():
        async with kmq.aio.Client("127.0.0.1:1") as client:
            started = time.monotonic()
            with pytest.raises(kmq.ConfigError, match=named):
                await client.send(*args, **kwargs)
            assert time.monotonic() - started < 20  # at once: no broker round trip
    asyncio.run(attempt())
