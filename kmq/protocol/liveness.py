"""How long a shared queue consumer's word holds: how often it asks, how long it is handed work.

A consumer asks for work (a CREDIT) at least every :func:`heartbeat_s` and stays a member
of its queue until its lease (``LEASE_MS``) runs out: the queue's view counts it, its
credit stays. But its messages' visibility timeout can be shorter than the lease. A
consumer that dies keeps its last credit for the whole lease, and what it held lapses
within it: its copies went back to it, and came back a second timeout later, one more
delivery counted (an audit, 3 s visibility: half a dead worker's messages came back as
delivery 3 after 6.1 s; tests/integration/test_shared_queues.py: 10 of 20 at 2, 3 and 4 s).

So the dispatcher hands a consumer work only within :func:`handout_window_ms` of its
last CREDIT: half its visibility timeout, two heartbeats at least, the lease at most. A
dead consumer's messages lapse at the earliest a visibility timeout after its last
extension, which its keepalive sent at most a quarter of one before it died
(``kmq.consumer.live_settings``): three quarters of a timeout after its death, past the
window's half, with the CREDIT's trip to the dispatcher to spare. A live consumer that
is slow to ask waits for its next CREDIT; it is not dropped. Pure; times in ms.
"""

from __future__ import annotations

LEASE_MS = 5000             # a consumer silent this long is dropped from its queue's roster
# A CREDIT's lease counts for at most this: consumers ask every heartbeat (1 s at most) with
# LEASE_MS. Taken as written, 16,384 made-up consumers with 12 h leases in four records kept
# a markers partition's consumer slots, and new consumers out, for 12 h (an audit).
MAX_LEASE_MS = 60_000
HEARTBEAT_MAX_S = 1.0       # it asks at least this often ...
HEARTBEAT_MIN_S = 0.25      # ... and, under a short visibility timeout, at most this often


def heartbeat_s(timeout_ms: int) -> float:
    """How often a consumer with visibility timeout ``timeout_ms`` asks at least: a quarter
    of the timeout, between ``HEARTBEAT_MIN_S`` and ``HEARTBEAT_MAX_S``."""
    return min(HEARTBEAT_MAX_S, max(HEARTBEAT_MIN_S, timeout_ms / 4000))


def handout_window_ms(timeout_ms: int, lease_ms: int) -> int:
    """How long after reading a consumer's CREDIT its dispatcher still hands it work."""
    return min(lease_ms, max(int(2000 * heartbeat_s(timeout_ms)), timeout_ms // 2))
