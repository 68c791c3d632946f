"""How long this worker is certainly still a member of its consumer group (a lease).

A shared queue's dispatcher may write to a markers partition only while its worker
owns it: an ACQUIRE that lands after a successor's BEGIN is fenced (not in flight),
and a delivery written for it hands out records the successor hands out again.
A worker that takes part in a rebalance stops its dispatcher in the revocation
callback (agents/runtime.py). This lease covers the worker that is removed
without taking part (cut off from the group coordinator, or too slow to rejoin):

- the coordinator removes a member no earlier than ``min(session, rebalance timeout)``
  after the member's last heartbeat that it answered with no error (a heartbeat is
  answered "rebalance in progress" once a rebalance began, and a rebalance gives
  each member the rebalance timeout to rejoin);
- so a member whose heartbeat sent at ``t`` was answered with no error is still one
  until ``t + min(session, rebalance)``; a successor begins only after that.

The lease ends at ``LEASE_SHARE`` of that bound after the last such heartbeat. A write
the broker acknowledged before the lease ended landed before any successor's BEGIN:
the dispatcher writes a delivery only for such ACQUIREs, and begins (BEGIN) and
acquires only inside the lease. Heartbeats come six per session (kmq.kafka.profiles),
so a healthy member's lease never runs out. Time is ``time.monotonic()`` seconds.
"""

from __future__ import annotations

import threading

LEASE_SHARE = 0.5  # of min(session, rebalance timeout), after the last heartbeat answered OK


class Membership:
    """The lease of one consumer group's member, fed by its heartbeats (any thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._valid_until_s = 0.0

    def heartbeat_ok(self, sent_at_s: float, session_ms: int, rebalance_ms: int) -> None:
        """A heartbeat sent at ``sent_at_s`` was answered with no error."""
        until = sent_at_s + LEASE_SHARE * min(session_ms, rebalance_ms) / 1000.0
        with self._lock:
            if until > self._valid_until_s:
                self._valid_until_s = until

    def valid_until(self) -> float:
        """Monotonic seconds until which this worker is certainly still a member (0: never was)."""
        return self._valid_until_s


_groups: dict[str, Membership] = {}
_groups_lock = threading.Lock()


def of_group(group_id: str) -> Membership:
    """The lease of this process's member of ``group_id`` (created on first use)."""
    with _groups_lock:
        m = _groups.get(group_id)
        if m is None:
            m = _groups[group_id] = Membership()
        return m

