"""How long a reader's fetches wait: longer while the broker keeps answering them empty.

Apache Kafka answers a fetch as soon as it has records, so there a reader's fetch
wait only bounds idle polling. The embedded broker (Tansu 0.6.0, memory storage)
answers after the wait, and, on a partition of many small batches, with nothing at
all when the wait is too short for it: measured, a partition of 40,000 one-record
batches gave no record in 20 s to readers waiting 10 or 20 ms, and gave one in
89-170 ms to readers waiting 50 or 100 ms (bench.broker_batches, BENCHMARKS.md).
A fixed long wait would be every reader's latency floor on that broker.

So a reader starts at its short wait and doubles it whenever one of its partitions
stayed behind its end for ``stall_s`` while fewer than ``min_records`` records and
``min_bytes`` bytes came in that time: nothing at all, or a crawl (measured: a
tracker at a 40 ms wait read such a markers partition at about 240 records a second;
a dispatcher at 40 ms, 1,174 records in 70 s). Up to ``max_wait_ms``. It never
shortens it again: a partition on that broker only grows, and a wait it once needed
it needs again. A reader that keeps up, or reads a backlog at any usual pace, is
never raised; on Apache Kafka a partition that has records returns them.

Pure: time is passed in; ``kmq.kafka.patient_reader`` and ``app.fetch_wait`` apply it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable

from kmq.errors import ConfigError

MAX_WAIT_MS = 1600  # a loaded machine's broker needed more than 400 ms at 40,000 one-record batches
STALL_S = 0.5       # a partition behind its end this long ...
MIN_RECORDS = 500   # ... and fewer records than this came ...
MIN_BYTES = 1 << 20  # ... and fewer bytes (a backlog of big records is no crawl): it is raised


@dataclass
class FetchWait:
    """A reader's fetch wait, in ms, raised while its fetches bring (almost) nothing in vain."""

    wait_ms: int
    max_wait_ms: int = MAX_WAIT_MS
    stall_s: float = STALL_S
    min_records: int = MIN_RECORDS
    min_bytes: int = MIN_BYTES
    raises: int = 0  # how often the wait was doubled
    # partition -> (since, position then, bytes read then): the window it has been behind
    _behind_since: dict[Hashable, tuple[float, int, int]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.wait_ms, bool) or not isinstance(self.wait_ms, int) or self.wait_ms < 1:
            raise ConfigError(f"fetch wait_ms={self.wait_ms!r} must be an integer >= 1 (milliseconds)")
        if self.max_wait_ms < self.wait_ms:
            raise ConfigError(f"fetch max_wait_ms={self.max_wait_ms!r} is below wait_ms={self.wait_ms!r}")
        if not self.stall_s > 0:
            raise ConfigError(f"fetch stall_s={self.stall_s!r} must be > 0 (seconds)")
        if isinstance(self.min_records, bool) or not isinstance(self.min_records, int) or self.min_records < 1:
            raise ConfigError(f"fetch min_records={self.min_records!r} must be an integer >= 1")
        if isinstance(self.min_bytes, bool) or not isinstance(self.min_bytes, int) or self.min_bytes < 1:
            raise ConfigError(f"fetch min_bytes={self.min_bytes!r} must be an integer >= 1")

    @classmethod
    def starting_at(cls, wait_ms: int, min_records: int = MIN_RECORDS) -> "FetchWait":
        """The policy for a reader configured with ``wait_ms`` (never below it)."""
        return cls(wait_ms, max_wait_ms=max(wait_ms, MAX_WAIT_MS), min_records=min_records)

    def observe(self, now_s: float, partition: Hashable, *, behind: bool, position: int,
                read_bytes: int = 0) -> bool:
        """Note what one look at ``partition`` showed; True when the wait was just raised.

        ``behind``: the partition's end, as the broker reported it before this look,
        lies past ``position``, the reader's next offset of it now. ``read_bytes``: the
        bytes read so far (of the partition, or of the whole reader), a running count.
        """
        if not behind:
            self._behind_since.pop(partition, None)
            return False
        since_s, since_position, since_bytes = self._behind_since.setdefault(
            partition, (now_s, position, read_bytes))
        if position < since_position:  # sought back: a new window
            self._behind_since[partition] = (now_s, position, read_bytes)
            return False
        if now_s - since_s < self.stall_s:
            return False
        if (position - since_position >= self.min_records or read_bytes - since_bytes >= self.min_bytes
                or self.wait_ms >= self.max_wait_ms):
            self._behind_since[partition] = (now_s, position, read_bytes)  # a usual pace: a new window
            return False
        self.wait_ms = min(self.max_wait_ms, self.wait_ms * 2)
        self.raises += 1
        # Every partition gets a whole stall_s at the new wait before the next raise.
        self._behind_since = {p: (now_s, position, read_bytes) if p == partition else (now_s, at, b)
                              for p, (_s, at, b) in self._behind_since.items()}
        return True

    def why(self, end: int, position: int) -> str:
        """Why the wait was just raised, for the log."""
        came = "nothing" if self.min_records == 1 else f"fewer than {self.min_records} records"
        return (f"fetch wait raised to {self.wait_ms} ms: the partition ended at {end}, and {came} "
                f"past {position} came in {self.stall_s:g} s (the embedded broker on a partition of "
                "many small batches, docs/shared-queues.md)")

    def forget(self, partition: Hashable) -> None:
        """The reader no longer reads ``partition``."""
        self._behind_since.pop(partition, None)

    def forget_all(self) -> None:
        self._behind_since.clear()
