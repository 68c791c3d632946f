"""Markers batches the tracker's Kafka client cannot read: counted and skipped, never a crash loop.

aiokafka (Faust's client) raises out of the worker's fetch when a record batch
cannot be read: a codec it has no library for (``UnsupportedCodecError``: one
lz4 record crash-looped the worker until cramjam was a dependency), a codec it
does not know, a payload that does not decompress or parse. The agent is
cancelled, the worker exits, and its successor fetches the same batch. On the
markers topic, which every consumer may write, such a batch is skipped instead
(``app.consumer_tuning`` wraps aiokafka's batch reader) and counted here
(``/kmq/health``: ``unreadable_batches``); the markers in it are lost like
malformed ones, which is what a crash loop did to every marker after it.

A CRC mismatch may be a network blip, so such a batch is fetched again up to
:data:`CRC_ATTEMPTS` times before it is skipped. Other topics (the changelog)
are never skipped: a lost changelog record would be silent wrong state.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("kmq.tracker.unreadable")

CRC_ATTEMPTS = 3        # reads of a batch failing its CRC before it is skipped
MAX_REMEMBERED = 1000   # batches whose CRC failures are remembered (a flood must not grow it)


class UnreadableBatches:
    """What was skipped or fetched again, per process (any thread reads; the fetch writes)."""

    def __init__(self) -> None:
        self.skipped = 0          # batches skipped
        self.skipped_offsets = 0  # offsets they spanned (markers records lost)
        self.refetched = 0        # CRC failures fetched again
        self.last_error = ""
        self._crc_failures: dict[tuple[str, int, int], int] = {}

    def should_skip(self, topic: str, partition: int, base_offset: int, next_offset: int,
                    error: BaseException) -> bool:
        """Whether to skip the batch ``[base_offset, next_offset)`` that raised ``error``
        (else it is fetched again)."""
        key = (topic, partition, base_offset)
        where = f"{topic}[{partition}] offsets {base_offset}..{next_offset - 1}"
        if _is_crc_mismatch(error):
            failures = self._crc_failures.get(key, 0) + 1
            if failures < CRC_ATTEMPTS:
                if len(self._crc_failures) >= MAX_REMEMBERED:
                    self._crc_failures.clear()
                self._crc_failures[key] = failures
                self.refetched += 1
                log.warning("%s: %r (read %d of %d); fetching it again", where, error, failures, CRC_ATTEMPTS)
                return False
        self._crc_failures.pop(key, None)
        self.skipped += 1
        self.skipped_offsets += max(0, next_offset - base_offset)
        self.last_error = f"{where}: {error!r}"
        log.error("%s: %r; skipped (%d batches so far): a batch the tracker cannot read must not "
                  "stop it", where, error, self.skipped)
        return True

    def as_json(self) -> dict[str, Any]:
        return {"skipped": self.skipped, "skipped_offsets": self.skipped_offsets,
                "refetched": self.refetched, "last_error": self.last_error}


def _is_crc_mismatch(error: BaseException) -> bool:
    from aiokafka.errors import CorruptRecordException
    # aiokafka's own check (fetcher.PartitionRecords): raise CorruptRecordException(f"Invalid CRC - {tp}")
    return isinstance(error, CorruptRecordException) and bool(error.args) \
        and str(error.args[0]).startswith("Invalid CRC")


_TALLY = UnreadableBatches()


def unreadable_batches() -> UnreadableBatches:
    """This process's tally (the views report it)."""
    return _TALLY
