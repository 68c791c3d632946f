"""Where a record batch nobody can read ends, found by seeking; pure.

librdkafka reports a batch it cannot read (a payload that does not decompress, a zstd
frame past ``receive.message.max.bytes``, a codec it lacks) as an error at the batch's
first offset, and fetches the same batch again, forever: the partition goes no further for
anyone reading it (measured on the dispatcher's reader of the queue topic). The error does
not say where the batch ends, and skipping one offset at a time costs a fetch per record.

A fetch from any offset inside the batch returns the whole batch, so the same error comes
back; from past its end, a readable record at or after that offset, or the partition's end.
"Inside" is therefore true from the batch's first offset to its last and false after it:
:class:`BatchEnd` finds the first offset past it by doubling steps from the first offset,
then halving the interval (about ``2 log2 n`` fetches for a batch of ``n`` offsets), and
never skips an offset a readable batch holds.
"""

from __future__ import annotations


class BatchEnd:
    """The search for the end of the unreadable batch that begins at (or holds) ``base``.

    ``limit``: an offset known to be past it (the partition's end), or None. The reader
    seeks to :attr:`probe`, then reports what came back with :meth:`observe`, until
    :attr:`end` is known: the offsets ``[base, end)`` are the batch's (skip them).
    """

    __slots__ = ("base", "inside", "past", "probe", "probes", "_bisecting")

    def __init__(self, base: int, limit: int | None = None) -> None:
        if limit is not None and limit <= base:
            raise ValueError(f"limit {limit} must be past base {base}")
        self.base = base
        self.inside = base   # the highest offset known to be the batch's
        self.past = limit    # the lowest offset known to be past it (None: none yet)
        self.probes = 0      # seeks made
        self._bisecting = False
        self.probe: int | None = self._next()

    @property
    def end(self) -> int | None:
        """The first offset past the batch, once known."""
        return self.past if self.past is not None and self.past == self.inside + 1 else None

    def observe(self, inside: bool, next_batch: int | None = None) -> int | None:
        """What a fetch from :attr:`probe` brought: the batch's error again (``inside``), or
        a record, the partition's end or another batch's error (not ``inside``; that batch's
        first offset ``next_batch`` if known: this one ends before it). Returns the next
        offset to seek to, or None once :attr:`end` is known."""
        x = self.probe
        if x is None:
            return None
        self.probes += 1
        if inside:
            self.inside = max(self.inside, x)
        else:
            past = x if next_batch is None or next_batch <= self.inside else min(x, next_batch)
            self.past = past if self.past is None else min(self.past, past)
            self._bisecting = True
        self.probe = self._next()
        return self.probe

    def _next(self) -> int | None:
        if self.end is not None:
            return None
        step = max(1, 2 * (self.inside - self.base))
        if not self._bisecting and (self.past is None or self.base + step < self.past):
            return self.base + step
        return (self.inside + self.past) // 2
