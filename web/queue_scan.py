"""Queue depth, sends and current dead letters, read from Kafka by a background thread.

The tracker sees consumers' markers, not sends, so what is *waiting* in a
queue comes from the queue topic itself. Many queues share a partition, so
``end offset - committed offset`` would count other queues' records too;
instead each pass of :class:`QueueScanner` reads, per queue-topic partition
that holds queues this worker owns, the records from the lowest queue
position to the partition's true end (end of fetch, not ListOffsets, see
docs/embedded-broker.md) and counts keys:

- **depth** of a queue: its records at or above its position, where the
  position is the highest START end the tracker saw on that partition
  (consumers fetched everything below), else the consumer group's committed
  offset, else the log start; never below the queue's purge point. Exact
  when the pass reached back to the position; a pass reads at most
  ``scan_limit`` records back from the end, so a deeper backlog is reported
  as a lower bound with ``exact=False``.
- **sent**: records of the queue counted at their timestamps (the first pass over a
  partition reads it from the log start, later passes what was appended since) (sends,
  delayed sends when due, redeliveries, redrives), counted once each.
- **dead letters** now on the dead-letter topic (not redriven, not purged),
  folded incrementally from the dead-letter partitions (``kmq.ops.dead_letter_log``
  events, :mod:`web.dead_letter_fold`): each pass reads only what was
  appended since the last one; the queue detail view's count and recent
  letters come from there too.

The read of the queue topic itself is :mod:`web.queue_topic_read`. A pass
costs a read of the backlog plus what was appended since the last pass, so
passes run only while somebody looks (a view or a metrics scrape in the last
:data:`IDLE_S` seconds), every ``refresh_s``. Unknown queues on a
partition (sent to, never consumed or configured) are found by their keys
when queue and markers topics have equal partition counts (the default).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from confluent_kafka import Consumer

from web.dead_letter_fold import DeadLetterFold
from web.queue_topic_read import plan_read, read_to_ends
from web.scan_groups import QueueGroups
from kmq.kafka import profiles
from kmq.kafka.batch_skips import REMEMBERED, BatchSkips
from kmq.protocol.placement import markers_partition, queue_partitions
from kmq.queue_config import QueueConfig
from kmq.stats.rates import RateWindow
from kmq.settings import Settings

log = logging.getLogger("kmq.tracker.queue_scan")

IDLE_S = 300.0          # passes stop this long after the last view or scrape


@dataclass(frozen=True)
class Depth:
    """Waiting records of one queue: ``exact`` False means at least ``records``."""

    records: int
    exact: bool


@dataclass
class ScanResult:
    depth: dict[str, Depth] = field(default_factory=dict)
    dead_letters: dict[str, int] = field(default_factory=dict)


class QueueScanner:
    """One background thread per worker; read :attr:`result` and :attr:`sent` from any thread."""

    def __init__(self, settings: Settings, *, owned: Callable[[], set[int]],
                 known_queues: Callable[[], set[str]],
                 started_upto: Callable[[str, int], int | None],
                 config: Callable[[str], QueueConfig],
                 refresh_s: float = 2.0, scan_limit: int = 200_000) -> None:
        self.settings = settings
        self._owned = owned
        self._known = known_queues
        self._started_upto = started_upto
        self._config = config
        self.refresh_s = refresh_s
        self.scan_limit = scan_limit
        self.result = ScanResult()
        # Batches of the queue topic nobody can read; each pass reads them again from below
        self.skips = BatchSkips("queue scan", remember=REMEMBERED)
        self.sent: Counter[str] = Counter()  # since this worker started counting
        self._sent_rates = RateWindow()
        self._lock = threading.Lock()  # sent and _sent_rates: written here, read by views
        self.passes = 0
        self._passes_at_wake = 0  # passes done when an idle scanner was last woken
        self.last_error = ""
        self._wanted_until = 0.0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._reader: Consumer | None = None
        self._queue_parts: int | None = None
        self._prev_end: dict[int, int] = {}
        self._sent_upto: dict[int, int] = {}  # partition -> records below were counted as sent
        self._discovered: set[str] = set()
        self._key_cache: dict[bytes, str | None] = {}
        self._cache_owned: set[int] = set()
        self._groups = QueueGroups(settings)  # partition-mode queues found by their consumer groups
        # read_committed: an aborted redrive never happened
        self.dead_letters = DeadLetterFold(settings, lambda: self._new_reader(
            "dlq-scan", **{"isolation.level": "read_committed", "auto.offset.reset": "earliest"}))

    # -- control ------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kmq-queue-scan", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def want(self) -> None:
        """Somebody looked: keep passes running for the next :data:`IDLE_S` seconds."""
        idle = time.monotonic() >= self._wanted_until
        self._wanted_until = time.monotonic() + IDLE_S
        if idle:
            self._passes_at_wake = self.passes  # what it has is from before the quiet spell
            self._wake.set()

    @property
    def fresh(self) -> bool:
        """A pass ended since the scanner was last woken: its figures are current."""
        return self.passes > self._passes_at_wake

    @property
    def active(self) -> bool:
        return time.monotonic() < self._wanted_until

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.active:
                try:
                    self._pass()
                    self.passes += 1
                    self.last_error = ""
                except Exception as exc:  # a broker blip: report it, try again next round
                    log.warning("queue scan failed: %s", exc)
                    self.last_error = str(exc)
            self._wake.wait(self.refresh_s if self.active else IDLE_S)
            self._wake.clear()

    def sent_window(self, window_s: float, now_s: float) -> Counter:
        """Records appended per queue in the last ``window_s`` (bucket-aligned, see RateWindow)."""
        with self._lock:
            return Counter({q: n for (q, _), n in self._sent_rates.window(window_s, now_s).items()})

    def sent_history(self, now_s: float, keep: Callable[[str], bool]) -> dict[int, Counter]:
        with self._lock:
            return self._sent_rates.history(now_s, keep=lambda k: keep(k[0]))

    # -- one pass -------------------------------------------------------------------

    def _pass(self) -> None:
        owned = self._owned()
        mparts = self.settings.markers_partitions
        qparts = self._get_queue_parts()
        mine = lambda q: markers_partition(q, mparts) in owned  # noqa: E731
        queues = {q for q in self._known() | self._discovered | self._groups.queues() if mine(q)}
        # (queue, partition) -> position; partitions to read
        positions: dict[tuple[str, int], int] = {}
        for q in queues:
            cfg = self._config(q)
            for p in queue_partitions(q, qparts, cfg.spread):
                positions[(q, p)] = max(self._position(q, p), cfg.purged_before.get(p, 0))
        parts = {p for _, p in positions}
        if qparts == mparts:
            parts |= owned  # queues nobody consumed yet are found by their keys
        depth, exact = self._scan_queue_topic(parts, positions, owned)
        self._discovered = {q for q in self._discovered | set(depth) if mine(q)}
        self.dead_letters.read_new()
        result = ScanResult()
        for q in queues | set(depth):
            if mine(q):
                result.depth[q] = Depth(depth.get(q, 0), exact.get(q, True))
        result.dead_letters = self.dead_letters.counts(mine)
        self.result = result

    def _position(self, queue: str, partition: int) -> int:
        upto = self._started_upto(queue, partition)
        committed = self._groups.committed(queue).get(partition, -1) if upto is None else -1
        return max(upto if upto is not None else -1, committed, 0)

    def _scan_queue_topic(self, parts: set[int], positions: dict[tuple[str, int], int],
                          owned: set[int]) -> tuple[Counter, dict[str, bool]]:
        topic = self.settings.queue_topic
        reader = self._get_reader()
        plan = plan_read(reader, topic, parts, positions, self._prev_end, self._sent_upto, self.scan_limit)
        if not parts:
            return Counter(), plan.exact
        if owned != self._cache_owned:
            self._key_cache.clear()  # a key's queue depends on what this worker owns
            self._cache_owned = set(owned)
        read = read_to_ends(reader, topic, plan, positions, owned=owned,
                            markers_partitions=self.settings.markers_partitions,
                            key_cache=self._key_cache, skips=self.skips, sent_upto=self._sent_upto)
        self._count_sent(read.sent, read.ends)
        for p, end in read.ends.items():
            self._prev_end[p] = end
        for p in list(self._prev_end):
            if p not in parts:
                del self._prev_end[p]  # not ours any more: counting restarts if it comes back
        return read.depth, plan.exact

    def _count_sent(self, sent: dict[tuple[int, int], tuple[str, float]], ends: dict[int, int]) -> None:
        """Count the records a read found at their own times, each (partition, offset) once."""
        oldest = time.time() - self._sent_rates.bucket_s * self._sent_rates.buckets
        with self._lock:
            # Each (partition, offset) once, also across passes that read it again.
            upto = dict(self._sent_upto)
            for (p, o), (q, at_s) in sent.items():
                if o < upto.get(p, -1):
                    continue
                self.sent[q] += 1
                if at_s >= oldest:
                    self._sent_rates.add((q, "sent"), 1, at_s)
            # Past the partition's end as first seen and past every record counted (records
            # appended during the pass are read after that first end-of-partition). Kept when
            # the partition goes (a few ints each): coming back, nothing is counted again.
            for (p, o) in sent:
                upto[p] = max(upto.get(p, -1), o + 1)
            for p, end in ends.items():
                upto[p] = max(upto.get(p, -1), end)
            self._sent_upto = upto

    # -- Kafka clients and lookups ---------------------------------------------------

    def _get_queue_parts(self) -> int:
        if self._queue_parts is None:
            md = self._get_reader().list_topics(self.settings.queue_topic, timeout=10)
            self._queue_parts = len(md.topics[self.settings.queue_topic].partitions)
        return self._queue_parts

    def _new_reader(self, suffix: str, **extra) -> Consumer:
        return Consumer({
            **profiles.reader_config(self.settings, f"{self.settings.app_id}-{suffix}", fetch_wait_ms=50, eof=True),
            **extra,
        })

    def _get_reader(self) -> Consumer:
        if self._reader is None:
            self._reader = self._new_reader("queue-scan", **{"auto.offset.reset": "earliest"})
        return self._reader

