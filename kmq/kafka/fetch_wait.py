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
a dispatcher at 40 ms, 1,174 records in 70 s). Up to ``max_wait_ms``.

A raise for a crawl is a trial: a longer wait also means fewer answers a second, and
past some wait that broker gives fewer records a second, not more (measured: a tracker
raised to 1,280 ms read a markers partition at about 600 records a second, against
about 1,700 at 160 ms). So the next window of that partition judges it: at least
``KEEP_GAIN`` times the records a second it replaces, and it stands (and the next crawl
may raise again); fewer than before, and the wait goes back and crawls raise no more;
in between, it stands and crawls raise no more (a trial its partition leaves unjudged
for ``TRIAL_LAPSE_STALLS`` windows, no longer read, stands). Nothing at all in a window
always raises. Otherwise the wait never shortens again: a partition on that broker only
grows, and a wait it once needed it needs again. A reader that keeps up, or reads a
backlog at any usual pace, is never raised; on Apache Kafka a partition that has
records returns them.

Pure: time is passed in; ``kmq.kafka.patient_reader`` and ``app.fetch_wait`` apply it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable, NamedTuple

from kmq.errors import ConfigError

MAX_WAIT_MS = 1600  # a loaded machine's broker needed more than 400 ms at 40,000 one-record batches
STALL_S = 0.5       # a partition behind its end this long ...
MIN_RECORDS = 500   # ... and fewer records than this came ...
MIN_BYTES = 1 << 20  # ... and fewer bytes (a backlog of big records is no crawl): it is raised
KEEP_GAIN = 1.5     # a crawl's raise stands for good when the records a second grew this much
TRIAL_LAPSE_STALLS = 4  # a trial its partition did not judge in this many stall_s stands


class _Trial(NamedTuple):
    """A crawl's raise on trial, judged by its partition's next window."""

    partition: Hashable
    wait_before_ms: int
    rate_before: float  # records a second at the wait before
    since_s: float


@dataclass
class FetchWait:
    """A reader's fetch wait, in ms, raised while its fetches bring (almost) nothing in vain."""

    wait_ms: int
    max_wait_ms: int = MAX_WAIT_MS
    stall_s: float = STALL_S
    min_records: int = MIN_RECORDS
    min_bytes: int = MIN_BYTES
    raises: int = 0  # how often the wait was doubled
    lowered: bool = False  # the last change took a raise back (for why())
    # partition -> (since, position then, bytes read then): the window it has been behind
    _behind_since: dict[Hashable, tuple[float, int, int]] = field(default_factory=dict, repr=False)
    _trial: _Trial | None = field(default=None, repr=False)  # a crawl's raise on trial
    _settled: bool = field(default=False, repr=False)  # crawls raise no more (a trial failed)

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
        """Note what one look at ``partition`` showed; True when the wait was just changed.

        ``behind``: the partition's end, as the broker reported it before this look,
        lies past ``position``, the reader's next offset of it now. ``read_bytes``: the
        bytes read so far (of the partition, or of the whole reader), a running count.
        """
        if not behind:
            self._behind_since.pop(partition, None)
            self._end_trial_of(partition)  # caught up at the new wait: it stands
            return False
        since_s, since_position, since_bytes = self._behind_since.setdefault(
            partition, (now_s, position, read_bytes))
        if position < since_position:  # sought back: a new window
            self._behind_since[partition] = (now_s, position, read_bytes)
            return False
        if now_s - since_s < self.stall_s:
            return False
        came = position - since_position
        self._behind_since[partition] = (now_s, position, read_bytes)  # the next window
        if came >= self.min_records or read_bytes - since_bytes >= self.min_bytes:
            self._end_trial_of(partition)  # a usual pace at the new wait: it stands
            return False
        if came == 0:  # nothing at all: always worth a longer wait
            self._trial, self._settled = None, False
            return self._raise(now_s, partition, position, read_bytes, rate=0.0)
        rate = came / (now_s - since_s)
        if self._trial is not None and self._trial.partition != partition:
            if now_s - self._trial.since_s < TRIAL_LAPSE_STALLS * self.stall_s:
                return False  # another partition's trial is still being judged
            self._trial = None  # that partition is no longer read (or looked at): it stands
        if self._trial is not None:
            wait_before, rate_before = self._trial.wait_before_ms, self._trial.rate_before
            self._trial = None
            if rate < rate_before:  # the raise made it slower: take it back
                self._settled, self.lowered, self.wait_ms = True, True, wait_before
                self._new_windows(now_s, partition, position, read_bytes)
                return True
            if rate < KEEP_GAIN * rate_before:
                self._settled = True
                return False
        if self._settled:
            return False
        return self._raise(now_s, partition, position, read_bytes, rate=rate)

    def _raise(self, now_s: float, partition: Hashable, position: int, read_bytes: int, *, rate: float) -> bool:
        if self.wait_ms >= self.max_wait_ms:
            return False
        self._trial = _Trial(partition, self.wait_ms, rate, now_s)
        self.wait_ms = min(self.max_wait_ms, self.wait_ms * 2)
        self.raises += 1
        self.lowered = False
        self._new_windows(now_s, partition, position, read_bytes)
        return True

    def _new_windows(self, now_s: float, partition: Hashable, position: int, read_bytes: int) -> None:
        """Every partition gets a whole stall_s at a new wait before it is judged again."""
        self._behind_since = {p: (now_s, position, read_bytes) if p == partition else (now_s, at, b)
                              for p, (_s, at, b) in self._behind_since.items()}

    def why(self, end: int, position: int) -> str:
        """Why the wait was just changed, for the log."""
        if self.lowered:
            return (f"fetch wait back to {self.wait_ms} ms: the longer one brought fewer records a second "
                    f"(the partition ended at {end}; read up to {position}); crawls raise it no more")
        came = "nothing" if self.min_records == 1 else f"fewer than {self.min_records} records"
        return (f"fetch wait raised to {self.wait_ms} ms: the partition ended at {end}, and {came} "
                f"past {position} came in {self.stall_s:g} s (the embedded broker on a partition of "
                "many small batches, docs/shared-queues.md)")

    def forget(self, partition: Hashable) -> None:
        """The reader no longer reads ``partition``."""
        self._behind_since.pop(partition, None)
        self._end_trial_of(partition)

    def _end_trial_of(self, partition: Hashable) -> None:
        """``partition``'s trial, if it has one, ends with the raise standing."""
        if self._trial is not None and self._trial.partition == partition:
            self._trial = None

    def forget_all(self) -> None:
        self._behind_since.clear()
        self._trial = None
