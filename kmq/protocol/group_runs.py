"""One message group's state in :class:`kmq.protocol.ordering.GroupOrder`: its records
waiting, in send order, and its *run*, the messages handed out and not settled, in hand-out
order (docs/ordering.md). Plain values, pure; :class:`~kmq.protocol.ordering.GroupOrder`
decides what they hold.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass(slots=True)
class _Member:
    """A message of a group's run: handed out and not settled."""

    msg_id: str
    offset: int | None   # where it is at a consumer; None: away (its copy read, or held)
    handed_from: int     # the offset it was last handed out from (a purge)
    first: int           # its first record's offset: its place in the run, and where a
                         # successor must read from to know it (the durable floor)
    back: int | None = None  # its copy, read and waiting to go out again
    held: bool = False   # dead-lettered with policy "hold": away until redriven


@dataclass(slots=True)
class _Group:
    """A group with a message waiting or in flight."""

    waiting: deque = field(default_factory=deque)  # (offset, msg_id) never handed out, in order
    run: list = field(default_factory=list)        # _Member in hand-out order, the head first
    ids: dict = field(default_factory=dict)        # msg_id -> its _Member in run (a copy's lookup)
    waiting_ids: set = field(default_factory=set)  # msg_ids in waiting (holds())
    since_ms: int = 0                              # when the current head was first offered
    owner: str | None = None  # the consumer its run went to, while more may go there too
    chain: int = -1           # the run's id for its consumer: its first record's offset

    def join(self, m: _Member) -> None:
        """``m`` joins the run, placed by its first record."""
        at = next((i for i, x in enumerate(self.run) if x.first > m.first), len(self.run))
        self.run.insert(at, m)
        self.ids[m.msg_id] = m

    def leave(self, m: _Member) -> None:
        """``m`` leaves the run: it settled, or went to the dead letters for good."""
        if self.run[0] is m:
            del self.run[0]  # the usual case: the head settles
        else:
            self.run.remove(m)
        del self.ids[m.msg_id]
