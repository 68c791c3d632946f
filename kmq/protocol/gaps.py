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

    After an assignment nothing is expected: Faust starts a partition at its committed
    offset, and what lies before it is in the table already or carried nothing.
    """

    def __init__(self) -> None:
        self._next: dict[int, int] = {}
        self.read = 0     # gaps read from the log
        self.found = 0    # records found in them (the client had not handed them over)
        self.unread = 0   # gaps given up on: the log did not answer within the read's bound

    def forget(self) -> None:
        """A rebalance: every partition starts anew from wherever it is resumed."""
        self._next.clear()

    def handed(self, partition: int, offset: int) -> tuple[int, int] | None:
        """The agent is handed the record at ``offset``: the offsets ``[start, offset)`` to
        read and apply before it, or None."""
        nxt = self._next.get(partition)
        self._next[partition] = max(offset + 1, nxt or 0)
        return (nxt, offset) if nxt is not None and offset > nxt else None

    def filled(self, records_found: int) -> None:
        """A gap was read; it held ``records_found`` records."""
        self.read += 1
        self.found += records_found

    def as_json(self) -> dict[str, int]:
        return {"read": self.read, "found": self.found, "unread": self.unread}
