"""A consumer of an ordered queue without a broker, for the group gate's tests.

A real :class:`~kmq.consumer.facade.Consumer` object with its receiving state (ready
ranges, settlement log, gate) but no source, writer or flusher: ranges are "delivered"
with :func:`deliver` (the consumer's own ``_hold``), nothing else ever arrives, and
verbs only set settlement states (what the gate reads). The one seam: no Kafka.
"""

from __future__ import annotations

import threading
from collections import deque

from kmq.consumer.facade import Consumer
from kmq.consumer.settlement import SettlementLog
from kmq.message import Verb
from kmq.protocol import markers as M
from kmq.queue_config import QueueConfig
from kmq.settings import Settings


class Rec:
    """A queue record as confluent-kafka gives it: headers with ``kmq.group`` or none, and
    the dispatcher's ``kmq.run`` when given."""

    def __init__(self, group: str | bytes | None, n: int, run: bytes | None = None) -> None:
        self.group, self.n = group, n
        raw = group.encode() if isinstance(group, str) else group  # any bytes may name a group
        self._headers = [("kmq.id", f"m{n}".encode())] + ([("kmq.group", raw)] if raw else []) \
            + ([("kmq.run", run)] if run is not None else [])

    def headers(self):
        return self._headers

    def value(self) -> bytes:
        return b"%d" % self.n

    def timestamp(self):
        return (0, 0)


def consumer(visibility_s: float = 30.0, dead_letter_head: str = "continue",
             ordering: str = "group") -> Consumer:
    c = Consumer.__new__(Consumer)
    c.queue = "q"
    c._queue_config = QueueConfig(ordering=ordering, dispatch="shared", dead_letter_head=dead_letter_head)
    c.visibility_timeout_s = visibility_s
    c.max_processing_s = max(visibility_s, 300.0)
    c.max_delay_s = c.max_extend_s = 3600.0
    c._ready, c._log, c._held, c._in_flight = deque(), SettlementLog(), {}, 0
    c._lock = threading.RLock()
    c._attention = c._closed = c._user_code_away = False
    c._user_code_at, c._receiving = 0.0, set()
    c._error = None
    c._stop = threading.Event()
    c.stats = {}
    c._follow_ordering()
    c._receive_into_buffer = lambda timeout_s: 0  # nothing more arrives
    c._fetch_waiting = lambda now: None
    return c


def deliver(c: Consumer, groups: list[str | bytes | None], run: bytes | None = None):
    """One delivery (one HeldRange) of records of these groups, in this order (of the
    dispatcher's run ``run``, when given)."""
    start = getattr(c, "_next_start", 0)
    c._next_start = start + len(groups) + 10
    ref = M.RangeRef("q", 0, start, start + len(groups))
    with c._lock:
        return c._hold(ref, [Rec(g, start + i, run) for i, g in enumerate(groups)], range(len(groups)))


def returned(c: Consumer) -> list[tuple[object, int]]:
    """(range, rel) of every message given back uncounted so far."""
    return [(m[1], m[2]) for m, verb, _ in c._log.verbs if verb is Verb.RETURN]


class Client:
    """What a handler runner asks of a client: a consumer (the broker-less one here)."""

    settings = Settings()

    def __init__(self, c) -> None:
        self.c = c
        c.close = lambda timeout_s=10.0: None

    def consumer(self, queue, **options):
        return self.c
