"""A start-up read that fails is tried again until it works (app/startup.py)."""

from __future__ import annotations

import asyncio
import logging

from app.startup import until_done
from kmq.backoff import Backoff


def test_a_failing_step_is_tried_again_until_it_returns_and_each_failure_is_logged(caplog):
    calls = []

    def step() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise TimeoutError(f"broker slow ({len(calls)})")
        return "view"

    with caplog.at_level(logging.WARNING, logger="kmq.tracker.startup"):
        got = asyncio.run(until_done("the settings view", step, policy=Backoff.fixed(0.0)))
    assert got == "view" and len(calls) == 3
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == ["the settings view failed (attempt 1: broker slow (1)); trying again in 0.0 s",
                        "the settings view failed (attempt 2: broker slow (2)); trying again in 0.0 s"]
