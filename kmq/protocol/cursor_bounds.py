"""The cursors a dispatcher begins from, bounded by what the queue topic holds (pure).

A cursor is where a queue's records on a queue partition were handed out up to; the
table keeps the highest any ACQUIRE (or a FLOOR) of the partition's epoch named. A
forged ACQUIRE or FLOOR with the current epoch (anyone who reads the markers topic sees
it in the BEGIN) could set it anywhere: an audit's ACQUIRE of one offset at 10**15
stopped its queue for good at the next BEGIN, and 400,000 FLOORs of made-up partitions
were all loaded at every BEGIN. A dispatcher's own cursor is never past the partition's
end, except by what ListOffsets undercounts (the embedded broker answers the last
batch's first offset + 1), so one more than ``slack`` offsets past it was written by
someone else: it begins at the end (the FLOOR it writes mends the table), and a cursor
of a partition the topic does not have is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Offsets past a partition's end (as ListOffsets said it) a cursor may be: far more than
# one batch of records, which is what the embedded broker undercounts by.
CURSOR_SLACK_OFFSETS = 1_000_000

Cursors = dict[tuple[str, int], int]  # (queue, queue partition) -> offset


@dataclass
class Bounded:
    cursors: Cursors                                    # the ones to begin from
    moved: Cursors = field(default_factory=dict)        # past their end: set to it
    dropped: list[tuple[str, int]] = field(default_factory=list)  # no such partition


def bounded_cursors(cursors: Cursors, ends: dict[int, int] | None, queue_partitions: int,
                    slack: int = CURSOR_SLACK_OFFSETS) -> Bounded:
    """``cursors`` within the queue topic: ``ends`` (partition -> its end now; None when the
    broker did not say: only partitions are checked) and its ``queue_partitions``."""
    out = Bounded({})
    for (queue, p), offset in cursors.items():
        if not 0 <= p < queue_partitions:
            out.dropped.append((queue, p))
            continue
        end = None if ends is None else ends.get(p)
        if end is not None and offset > end + slack:
            out.moved[(queue, p)] = end
            offset = end
        out.cursors[(queue, p)] = offset
    return out
