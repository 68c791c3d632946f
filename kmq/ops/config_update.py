"""One writer's change of a queue's configuration, kept against concurrent writers.

Each record replaces the queue's whole configuration, built from the writer's view
(:mod:`kmq.ops.config_merge` says why that lost changes). :func:`write_reconciled`
writes the record, reads back the queue's records written since its base was read, and
writes again on top of the latest when its change or another writer's was written away,
at most ``tries`` times. The base is read with :func:`latest_config`, past the writer's
view: a stale base costs a rewrite, and until then the topic holds a record that undoes
another writer's change. Both reads use a reader of their own, no wait for a view's
follower thread (about 20 ms each on the embedded broker).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from confluent_kafka import Consumer

from kmq.errors import ConfigError
from kmq.kafka import profiles
from kmq.kafka.offsets import read_to_end
from kmq.ops.config_merge import fields_to_restore
from kmq.ops.queues_topic import QueueConfigs
from kmq.ops.queues_writes import write_config
from kmq.protocol.placement import partition_for_key
from kmq.queue_config import DEFAULT_CONFIG, QueueConfig
from kmq.settings import Settings

log = logging.getLogger("kmq.queue_config")

TRIES = 3  # writes per change: each rewrite is one more writer's overlap, rare already
READ_BACK_TIMEOUT_S = 15.0


def write_reconciled(settings: Settings, configs: QueueConfigs, queue: str, base: QueueConfig,
                     mine: QueueConfig, since: tuple[int, int], tries: int = TRIES) -> QueueConfig:
    """Write ``mine`` (``base`` with this writer's changes) as the queue's configuration,
    then keep those changes and the ones of writers it raced; returns the configuration
    the queue's latest record holds, as far as this call read.

    ``base``, ``since``: :func:`latest_config`'s answer.
    Raises :class:`ConfigError` when the changes cannot go on top of another writer's
    (a combination a queue refuses): the latest record, the other writer's, stays.
    """
    written, own = mine, set()
    for _ in range(tries):
        part, offset = write_config(settings, queue, written)
        own.add(offset)
        configs.put_local(queue, written, (part, offset))
        # (Another partition: the topic grew since the view began; only later records count.)
        records = queue_records(settings, queue, part, since[1] if since[0] == part else offset)
        before = [c for o, c in records if o < offset and o not in own and c is not None]
        after = [c for o, c in records if o > offset]
        if after and after[-1] is None:  # deleted after ours: the last writer wins
            return DEFAULT_CONFIG
        latest = after[-1] if after else written
        fix = fields_to_restore(base, mine, before[-1] if before else None,
                                after[-1] if after else None)
        if not fix:
            return latest
        log.info("queue %s: another writer's record overlapped this change: writing %s again",
                 queue, ", ".join(sorted(fix)))
        try:
            written = replace(latest, **fix, updated_at_ms=int(time.time() * 1000))
        except ConfigError as exc:
            raise ConfigError(f"queue {queue!r}: this change conflicts with another writer's, made "
                              f"at the same time ({exc}); the queue's settings are theirs now: "
                              "read them (queue_configs()) and change them again") from exc
    log.warning("queue %s: still overlapped by other writers after %d writes", queue, tries)
    return written


def latest_config(settings: Settings, configs: QueueConfigs,
                  queue: str) -> tuple[QueueConfig, tuple[int, int]]:
    """The queue's configuration as its latest record has it now, read past the view (which
    its follower thread brings up to date only every 0.3-0.5 s), and where it was read to
    (partition, offset): what :func:`write_reconciled` takes as ``base`` and ``since``."""
    part = partition_for_key(queue.encode(), len(configs.partitions))  # producer_config's placement
    records, end = _records(settings, queue, part, configs.applied().get(part, 0))
    if not records:
        return configs.get(queue), (part, end)
    return records[-1][1] or DEFAULT_CONFIG, (part, end)


def queue_records(settings: Settings, queue: str, partition: int,
                  start: int) -> list[tuple[int, QueueConfig | None]]:
    """The queue's records on ``partition`` from ``start`` to the end: (offset, config, or
    None for a tombstone); records no decoder reads are left out (the views ignore them)."""
    return _records(settings, queue, partition, start)[0]


def _records(settings: Settings, queue: str, partition: int,
             start: int) -> tuple[list[tuple[int, QueueConfig | None]], int]:
    """:func:`queue_records`, and where the read ended (at most the partition's end)."""
    key = queue.encode()
    reader = Consumer(profiles.reader_config(settings, f"{settings.app_id}-queue-configs",
                                             fetch_wait_ms=10, eof=True))
    out: list[tuple[int, QueueConfig | None]] = []
    end = start
    try:
        # Short rounds: 0.2 s ones made each read cost 0.2 s, two per configure_queue.
        for offset, rec in read_to_end(reader, settings.queues_topic, partition, start,
                                       READ_BACK_TIMEOUT_S, round_s=0.01):
            end = offset + 1
            if rec.key() == key:
                out.append((offset, _decoded(rec.value())))
    finally:
        reader.close()
    return [(o, c) for o, c in out if c is not False], end


def _decoded(value: bytes | None) -> QueueConfig | None | bool:
    """The record's config, None for a tombstone, False for what no decoder reads (anyone
    may write the topic; the views skip it too)."""
    if value is None:
        return None
    try:
        return QueueConfig.decode(value)
    except Exception:  # noqa: BLE001 - see above
        return False
