"""Which markers partitions a dispatcher owns, under which epoch, and which ended epochs
still owe their deliveries (agents/dispatch/dispatcher.py; docs/shared-queues.md, "Dispatcher
handover").

An epoch begins with a BEGIN the dispatcher writes and is ready once the markers agent
applied it. It ends when the partition is revoked, when a write of it fails, or when the
dispatcher stops. ACQUIREs of an epoch ended by a failed write went out before the next
BEGIN on the same producer: they are applied, so their deliveries are still written.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from agents.dispatch.dedup_replay import Replay
from kmq.protocol.dispatch import Roster


@dataclass
class OwnedPartition:
    """A markers partition this worker owns: its dispatcher epoch and its queues' state."""

    epoch: int
    ready: bool = False
    rosters: dict[str, Roster] = field(default_factory=dict)
    # live consumers of all rosters: counted each round, and as new ones come in between
    consumers: int = 0
    cursors: dict[tuple[str, int], int] = field(default_factory=dict)
    # (queue, queue partition) -> dedup ids to read back before it goes on (dedup_replay)
    replays: dict[tuple[str, int], Replay] = field(default_factory=dict)


class Epochs:
    """The owned partitions (``parts``) and the ended epochs whose deliveries are owed."""

    def __init__(self) -> None:
        self.parts: dict[int, OwnedPartition] = {}
        self._owed: set[int] = set()

    def begin(self, m: int) -> int:
        """A new epoch for partition ``m``; returns it (its BEGIN is the caller's to write)."""
        epoch = random.getrandbits(63) or 1
        self.parts[m] = OwnedPartition(epoch)
        return epoch

    def begun(self, m: int, epoch: int, cursors: dict[tuple[str, int], int]) -> bool:
        """The agent applied BEGIN(epoch) of ``m``; False if it is not the one we wait for."""
        part = self.parts.get(m)
        if part is None or part.epoch != epoch:
            return False  # an older BEGIN of ours, or another worker's
        part.ready = True
        part.cursors = dict(cursors)
        return True

    def end(self, m: int, epoch: int | None = None, deliveries_owed: bool = False) -> bool:
        """End ``m``'s epoch (only if it is ``epoch``, when given); True if one ended."""
        part = self.parts.get(m)
        if part is None or (epoch is not None and part.epoch != epoch):
            return False
        del self.parts[m]
        if deliveries_owed:
            self._owed.add(part.epoch)
        return True

    def forget_all(self) -> list[int]:
        """Nothing is ours any more (a rebalance): returns the partitions given up."""
        gone = list(self.parts)
        self.parts.clear()
        self._owed.clear()
        return gone

    def with_deliveries(self) -> set[int]:
        """Epochs whose acknowledged ACQUIREs are applied: the owned partitions', and those
        ended by a failed write."""
        return {part.epoch for part in self.parts.values()} | self._owed
