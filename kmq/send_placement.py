"""Which partition of the queue topic a send goes to (:class:`kmq.Client`).

A queue's partitions (its ``spread``, :func:`kmq.protocol.placement.queue_partitions`) are
taken in turn; a send with a group (else a dedup id) goes to one partition per group, so
its sends meet one dispatcher (:func:`kmq.protocol.placement.keyed_partition`). The
partitions of each queue are cached, and looked up again when any queue's settings change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from kmq.protocol import envelope
from kmq.protocol.placement import keyed_partition, queue_partitions

if TYPE_CHECKING:  # pragma: no cover
    from kmq.ops.queues_topic import QueueConfigs


class SendPlacement:
    """The partitions a client sends each queue's messages to, and whose turn is next.

    ``configs()``: the live view of the queues' settings; ``topic_partitions()``: the queue
    topic's partition count. Both are asked only when a queue's partitions are looked up.
    """

    def __init__(self, configs: Callable[[], QueueConfigs], topic_partitions: Callable[[], int]) -> None:
        self._configs = configs
        self._topic_partitions = topic_partitions
        self._slots: dict[str, list] = {}  # queue -> [partitions, next turn]
        self._version = -1

    def slot(self, queue: str) -> list:
        """[the queue's partitions, next turn], refreshed when any queue config changes."""
        configs = self._configs()
        if configs.version != self._version:
            self._slots.clear()
            self._version = configs.version
        slot = self._slots.get(queue)
        if slot is None:
            parts = queue_partitions(queue, self._topic_partitions(), configs.get(queue).spread)
            slot = self._slots[queue] = [parts, 0]
        return slot

    def next_partition(self, queue: str) -> int:
        """The queue's partitions taken in turn (one partition for spread 1)."""
        slot = self.slot(queue)
        parts, turn = slot
        slot[1] = turn + 1
        return parts[turn % len(parts)]

    def keyed_partition(self, queue: str, order_headers: list[tuple[str, bytes]]) -> int:
        """One partition per group (else per dedup id): its sends meet one dispatcher."""
        ours = dict(order_headers)
        return keyed_partition(self.slot(queue)[0], ours.get(envelope.GROUP), ours.get(envelope.DEDUP_ID))
