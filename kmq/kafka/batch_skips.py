"""Batches a librdkafka reader cannot read, skipped whole instead of fetched forever.

librdkafka reports a batch it cannot read (a payload that does not decompress, a zstd frame
past ``receive.message.max.bytes``, a codec it lacks) as an error at the batch's first
offset and fetches the same batch again at every fetch: a reader of a topic anyone may
write (the queue topic) went no further on that partition. :class:`BatchSkips` finds where
such a batch ends by seeking (the pure ``kmq.protocol.batch_end``), and counts what it skipped.
"""

from __future__ import annotations

import logging

from confluent_kafka import KafkaError

from kmq.protocol.batch_end import BatchEnd

log = logging.getLogger("kmq.kafka")

# Errors librdkafka reports at a batch's first offset when the batch itself cannot be read
# (the same at every fetch): not a broker blip.
UNREADABLE = frozenset({KafkaError._BAD_COMPRESSION, KafkaError._BAD_MSG, KafkaError._NOT_IMPLEMENTED,
                        KafkaError.INVALID_MSG})


def unreadable_at(rec) -> int | None:
    """The first offset of the batch an error record says cannot be read, else None."""
    err = rec.error()
    if err is None or err.code() not in UNREADABLE or rec.offset() < 0:
        return None
    return rec.offset()


REMEMBERED = 1000  # batches skipped remembered per partition (a reader's own; not searched for again)


class BatchSkips:
    """Per partition of one reader, the search for the end of the batch it cannot read; with
    ``remember``, the last batches skipped (up to that many per partition), so a reader that
    reads one again from below seeks past it at once and counts it once."""

    def __init__(self, what: str, remember: int = 0) -> None:
        self.what = what  # the reader, for the log
        self.remember = remember
        self._searches: dict[int, BatchEnd] = {}
        self._why: dict[int, object] = {}  # partition -> the error its search began with
        self._skipped: dict[int, dict[int, int]] = {}  # partition -> batches skipped: first offset -> end
        self.batches = 0  # batches skipped
        self.offsets = 0  # offsets they spanned
        self.last_error = ""

    def searching(self, p: int) -> bool:
        return p in self._searches

    def forget(self, p: int) -> None:
        """The reader goes elsewhere on ``p``: a batch still unreadable fails again there."""
        self._searches.pop(p, None)
        self._why.pop(p, None)

    def step(self, p: int, failed: int | None, past: bool, error: object = None, *,
             position: int | None = None, end: int | None = None, next_batch: int | None = None) -> int | None:
        """One read's news of partition ``p``: ``failed``, the first offset of a batch that
        could not be read in it; ``past``, it brought a record or the partition's end (after
        a seek: at or past the probe), ``next_batch`` where that end was, if it was one.
        ``position``: where the reader stands, if it keeps one (a failure below it is an
        earlier read's; the batch holding it is the one that failed); ``end``: the
        partition's end, if known (no search goes past it). Returns where to seek the
        reader, or None: a probe while :meth:`searching`, else the end of the batch skipped."""
        search = self._searches.get(p)
        if search is None:
            if failed is None or (position is not None and failed + 1 < position):
                return None
            known = self._skipped.get(p, {}).get(failed)
            if known is not None and (position is None or known > position):
                return known  # skipped before, read again from below it
            base = failed if position is None else max(failed, position)
            search = self._searches[p] = BatchEnd(base, end if end is not None and end > base else None)
            self._why[p] = error
            self.last_error = f"{self.what} partition {p} offset {failed}: {error}"
            log.warning("%s partition %d: the batch at offset %d cannot be read (%s); finding its end",
                        self.what, p, failed, error)
        elif failed is not None and failed <= search.inside:
            search.observe(inside=True)
        elif past or failed is not None:
            search.observe(inside=False, next_batch=failed if failed is not None else next_batch)
        else:
            return None  # nothing from the probe yet
        if search.end is None:
            return search.probe
        del self._searches[p]
        why = self._why.pop(p, None)
        self.batches += 1
        self.offsets += search.end - search.base
        log.error("%s partition %d: offsets %d..%d skipped, a batch that cannot be read (%d seeks to find "
                  "its end): %s", self.what, p, search.base, search.end - 1, search.probes, why)
        if self.remember:
            skipped = self._skipped.setdefault(p, {})
            if len(skipped) >= self.remember:
                skipped.clear()
            skipped[search.base] = search.end
        return search.end
