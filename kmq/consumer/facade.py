"""Receive messages of one logical queue with per-message settlement (the consumer side of KMQ).

The flow (numbers match the README):

2. Messages arrive from the queue's *source*: for a ``dispatch="shared"`` queue the
   tracker's dispatcher hands them to any number of consumers as they ask
   (:mod:`kmq.consumer.shared_source`); for a ``dispatch="partition"`` queue the
   consumers form a Kafka group and fetch its partitions, writing one START per fetched
   range (:mod:`kmq.consumer.partition_source`). The queue's mode is a queue setting,
   followed live: the consumer switches source when it changes
   (:mod:`kmq.consumer.live_settings`).
3. ``ack()``/``release()``/``reject()``/``extend()`` are recorded in memory
   (:mod:`kmq.consumer.settlement`) and sent by a background flusher
   (:mod:`kmq.consumer.flusher`) within
   ``flush_interval_s`` (100 ms) of the first one as one marker per range (aggregated
   bit masks); at once when a shared consumer ran out of work (its settlements free the
   room it asks for). Fewer, fuller marker records: every record is an event for the
   tracker. The flusher also
   keeps prefetched and in-process messages invisible (EXTEND) up to
   ``max_processing_s`` after they reach user code (:mod:`kmq.consumer.keepalive`), so a
   slow worker is not mistaken for a dead one, and a dead one is noticed within
   ``visibility_timeout_s``.

At most ``max_in_flight`` messages are held (prefetched or unsettled) at once.

``transactional=True`` (or ``KMQ_TRANSACTIONAL_STARTS=on``) writes STARTs and
commits offsets in one transaction (partition mode); ``transactional_id`` names this
consumer instance stably across restarts, so a restarted instance ends its dead
predecessor's open transaction at once (see kmq.consumer.marker_writer).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

from kmq.consumer.closing import Closing
from kmq.consumer.flusher import Flusher
from kmq.consumer.gated_receive import GatedReceive
from kmq.consumer.held import HeldRange, MessageBatch
from kmq.consumer.live_settings import LiveSettings
from kmq.consumer.marker_writer import MarkerWriter
from kmq.consumer.arguments import PLAIN_SECONDS, check_arguments, check_batch_count, receive_timeout_s
from kmq.consumer.options import check_client_config, refused_client_config
from kmq.consumer.partition_source import PartitionSource
from kmq.consumer.reading_more import ReadingMore
from kmq.consumer.settlement import SettlementLog
from kmq.consumer.shared_source import SharedSource
from kmq.consumer.stale import StaleReadAhead
from kmq.errors import ConfigError, ConsumerClosedError
from kmq.message import Message
from kmq.protocol import markers as M
from kmq.protocol.lane_layout import LaneLayout
from kmq.protocol.placement import markers_partition, validate_queue_name
from kmq.queue_config import QueueConfig
from kmq.ops.queues_topic import QueueConfigs
from kmq.settings import Settings

log = logging.getLogger("kmq.consumer")


class Consumer(LiveSettings, Flusher, GatedReceive, StaleReadAhead, ReadingMore, Closing):
    """Receives messages of one queue; see the module docstring for the flow.

    Following the queue's settings is :class:`LiveSettings`'s part, the background
    flusher :class:`Flusher`'s, an ordered queue's group gate :class:`GatedReceive`'s,
    waiting for more :class:`ReadingMore`'s, ``flush()`` and ``close()`` :class:`Closing`'s.
    Hand-outs take the lock: the flusher gives the read-ahead back when user code is away.
    """

    def __init__(
        self,
        settings: Settings,
        queue: str,
        *,
        queue_topic_partitions: int,
        markers_topic_partitions: int,
        lane_layout: LaneLayout | None = None,
        visibility_timeout_s: float | None = None,
        max_in_flight: int = 1000,
        batch_size: int = 1000,
        max_processing_s: float | None = None,
        flush_interval_s: float = 0.1,
        configs: QueueConfigs | None = None,
        transactional: bool | None = None,
        transactional_id: str | None = None,
        prefetch: int | None = None,
        config: dict[str, Any] | None = None,
    ) -> None:
        self.queue = validate_queue_name(queue)
        check_arguments(visibility_timeout_s, max_processing_s, max_in_flight, batch_size, prefetch,
                        flush_interval_s)
        # Explicit arguments win; otherwise the queue's configuration, followed live.
        self._explicit_vis = visibility_timeout_s
        self._explicit_processing = max_processing_s
        self._configs = configs
        self._queue_config = configs.get(self.queue) if configs else QueueConfig()
        self._settings = settings
        self._apply_config(self._queue_config)
        self.max_in_flight = max_in_flight
        self.batch_size = batch_size
        self._prefetch = prefetch
        self.max_delay_s = settings.max_delay_s
        self.flush_interval_s = float(flush_interval_s)

        self._qkey = self.queue.encode()
        self._queue_topic_partitions = queue_topic_partitions
        self._lane_layout = lane_layout
        self._markers_partition = markers_partition(self.queue, markers_topic_partitions)
        check_client_config(config)
        self._client_config = config

        self._ready: deque[HeldRange] = deque()        # ranges with messages not yet handed out
        self._log = SettlementLog()                    # verbs recorded by any thread
        self._held: dict[M.RangeRef, HeldRange] = {}
        self._in_flight = 0
        self._lock = threading.RLock()
        self._closed = False
        self._error: BaseException | None = None
        self._attention = False  # work only the receiving thread may do (commits, purge, mode)
        # User code's last receive that waited, or verb (kmq.consumer.user_code; a receive that
        # hands something out says so in its range's hand-outs: nothing more on the hot path).
        self._user_code_at = time.monotonic()
        self._user_code_away = False
        self._away_since = 0.0  # monotonic time user code was last found away
        self._receiving: set[int] = set()  # threads waiting in a receive: user code is there
        self.stats = {"received": 0, "acked": 0, "released": 0, "rejected": 0, "markers": 0}

        if transactional is not None and not isinstance(transactional, bool):  # "off" was truthy
            raise ConfigError(f"transactional={transactional!r} must be True or False (or None: "
                              "KMQ_TRANSACTIONAL_STARTS decides)")
        transactional = settings.transactional_starts == "on" if transactional is None else transactional
        if transactional_id is not None and (not transactional or not isinstance(transactional_id, str)
                                             or not transactional_id.strip()):
            raise ConfigError(f"transactional_id={transactional_id!r} needs transactional=True "
                              "(or KMQ_TRANSACTIONAL_STARTS=on) and a non-empty string")
        self._writer = MarkerWriter(
            settings, self.queue, self._markers_partition, transactional,
            on_error=self._set_error, transactional_id=transactional_id)
        try:
            self._source: PartitionSource | SharedSource = self._new_source(self.mode_wanted())
        except Exception as exc:
            self._writer.close()  # nothing else was started yet
            refused = refused_client_config(config, exc)
            if refused is exc:
                raise
            raise refused from exc
        self._stop = threading.Event()
        self._flusher = threading.Thread(target=self._flush_loop, name=f"kmq-flush-{queue}",
                                         daemon=True)
        self._flusher.start()

    # -- receiving ---------------------------------------------------------------

    def receive(self, timeout_s: float | None = 1.0) -> Message | None:
        """The next message of this queue, or None after ``timeout_s`` (None: wait forever;
        0 or less: one look without waiting). A ``timeout_s`` that is no number of seconds
        (NaN, a string) is a ConfigError.

        Of a queue with ``ordering="group"``: never one whose group has an earlier message
        handed out and not settled (docs/ordering.md).
        """
        if timeout_s is not None and (timeout_s.__class__ not in PLAIN_SECONDS or timeout_s != timeout_s):
            timeout_s = receive_timeout_s(timeout_s)  # the rare case: say what is wrong, or take it
        started = time.monotonic()
        if self._user_code_away:
            self._back()
        if self._gate is not None:
            return self._receive_gated(1, timeout_s, None)
        ready = self._ready
        self._drop_stale_front()
        if not ready and not self._read_fresh(timeout_s):
            return None
        if self._attention:
            self._on_receiving_thread()
            if not ready and not self._receive_into_buffer(timeout_s):
                return None
        if self._gate is not None:  # what was read came in runs (SharedSource._hold)
            return self._receive_gated(1, timeout_s, None)
        with self._lock:  # the flusher gives the read-ahead back when user code is away
            self._check_open()
            if ready:
                held = ready[0]
                (m,) = held.hand_out(1)
                if held.handed == len(held.recs):
                    ready.popleft()
                return m
        # Given back since it was ready: wait for more within what is left.
        return self.receive(self._left_s(started, timeout_s))

    def receive_batch(self, max_messages: int = 500,
                      timeout_s: float | None = 1.0) -> "MessageBatch":
        """Up to ``max_messages`` messages; returns as soon as at least one is available.

        The result is a list of messages whose ``ack()`` settles all of them
        at once (much cheaper than one ``ack()`` per message). Of a queue with
        ``ordering="group"`` it holds at most one message of a group, and none of a group
        with a message handed out and not settled yet (docs/ordering.md).
        """
        check_batch_count(max_messages)
        if timeout_s is not None and (timeout_s.__class__ not in PLAIN_SECONDS or timeout_s != timeout_s):
            timeout_s = receive_timeout_s(timeout_s)
        started = time.monotonic()
        if self._user_code_away:
            self._back()
        ready = self._ready
        batch = MessageBatch()
        if self._gate is not None:
            self._receive_gated(max_messages, timeout_s, batch)
            return batch
        self._drop_stale_front()
        if not ready and not self._read_fresh(timeout_s):
            return batch
        if self._attention:
            self._on_receiving_thread()
            if not ready and not self._receive_into_buffer(timeout_s):
                return batch
        if self._gate is not None:  # what was read came in runs (SharedSource._hold)
            self._receive_gated(max_messages, timeout_s, batch)
            return batch
        with self._lock:  # the flusher gives the read-ahead back when user code is away
            self._check_open()
            while ready and len(batch) < max_messages and self._gate is None:
                held = ready[0]
                i = held.handed
                batch += held.hand_out(max_messages - len(batch))
                batch._runs.append((held, i, held.handed))
                if held.handed == len(held.recs):
                    ready.popleft()
                    self._drop_stale_front()
        if not batch:  # given back since it was ready: wait for more within what is left
            return self.receive_batch(max_messages, self._left_s(started, timeout_s))
        return batch

    def __iter__(self):
        """Yield messages until close() (from any thread: the loop then ends)."""
        while not self._closed:
            try:
                m = self.receive(1.0)
            except ConsumerClosedError:
                if self._closed:
                    return
                raise
            if m is not None:
                yield m

    @staticmethod
    def _left_s(started: float, timeout_s: float | None) -> float | None:
        """What is left of a receive's ``timeout_s`` begun at ``started`` (0: one more look)."""
        return None if timeout_s is None else max(0.0, timeout_s - (time.monotonic() - started))

    def _hold(self, ref: M.RangeRef, recs: list, rels: range | list[int],
              sent_at: float | None = None) -> HeldRange:
        """Hold fetched or delivered records of one range (lock held): ready to hand out.
        ``sent_at``: a delivery's dispatch, as far as the consumer can tell (else now)."""
        held = HeldRange(ref, self, self._log, sent_at)
        held.recs = recs
        held.rels = rels
        held.outstanding = len(recs)
        self._held[ref] = held
        self._in_flight += len(recs)
        self._ready.append(held)
        return held

    @property
    def assignment(self) -> frozenset[int]:
        """Queue-topic partitions this consumer fetches now (partition mode: its group share
        holding the queue; shared mode: none, the dispatcher reads them)."""
        return self._source.assignment

    @property
    def group_share(self) -> frozenset[int]:
        """Every queue-topic partition the group gave this member now, the queue's and
        others' alike (partition mode); :attr:`assignment` is the part it fetches."""
        return self._source.group_share

    @property
    def in_flight(self) -> int:
        """Messages held: prefetched or handed out and not yet settled (as last counted)."""
        return self._in_flight
