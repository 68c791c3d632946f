"""Records the tracker's consumer skipped: fetched again before anything after them is applied.

The markers agent is handed a partition's records in offset order; an offset it is
not handed is normally a record that carries nothing for it (a transaction's commit
marker, a record of an aborted transaction). Measured on the embedded broker
(docs/reliability.md, "Returns after an ack"): now and then, on a loaded machine, the
worker's Kafka client (aiokafka under Faust) did not hand over a consumer's ACK record
that came right after a dispatcher's ACQUIRE record, while librdkafka read it there;
the acked message came back one visibility timeout later.

So a gap makes the agent rewind: the consumer is sought back to the gap's first offset
and every record of that partition already on its way past the gap is dropped (it
comes again). Fetched again from the gap's start, the skipped record is the first of
its fetch and is handed over; a gap that holds nothing for us (commit markers, aborted
records: the client's own filtering stays the judge) comes back as the same gap, and is
then accepted. Pure: what to do with each offset handed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Step(Enum):
    APPLY = "apply"      # apply the record
    DROP = "drop"        # on its way from before a rewind: it comes again
    REWIND = "rewind"    # seek the partition back to ``Rewinds.rewind_to`` and drop the record


@dataclass
class _Pending:
    start: int  # the gap's first offset (sought back to)
    end: int    # the record that showed the gap


class Rewinds:
    """Per markers partition: the next offset expected, and a rewind under way (in memory).

    After an assignment nothing is expected: Faust starts a partition at its committed
    offset, and what lies before it is in the table already or carried nothing.
    """

    def __init__(self) -> None:
        self._next: dict[int, int] = {}
        self._pending: dict[int, _Pending] = {}
        self.rewind_to = -1  # where the last REWIND seeks to
        self.rewinds = 0     # gaps fetched again
        self.accepted = 0    # of them, gaps that held nothing for us
        self.found = 0       # of them, gaps that held records the client had skipped

    def forget(self) -> None:
        """A rebalance: every partition starts anew from wherever it is resumed."""
        self._next.clear()
        self._pending.clear()

    def cancel(self, partition: int) -> None:
        """The seek of a REWIND failed: accept the gap rather than drop records forever."""
        pending = self._pending.pop(partition, None)
        if pending is not None:
            self._next[partition] = pending.end

    def handed(self, partition: int, offset: int) -> Step:
        """What to do with the record at ``offset`` the agent is handed."""
        pending = self._pending.get(partition)
        if pending is not None:
            if offset > pending.end:
                return Step.DROP  # fetched before the rewind; it comes again
            if offset == pending.end:
                self.accepted += 1  # fetched again, the gap held nothing the client hands over
            elif offset >= pending.start:
                self.found += 1  # a record the client had skipped
            del self._pending[partition]
            self._next[partition] = offset + 1
            return Step.APPLY
        nxt = self._next.get(partition)
        if nxt is not None and offset > nxt:
            self._pending[partition] = _Pending(nxt, offset)
            self.rewind_to = nxt
            self.rewinds += 1
            return Step.REWIND
        self._next[partition] = max(offset + 1, nxt or 0)
        return Step.APPLY
