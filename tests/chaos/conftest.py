"""Fixtures of the chaos and robustness tests (the broker and settings come from tests/conftest.py)."""

from __future__ import annotations

import json
import urllib.request

import pytest

from kmq.dev.devstack import TrackerProcess


def _tracker_with_own_topics(make_settings, log_path):
    # Partition mode: these tests write consumers' STARTs themselves (raw records).
    t = TrackerProcess(make_settings(max_deliveries=5, dispatch="partition"), log_path)
    t.start(timeout_s=120)
    return t


@pytest.fixture(scope="module")
def own_tracker(make_settings, artifacts, request):
    """A tracker worker with its own topics, for tests that would disturb the shared one."""
    t = _tracker_with_own_topics(make_settings, artifacts / f"tracker-{request.module.__name__.split('.')[-1]}.log")
    yield t
    t.stop()


@pytest.fixture
def flooded_tracker(make_settings, artifacts, request):
    """A tracker with its own topics for one test that floods them: the embedded broker serves
    a partition of tens of thousands of small batches slowly (docs/shared-queues.md), so no other
    test should have to read past that flood."""
    t = _tracker_with_own_topics(make_settings, artifacts / f"tracker-{request.node.name[:60]}.log")
    yield t
    t.stop()


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def run_chaos_in_ci(settings, cfg, artifacts, name: str) -> dict:
    """One chaos run (bench/chaos.py) with its result kept as an artifact and printed."""
    from bench.chaos import run_chaos

    result = run_chaos(settings, cfg, artifacts / name, say=print)
    (artifacts / f"{name}.json").write_text(json.dumps(result, indent=1))
    # A failed run's markers diagnosis and trace in full (an assertion message is cut short).
    shown = ("chaos", "drain", "accounting", "tracker_warnings", "markers_diagnosis", "trace")
    print(json.dumps({k: result[k] for k in shown if k in result}, indent=1))
    return result
