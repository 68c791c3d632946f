"""Claims of README.md and docs/cli.md checked without a broker.

The README's dead-letter calls (``client.dead_letters("orders", reason="max-deliveries",
min_age_s=3600)``, ``client.redrive("orders", reason="rejected", rate_per_s=200)``) take
keywords: a misspelt one, or a reason that no dead letter can carry, is a ConfigError
naming what there is (as ``client.consumer`` and ``configure_queue`` do), raised before
anything is read, not a TypeError from an internal function or an empty list.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import kmq
from kmq.protocol import envelope

# No client: the checks come before the client touches its settings or the broker.
NO_CLIENT = SimpleNamespace()


def test_a_misspelt_dead_letters_filter_names_the_filters_there_are():
    with pytest.raises(kmq.ConfigError, match=r"client.dead_letters\('orders'\): no option 'reasn'; "
                                              r"use one of limit, max_age_s, min_age_s, reason"):
        kmq.Client.dead_letters(NO_CLIENT, "orders", reasn="rejected")


def test_a_redrive_option_named_like_the_cli_flag_names_rate_per_s():
    # `kmq dlq redrive --rate 200` is `client.redrive(q, rate_per_s=200)`.
    with pytest.raises(kmq.ConfigError, match=r"no option 'rate'; use one of .*rate_per_s"):
        kmq.Client.redrive(NO_CLIENT, "orders", rate=200)


@pytest.mark.parametrize("call", ["dead_letters", "redrive"])
def test_a_reason_no_dead_letter_carries_names_the_reasons(call):
    with pytest.raises(kmq.ConfigError, match=r"reason='max_deliveries'.*max-deliveries, rejected, "
                                              r"payload-expired, payload-too-large"):
        getattr(kmq.Client, call)(NO_CLIENT, "orders", reason="max_deliveries")


def test_the_cli_reason_help_lists_every_reason():
    from kmq.cli.dlq import dlq_list

    help_text = next(p.help for p in dlq_list.params if p.name == "reason")
    for reason in (envelope.REASON_MAX_DELIVERIES, envelope.REASON_REJECTED,
                   envelope.REASON_PAYLOAD_EXPIRED, envelope.REASON_TOO_LARGE):
        assert reason in help_text
