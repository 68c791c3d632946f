"""Partition-mode queues' consumer groups, as the depth scan sees them (cached).

A queue consumed in partition mode by a group has no START watermark until its first
START; the scan finds it by its group's name (``<group prefix><queue>``) and counts its
depth from the group's committed offsets. Both come from the admin API, so both are kept
for a while: the depth view is for people, not for the hot path.
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient

from kmq.protocol.placement import QUEUE_NAME_RE
from kmq.settings import Settings

log = logging.getLogger("kmq.tracker.queue_scan")

COMMITTED_TTL_S = 30.0  # committed offsets of queues without a START watermark
GROUPS_TTL_S = 30.0     # consumer-group listing (finds queues by group name)
MAX_CACHED_QUEUES = 100_000


class QueueGroups:
    """Which queues have a consumer group, and each group's committed offsets."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._admin: AdminClient | None = None
        self._committed: dict[str, tuple[float, dict[int, int]]] = {}
        self._groups: tuple[float, set[str]] = (0.0, set())

    def committed(self, queue: str) -> dict[int, int]:
        """The queue's consumer group's committed offsets: queue partition -> offset."""
        now = time.monotonic()
        hit = self._committed.get(queue)
        if hit is not None and now - hit[0] < COMMITTED_TTL_S:
            return hit[1]
        req = ConsumerGroupTopicPartitions(self.settings.group_id(queue))
        out: dict[int, int] = {}
        try:
            fut = self._get_admin().list_consumer_group_offsets([req], request_timeout=10)
            for f in fut.values():
                for tp in f.result(timeout=10).topic_partitions or ():
                    if tp.topic == self.settings.queue_topic and tp.offset >= 0:
                        out[tp.partition] = tp.offset
        except Exception as exc:  # no such group: nothing committed
            log.debug("committed offsets of %s: %s", queue, exc)
        if len(self._committed) > MAX_CACHED_QUEUES:
            self._committed.clear()
        self._committed[queue] = (now, out)
        return out

    def queues(self) -> set[str]:
        """Queues that have a consumer group (``<group prefix><queue>``)."""
        at, queues = self._groups
        if time.monotonic() - at < GROUPS_TTL_S:
            return queues
        prefix = self.settings.group_prefix
        found: set[str] = set()
        try:
            res = self._get_admin().list_consumer_groups(request_timeout=10).result(timeout=10)
            for g in res.valid:
                name = g.group_id
                if name.startswith(prefix) and QUEUE_NAME_RE.match(name[len(prefix):]):
                    found.add(name[len(prefix):])
        except Exception as exc:
            log.debug("listing consumer groups: %s", exc)
            found = queues
        self._groups = (time.monotonic(), found)
        return found

    def _get_admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(self.settings.client_config())
        return self._admin
