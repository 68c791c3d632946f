"""Every queue's current dead letters, folded incrementally from the dead-letter topic.

The scanner's thread calls :meth:`DeadLetterFold.read_new` once per pass: it
reads each dead-letter partition from where the last pass stopped to its true
end and folds the records with :class:`~kmq.ops.dead_letter_log.LetterLog` (the one
fold of letters, redrives and purges). Views ask :meth:`DeadLetterFold.of`
from the event loop: a count and the newest letters' summaries, with no read
of Kafka. The queue detail view used to read the whole partition per request
(the dashboard polls it every 2 s).

Memory: one dict entry per current dead letter (its offset), plus summaries
(payload preview only) of each queue's newest :data:`RECENT_KEPT`.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from confluent_kafka import Consumer, KafkaError, TopicPartition

from kmq.ops.dead_letter_log import LetterLog, letter_of
from kmq.protocol.placement import QUEUE_NAME_RE
from kmq.settings import Settings

RECENT_KEPT = 100  # summaries per queue: the view shows 20, a filtered redrive may take newer ones
PASS_TIMEOUT_S = 60.0


class DeadLetterFold:
    """Folded by one thread (:meth:`read_new`), read by any (:meth:`of`, :meth:`counts`)."""

    def __init__(self, settings: Settings, new_reader: Callable[[], Consumer]) -> None:
        self.settings = settings
        self._new_reader = new_reader
        self._reader: Consumer | None = None
        self._next: dict[int, int] = {}  # partition -> next offset to read
        self._letters: dict[str, LetterLog] = {}
        self._recent: dict[str, dict[int, dict]] = {}  # queue -> offset -> summary, newest kept
        self._lock = threading.Lock()
        self.passes = 0
        self.records_read = 0  # every record read (each once: passes start where the last ended)
        self.records_of_no_queue = 0  # keys that are no queue id: the tracker's set-aside markers, others'

    def read_new(self) -> None:
        """Fold what was appended to every dead-letter partition since the last call."""
        topic = self.settings.dlq_topic
        if self._reader is None:
            self._reader = self._new_reader()
        reader = self._reader
        parts = range(self.settings.dlq_partitions)
        reader.assign([TopicPartition(topic, p, self._next.get(p, 0)) for p in parts])
        open_parts = set(parts)
        deadline = time.monotonic() + PASS_TIMEOUT_S
        try:
            while open_parts:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"could not read {topic} to its end within {PASS_TIMEOUT_S:g}s")
                for m in reader.consume(5_000, 0.2):
                    p = m.partition()
                    err = m.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            open_parts.discard(p)
                        continue
                    self._next[p] = m.offset() + 1
                    self.records_read += 1
                    with self._lock:
                        self._fold(m)
        finally:
            reader.unassign()
        with self._lock:
            self.passes += 1

    def _fold(self, m) -> None:
        # A key that is no queue id is no queue's letter (the tracker's `!malformed-markers`, an
        # empty or made-up key of another client): an audit saw them as queue rows, counted in
        # the totals, with a detail page that was a 404 and names the CLI refused.
        try:
            queue = (m.key() or b"").decode()
        except UnicodeDecodeError:
            queue = ""
        if not QUEUE_NAME_RE.match(queue):
            self.records_of_no_queue += 1
            return
        log = self._letters.setdefault(queue, LetterLog())
        log.fold(m.offset(), m.headers())
        kept = self._recent.setdefault(queue, {})
        if m.offset() in log.live:  # a letter: keep its summary, only the newest RECENT_KEPT
            kept[m.offset()] = letter_of(queue, m).summary()
            if len(kept) > RECENT_KEPT:
                del kept[min(kept)]
        else:  # a control event: forget what it removed
            for o in [o for o in kept if o not in log.live]:
                del kept[o]

    def counts(self, keep: Callable[[str], bool]) -> dict[str, int]:
        """Current dead letters per queue, for the queues ``keep`` accepts (those with any)."""
        with self._lock:
            return {q: len(log.live) for q, log in self._letters.items() if log.live and keep(q)}

    def of(self, queue: str, recent: int) -> dict | None:
        """``{"count", "recent"}`` of ``queue``'s dead letters, newest first, as of the last
        pass (None before the first). A recent letter whose summary was not kept (newer
        ones were redriven) shows its offset only."""
        with self._lock:
            if not self.passes:
                return None
            log = self._letters.get(queue)
            if log is None:
                return {"count": 0, "recent": []}
            kept = self._recent.get(queue, {})
            return {"count": len(log.live),
                    "recent": [kept.get(o) or {"offset": o} for o in sorted(log.live, reverse=True)[:recent]]}
