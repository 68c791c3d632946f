"""The markers topic as JSON lines, for reading a chaos run that broke a rule.

Written next to the run's logs only when a run fails, and read by
``bench.markers_diagnosis``: the ACQUIREs, ACKs, BEGINs and TICKs of each markers
partition in log order, with the offsets each covers (masks expanded; CREDITs left out
unless asked for). Beside it the queue topic's records of the run's queues (kmq's headers,
no payload: which copy of a message was written when) and the tracker's changelog as Faust
stored it (what a worker restoring a partition's table read).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Iterator

from confluent_kafka import Consumer

from kmq.kafka.acls import changelog_topic
from kmq.kafka.offsets import read_to_end
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.settings import Settings


def _offsets(start: int, mask: int) -> list[int]:
    out, bit = [], 0
    while mask:
        if mask & 1:
            out.append(start + bit)
        mask >>= 1
        bit += 1
    return out


def describe(marker: M.Marker) -> dict:
    """One marker as a small dict: its kind, queue, range and the offsets its mask names."""
    out: dict = {"k": type(marker).__name__}
    rng = getattr(marker, "range", None)
    if rng is not None:
        out.update(q=rng.queue, qp=rng.partition, s=rng.start, e=rng.end,
                   o=_offsets(rng.start, marker.mask))
    for name in ("epoch", "timeout_ms", "delay_ms", "now_ms", "offset", "queue", "partition"):
        if hasattr(marker, name) and name not in out:
            out[name] = getattr(marker, name)
    return out


def dump_markers(settings: Settings, path: Path, queues: set[str] | None = None,
                 credits: bool = False) -> int:
    """Write every marker of ``settings.markers_topic`` (of ``queues``, if given) to ``path``;
    returns how many lines were written."""
    def lines() -> Iterator[dict]:
        for p, rec in _every_record(settings, settings.markers_topic):
            try:
                got = marker_codec.decode_lenient(rec.value())
            except Exception as exc:  # a dump shows what it cannot read, and goes on
                yield {"p": p, "off": rec.offset(), "error": str(exc)}
                continue
            for m in got.markers:
                if isinstance(m, M.Credit) and not credits:
                    continue
                d = describe(m)
                if queues and d.get("q", d.get("queue")) not in queues and not isinstance(m, (M.Begin, M.Tick)):
                    continue
                yield {"p": p, "off": rec.offset(), "ts": rec.timestamp()[1], **d}
    return _write(path, lines())


def dump_queue_records(settings: Settings, path: Path, queues: set[str]) -> int:
    """Write each record of ``queues`` on the queue topic to ``path``: partition, offset,
    broker timestamp and kmq's headers (which message, which delivery, from which copy),
    never the payload. With the markers dump it says which copy a tracker wrote when."""
    keys = {q.encode() for q in queues}
    return _write(path, ({"p": p, "off": rec.offset(), "ts": rec.timestamp()[1],
                          "q": rec.key().decode(errors="replace"),
                          **{k: (v or b"").decode(errors="replace") for k, v in rec.headers() or ()
                             if k.startswith("kmq.")}}
                         for p, rec in _every_record(settings, settings.queue_topic) if rec.key() in keys))


def dump_changelog(settings: Settings, path: Path) -> int:
    """Write every record of the tracker's changelog to ``path`` as Faust stored it (key and
    value in hex; a null value is a deletion): what a worker restoring a markers partition's
    table read, to compare with what the markers log says it should hold."""
    return _write(path, ({"p": p, "off": rec.offset(), "ts": rec.timestamp()[1], "key": (rec.key() or b"").hex(),
                          "value": _hex(rec.value())}
                         for p, rec in _every_record(settings, changelog_topic(settings))))


def _hex(value: bytes | None) -> str | None:
    return None if value is None else value.hex()


def _every_record(settings: Settings, topic: str) -> Iterator[tuple[int, Any]]:
    """(partition, record) of every record of ``topic``, partition by partition, each read
    to its true end; nothing if the topic does not exist."""
    c = Consumer({**settings.client_config(), "group.id": f"{settings.app_id}-dump",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        meta = c.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return
        for p in sorted(meta.partitions):
            for _, rec in read_to_end(c, topic, p, 0):
                yield p, rec
    finally:
        c.close()


def _write(path: Path, lines: Iterable[dict]) -> int:
    n = 0
    with path.open("w") as out:
        for d in lines:
            out.write(json.dumps(d) + "\n")
            n += 1
    return n
