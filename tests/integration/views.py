"""Reading a tracker's JSON views from tests."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from kmq.dev.devstack import TrackerProcess


def queue_detail(t: TrackerProcess, queue: str) -> dict | None:
    """``/kmq/api/queues/<queue>``, or None while the tracker does not know the queue (404)."""
    try:
        with urllib.request.urlopen(f"{t.url}/kmq/api/queues/{queue}", timeout=30) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def scheduled(t: TrackerProcess, queue: str) -> int | None:
    """How many delayed sends of ``queue`` the tracker's table holds; None while it does not
    know the queue or does not answer (a worker starting, stopping or killed)."""
    try:
        with urllib.request.urlopen(f"{t.url}/kmq/api/queues/{queue}", timeout=10) as r:
            return json.loads(r.read())["scheduled"]
    except (OSError, ValueError, KeyError):
        return None
