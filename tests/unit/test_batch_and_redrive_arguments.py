"""Arguments that were accepted silently or raised a bare TypeError (an audit, 2026-11-29):
each is now a ConfigError naming the argument and the fix, before anything is written."""

from __future__ import annotations

import asyncio

import pytest

import kmq
import kmq.aio
from kmq.errors import ConfigError
from kmq.ops import deadletters
from kmq.settings import Settings

NOWHERE = "127.0.0.1:9"  # nothing is sent: the arguments are refused first


@pytest.mark.parametrize("option", ["delay_s", "deliver_at", "group", "dedup_id"])
def test_send_batch_names_send_for_a_sends_own_arguments(option):
    client = kmq.Client(bootstrap_servers=NOWHERE)
    with pytest.raises(ConfigError, match=f"send_batch takes no {option}: .*use send\\(queue, value, {option}="):
        client.send_batch("q", [b"a"], **{option: 5})
    with pytest.raises(ConfigError, match="send_batch: no option 'colour'"):
        client.send_batch("q", [b"a"], colour="red")


def test_the_async_send_batch_refuses_them_too():
    async def send():
        await kmq.aio.Client(bootstrap_servers=NOWHERE).send_batch("q", [b"a"], delay_s=5)
    with pytest.raises(ConfigError, match="send_batch takes no delay_s"):
        asyncio.run(send())


def test_a_minimum_age_above_the_maximum_is_refused():
    with pytest.raises(ConfigError, match="min_age_s=10 is above max_age_s=5: .*give min_age_s <= max_age_s"):
        deadletters.list_dead_letters(Settings(bootstrap_servers=NOWHERE), "q", min_age_s=10, max_age_s=5)
    with pytest.raises(ConfigError, match="min_age_s=10 is above max_age_s=5"):
        deadletters.check_options("redrive", {"min_age_s": 10, "max_age_s": 5}, deadletters.redrive)


def test_a_redrive_progress_that_is_no_function_is_refused():
    with pytest.raises(ConfigError, match="progress='x' must be a function of \\(done, total\\)"):
        deadletters.redrive(Settings(bootstrap_servers=NOWHERE), "q", progress="x")
