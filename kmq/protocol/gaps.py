"""Offsets the markers agent was not handed: read from the log before anything after them.

The markers agent is handed a partition's records in offset order; an offset it is
not handed is normally a record that carries nothing for it (a transaction's commit
marker, a record of an aborted transaction). Measured on the embedded broker
(docs/reliability.md, "Returns after an ack"): now and then, on a loaded machine, the
worker's Kafka client (aiokafka under Faust) did not hand over a consumer's ACK record
that came right after a dispatcher's ACQUIRE record, while librdkafka read it there;
the acked message came back one visibility timeout later.

So before the agent applies a record that follows a gap, the gap is read straight from
the log (``agents/gap_reader.py``, read_committed like the agent's client) and what it
holds is applied first, in order; a gap that holds nothing (commit markers, aborted
records) costs that one read. Reading it beside Faust's consumer rather than seeking
that consumer back matters: a seek raced Faust's fetch loop, which went on handing the
records of the batch on their way and so set its read offset past the gap again, then
dropped the records fetched anew as already seen, and the agent waited for them for
good (tests/integration/test_marker_gaps.py). Pure: which offsets to read, and counts.
"""

from __future__ import annotations


class Gaps:
    """Per markers partition: the next offset the agent expects (in memory), and counts.

    After an assignment the agent says where the partition's table stands (:meth:`expect`):
    Faust resumes at its committed offset, but it has also handed a reassigned partition's
    first record well above it, the records in between never handed (a chaos run: resumed
    at 268 with the table at 133, and 134..267 were skipped for good, since everything at
    or below the table's mark counts as applied). Without :meth:`expect`, nothing is
    expected until the first record.
    """

    def __init__(self) -> None:
        self._next: dict[int, int] = {}
        self.read = 0     # gaps read from the log
        self.found = 0    # records found in them (the client had not handed them over)
        self.unread = 0   # gaps given up on: the log did not answer within the read's bound
        self.reread = 0   # records read after an assignment, between the table's mark and the resume

    def forget(self) -> None:
        """A rebalance: every partition starts anew from wherever it is resumed."""
        self._next.clear()

    def expect(self, partition: int, offset: int) -> None:
        """After an assignment: the partition's table holds its records below ``offset``, so
        the first record handed above it opens a gap from there (one below it is a replay)."""
        self._next[partition] = offset

    def handed(self, partition: int, offset: int) -> tuple[int, int] | None:
        """The agent is handed the record at ``offset``: the offsets ``[start, offset)`` to
        read and apply before it, or None."""
        nxt = self._next.get(partition)
        self._next[partition] = max(offset + 1, nxt or 0)
        return (nxt, offset) if nxt is not None and offset > nxt else None

    def filled(self, records_found: int, after_assignment: bool = False) -> None:
        """A gap was read; it held ``records_found`` records. The first gap after an
        assignment holds mostly records that changed nothing (applied, never marked)."""
        self.read += 1
        if after_assignment:
            self.reread += records_found
        else:
            self.found += records_found

    def as_json(self) -> dict[str, int]:
        return {"read": self.read, "found": self.found, "unread": self.unread, "reread": self.reread}
