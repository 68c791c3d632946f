"""What the state machine reports: what came due (to republish, dead-letter or send) and
what one marker did (for counters). Plain values; :mod:`kmq.protocol.state` decides them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from kmq.protocol.entries import Cause
from kmq.protocol.markers import RangeRef
from kmq.protocol.outcomes import Outcome


@dataclass(frozen=True, slots=True)
class Expiry:
    """Offsets of one range that came due together, for the same cause."""

    range: RangeRef
    mask: int
    cause: Cause
    reason: str
    started_ms: int
    deadline_ms: int

    @property
    def count(self) -> int:
        return self.mask.bit_count()


@dataclass(frozen=True, slots=True)
class StaleIndexKey:
    """An index key no entry points at any more (left by a crash): only to be removed."""

    key: bytes
    count = 0


@dataclass(frozen=True, slots=True)
class DueSend:
    """A scheduled (delayed) send whose time has come."""

    queue: str
    message_id: str
    due_ms: int
    value: bytes
    headers: tuple[tuple[str, bytes], ...]

    @property
    def count(self) -> int:
        return 1


Due = Union[Expiry, DueSend, StaleIndexKey]


@dataclass(frozen=True, slots=True)
class Applied:
    """What one marker did, for counters: ``what`` happened to ``count`` messages of ``queue``.

    ``what`` is ``MALFORMED_MARKER`` (with ``detail`` saying why, and no queue) for a
    marker outside the codec's limits: it changed nothing and is to be set aside.
    ``settled`` is, for an applied ACK, the offsets it took out of the table (a mask
    over the marker's range): an ordered queue's groups go on for those only.
    """

    queue: str
    what: Outcome
    count: int
    detail: str = ""
    settled: int = 0
