"""How far a shared queue's consumer reads ahead of user code; pure, time passed in.

A consumer asks the dispatcher for its free room, capped by its read-ahead (``prefetch``).
The read-ahead starts small, so the consumers that start first do not take a backlog
away from the ones that start a moment later, and grows each time user code emptied it
after receiving all it asked for: a consumer that waited for deliveries reads further.

It grows at most to what user code settles in :data:`HORIZON_S` at the rate its own
work allows (the time it waited in a receive left out). Without that bound a consumer doing 20 ms of work per message, whose read-ahead
ran out once while a credit was on its way, grew to hundreds of messages: eight such
consumers of a 2,000-message backlog ended with two holding 530 each while the others
idled (bench.shared scaling, N=8: 0.36-0.50 of N x one consumer's rate).
"""

from __future__ import annotations

PREFETCH_START = 10  # messages kept ready beyond user code's, to begin with
PREFETCH_GROWTH = 8  # ... multiplied by up to this each time user code emptied it
HORIZON_S = 0.5      # ... up to what user code settles in this long, at its recent rate


def grown(prefetch: int, received: int, busy_s: float, max_in_flight: int) -> int:
    """The read-ahead after user code found nothing ready, having received ``received``
    messages since the read-ahead last changed and spent ``busy_s`` of that time on its
    own work (not waiting in a receive: a rate measured with the waits in it is the
    read-ahead's own, and would keep a fast consumer's small)."""
    if received < prefetch:
        return prefetch  # it did not take all it asked for: the dispatcher is short, not us
    rate_per_s = received / max(busy_s, 1e-3)
    bound = max(PREFETCH_START, int(rate_per_s * HORIZON_S))
    return max(prefetch, min(max_in_flight, prefetch * PREFETCH_GROWTH, bound))
