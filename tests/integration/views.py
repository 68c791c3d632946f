"""Reading a tracker's JSON views from tests."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from kmq.dev.devstack import TrackerProcess
from tests.conftest import wait_for


def queue_detail(t: TrackerProcess, queue: str) -> dict | None:
    """``/kmq/api/queues/<queue>``, or None while the tracker does not know the queue (404)."""
    try:
        with urllib.request.urlopen(f"{t.url}/kmq/api/queues/{queue}", timeout=30) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def all_acked(tracker, queue: str, n: int) -> dict | None:
    """The queue's view once the tracker counted ``n`` acks and holds nothing in flight."""
    d = queue_detail(tracker, queue)
    return d if d and d["in_flight"] == 0 and d["since_start"].get("acked", 0) >= n else None


def scheduled(t: TrackerProcess, queue: str) -> int | None:
    """How many delayed sends of ``queue`` the tracker's table holds; None while it does not
    know the queue or does not answer (a worker starting, stopping or killed)."""
    try:
        with urllib.request.urlopen(f"{t.url}/kmq/api/queues/{queue}", timeout=10) as r:
            return json.loads(r.read())["scheduled"]
    except (OSError, ValueError, KeyError):
        return None


def tracker_sees(tracker, queue: str, **expected) -> None:
    """Wait until the tracker's settings view of ``queue`` has ``expected`` (settings reach
    the tracker through the queues topic a moment after configure_queue returns)."""
    def seen() -> bool:
        try:
            with urllib.request.urlopen(f"{tracker.url}/kmq/api/queues/{queue}", timeout=5) as r:
                cfg = json.loads(r.read())["config"]
        except (OSError, ValueError, KeyError):
            return False
        return all(cfg.get(k) == v for k, v in expected.items())
    wait_for(seen, 30, what=f"the tracker seeing {expected} for {queue}")


def set_aside(tracker, reason: str) -> int:
    """``/kmq/health``'s count of records set aside for ``reason``; 0 while the tracker does
    not answer (one working through a flood may answer late: that is no progress)."""
    try:
        with urllib.request.urlopen(f"{tracker.url}/kmq/health", timeout=10) as r:
            return json.loads(r.read())["set_aside"][reason]
    except (OSError, ValueError, KeyError):
        return 0


def dispatcher_stats(t: TrackerProcess) -> dict:
    """The tracker's dispatcher counters (``/kmq/stats``'s ``dispatcher``)."""
    with urllib.request.urlopen(f"{t.url}/kmq/stats", timeout=10) as r:
        return json.loads(r.read())["dispatcher"]
