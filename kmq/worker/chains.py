"""A worker on an ordered queue: a batch's messages of one group run one after another.

``receive_batch`` on a queue with ``ordering="group"`` may return several messages of one
group, in order (a *run* the dispatcher handed over at once; docs/ordering.md). A runner
must never run two of them at once, nor one before the earlier one is settled, and must
not run one whose earlier message failed (its copy comes back and goes first). So it
splits a batch into *chains* (:func:`by_group`): every grouped message joins its group's
chain, in batch order; one without a group is a chain of its own. A chain takes one
handler slot and runs its messages in turn; before each but the first,
``Consumer.admit_after`` says whether it may go (the earlier one was acked, or
dead-lettered where the group goes on; its visibility is not nearly out). If not, it is
given back uncounted, and so is the rest of the chain, by the same check. A runner that
is stopping gives back what its chains have not begun.

:class:`ChainRunner` is mixed into :class:`kmq.worker.runner.HandlerRunner`.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any, Callable, Iterable

if TYPE_CHECKING:  # pragma: no cover
    from kmq.message import Message
    from kmq.worker.async_handlers import Slots
    from kmq.worker.runner import HandlerRunner


def by_group(messages: Iterable[Any], group_of: Callable[[Any], Any]) -> list[list[Any]]:
    """The messages as chains to run one after another: one per group (in the order its
    first message came, its messages in batch order), one per message without a group."""
    chains: list[list[Any]] = []
    of_group: dict[Any, list[Any]] = {}
    for m in messages:
        g = group_of(m)
        if g is None:
            chains.append([m])
        elif g in of_group:
            of_group[g].append(m)
        else:
            chain = of_group[g] = [m]
            chains.append(chain)
    return chains


class ChainRunner:
    """Chains of one group's messages on a runner's slots (see the module docstring)."""

    queued = 0  # messages of chains not yet begun (instances count their own)

    def _chains(self: "HandlerRunner", batch: list["Message"]) -> list[list["Message"]]:
        """Split a batch into chains; their messages beyond the first count as ``queued``
        until they begin (a runner drains them too)."""
        chains = by_group(batch, lambda m: m.group_bytes)
        with self._lock:
            self.queued += len(batch) - len(chains)
        return chains

    def _next_in_chain(self: "HandlerRunner", earlier: "Message", m: "Message") -> bool:
        """May ``m`` run after ``earlier``? If not, it was given back. No longer queued either way."""
        consumer = self.consumer
        if self.shutdown.stopping.is_set():
            consumer.give_back(m)
            go = False
        else:
            go = consumer.admit_after(earlier, m)
        with self._lock:
            self.queued -= 1
        return go

    def _call_chain_sync(self: "HandlerRunner", chain: list["Message"], max_deliveries: int,
                         slots: threading.Semaphore) -> None:
        try:
            for k, m in enumerate(chain):
                if k == 0 or self._next_in_chain(chain[k - 1], m):
                    self._handle_sync(m, max_deliveries)
        finally:
            slots.release()

    async def _call_chain_async(self: "HandlerRunner", chain: list["Message"], max_deliveries: int,
                                slots: "Slots") -> None:
        try:
            for k, m in enumerate(chain):
                if k == 0 or self._next_in_chain(chain[k - 1], m):
                    await self._handle_async(m, max_deliveries)
        except asyncio.CancelledError:
            pass
        finally:
            slots.release()
