"""Shared queues' bytes: what a consumer fetches per byte delivered, what the broker writes per message.

Q equally busy queues share a P-partition queue topic (``dispatch="shared"``, a real tracker
worker dispatching). Two measurements of one run:

1. Read amplification (as ``bench.placement amplification`` for partition mode): ``--sample``
   queues are drained one at a time by one consumer each; bytes its readers fetched (the lane
   reader and the reference reader, librdkafka statistics) over the bytes of its own messages
   delivered (key + value + headers). Then the other queues are drained *at once*, one
   consumer each (so consumers share lanes), and measured the same way.
2. Bytes written: after everything is acked and the tracker has settled, every topic is read
   back from where it stood before the first send (the queue, markers, deliveries and dead
   letter topics, the queues' settings, the tracker's changelog and Faust's own topics);
   per topic and kind of record, the records' key + value + header bytes and the bytes the
   read-back consumer received from the broker (batch framing included), over the messages
   sent and their payload bytes.

    python -m bench.placement amplification --dispatch shared [--queues 100] [--partitions 16]
        [--per-queue 2000] [--size 100] [--lanes 32]
"""

from __future__ import annotations

import json
import re
import statistics
import threading
import time

from confluent_kafka import Consumer, TopicPartition

import kmq
from bench.common import payloads, stack
from kmq.kafka import profiles
from kmq.protocol import deliveries as D
from kmq.protocol import marker_codec
from kmq.protocol.placement import queue_partitions

# Statistics are kept raw and parsed once at the end: with 97 consumers of a 256-lane topic,
# parsing every callback (~0.4 MB each) outran Python and queued gigabytes in librdkafka.
STATS_INTERVAL_MS = 1000
DRAIN_S = 300          # the most one consumer (or the concurrent phase) waits for its messages
_NAME = re.compile(r'"name":\s*"([^"]*)"')
SETTLE_S = 3.0         # topics unchanged this long (ticks aside): the tracker is done


def _record_bytes(rec) -> int:
    return len(rec.key() or b"") + len(rec.value() or b"") + sum(
        len(k) + len(v or b"") for k, v in rec.headers() or [])


class _Stats:
    """The latest librdkafka statistics of each client that shares this callback."""

    def __init__(self) -> None:
        self._raw: dict[str, str] = {}

    def config(self) -> dict:
        return {"statistics.interval.ms": STATS_INTERVAL_MS, "stats_cb": self._keep}

    def _keep(self, raw: str) -> None:
        name = _NAME.search(raw, 0, 200)
        self._raw[name.group(1) if name else ""] = raw

    @property
    def latest(self) -> dict[str, dict]:
        return {k: json.loads(v) for k, v in self._raw.items()}

    @staticmethod
    def record_bytes(latest: dict[str, dict]) -> int:
        """Per-partition ``rxbytes`` of every topic (librdkafka counts key + value)."""
        return sum(p["rxbytes"] for s in latest.values() for t in s.get("topics", {}).values()
                   for k, p in t["partitions"].items() if k != "-1")

    @staticmethod
    def by_topic(latest: dict[str, dict]) -> dict[str, dict]:
        """Records and record bytes fetched per topic."""
        out: dict[str, dict] = {}
        for s in latest.values():
            for name, t in s.get("topics", {}).items():
                o = out.setdefault(name, {"records": 0, "record_bytes": 0})
                for k, p in t["partitions"].items():
                    if k != "-1":
                        o["records"] += p["rxmsgs"]
                        o["record_bytes"] += p["rxbytes"]
        return out

    @staticmethod
    def socket_bytes(latest: dict[str, dict]) -> int:
        """Bytes received from the brokers (fetch responses with their framing, metadata)."""
        return sum(b["rxbytes"] for s in latest.values() for b in s.get("brokers", {}).values())


def _one_more_callback(kc) -> None:
    """Poll for a statistics interval and a half: one more callback, with the final counts."""
    end = time.monotonic() + 1.5 * STATS_INTERVAL_MS / 1000
    while (left := end - time.monotonic()) > 0:
        kc.consume(1000, left)


def drain_one(client, queue: str, expect: int, stop_at: float) -> dict:
    """Consume ``expect`` messages of ``queue`` with one shared consumer; its fetched bytes."""
    stats = _Stats()
    got = delivered_bytes = 0
    with client.consumer(queue, visibility_timeout_s=120, max_in_flight=20000,
                         config=stats.config()) as c:
        while got < expect and time.monotonic() < stop_at:
            batch = c.receive_batch(5000, 0.5)
            for m in batch:  # the message as sent (a copy's key is the consumer's id, not the queue)
                rec = m[0]
                delivered_bytes += len(rec.value()) + len(queue) + sum(
                    len(k) + len(v or b"") for k, v in rec.headers() or [])
            batch.ack()
            got += len(batch)
        for kc in (c._source.lanes.current.kc, c._source.refs.kc):  # one more statistics callback each
            if kc is not None:
                _one_more_callback(kc)
        lane_own, lane_other = c._source.lane_bytes()
        moves = c._source.lane_moves
    latest = stats.latest
    by_topic = _Stats.by_topic(latest)
    # A lane left (kmq.consumer.lane_choice) is closed, and its reader's last statistics
    # may not have come: lane bytes are the consumer's own count of what it read there.
    lane_rdkafka = sum(t["record_bytes"] for name, t in by_topic.items() if _is_lane(client.settings, name))
    rec = _Stats.record_bytes(latest) - lane_rdkafka + lane_own + lane_other
    sock = _Stats.socket_bytes(latest)
    return {"queue": queue, "delivered": got, "delivered_bytes": delivered_bytes,
            "fetched_record_bytes": rec, "fetched_socket_bytes": sock, "fetched": by_topic,
            "lane_bytes": {"own": lane_own, "others": lane_other, "librdkafka": lane_rdkafka}, "lane_moves": moves,
            "amplification": rec / max(1, delivered_bytes),
            "amplification_socket": sock / max(1, delivered_bytes)}


def high_watermarks(settings) -> dict[str, dict[int, int]]:
    """Every topic's partitions and their end offsets (Faust's and the tracker's included)."""
    kc = Consumer({**profiles.client_config(settings), "group.id": "bench-bytes-hwm"})
    try:
        out = {}
        for name, t in kc.list_topics(timeout=10).topics.items():
            if name.startswith("__"):
                continue
            out[name] = {p: kc.get_watermark_offsets(TopicPartition(name, p), timeout=10, cached=False)[1]
                         for p in t.partitions}
        return out
    finally:
        kc.close()


def _is_lane(settings, topic: str) -> bool:
    return topic == settings.deliveries_topic or topic.startswith(settings.deliveries_topic + ".")


def _kind(settings, topic: str, rec) -> str:
    """What a record is, for the table of bytes written."""
    if topic == settings.markers_topic:
        try:
            kinds = sorted({type(m).__name__.upper() for m in marker_codec.decode(rec.value())})
        except Exception:
            return "undecodable"
        return "+".join(kinds)
    if _is_lane(settings, topic):
        return "lane header" if (rec.key() or b"").startswith(D.HEADER_KEY_PREFIX) else "lane copy"
    if topic == settings.queue_topic:
        return "queue record"
    return "record"


def bytes_written(settings, since: dict[str, dict[int, int]]) -> dict[str, dict]:
    """Read every topic back from ``since``; records, their bytes and the socket bytes, by kind."""
    out: dict[str, dict] = {}
    for topic, ends in high_watermarks(settings).items():
        start = since.get(topic, {})
        # A partition's start from before the first send (an undercount reads a few more).
        todo = {p: (start.get(p, 0), end) for p, end in ends.items() if end > start.get(p, 0)}
        if not todo:
            continue
        stats = _Stats()
        kc = Consumer({**profiles.client_config(settings), "group.id": "bench-bytes-readback",
                       "enable.auto.commit": False, "enable.partition.eof": True,
                       "fetch.max.bytes": 8 << 20, **stats.config()})
        kc.assign([TopicPartition(topic, p, lo) for p, (lo, _) in todo.items()])
        kinds: dict[str, dict] = {}
        left = set(todo)
        deadline = time.monotonic() + 120
        # To the end of each partition: the embedded broker's ListOffsets may undercount.
        while left and time.monotonic() < deadline:
            for rec in kc.consume(10_000, 0.5):
                if rec.error() is not None:
                    left.discard(rec.partition())  # end of partition
                    continue
                k = kinds.setdefault(_kind(settings, topic, rec), {"records": 0, "bytes": 0})
                k["records"] += 1
                k["bytes"] += _record_bytes(rec)
        _one_more_callback(kc)
        row = {"kinds": kinds, "records": sum(k["records"] for k in kinds.values()),
               "bytes": sum(k["bytes"] for k in kinds.values()),
               "socket_bytes": _Stats.socket_bytes(stats.latest), "complete": not left}
        kc.close()
        name = _lanes_as_one(settings, topic)
        if name in out:  # lanes in several topics (kmq.protocol.lane_layout): one row
            _add_row(out[name], row)
        else:
            out[name] = row
    return out


def _lanes_as_one(settings, topic: str) -> str:
    """The deliveries topics under the first one's name (its ``.N`` siblings are lanes too)."""
    base = settings.deliveries_topic
    return base if topic.startswith(base + ".") and topic[len(base) + 1:].isdigit() else topic


def _add_row(into: dict, row: dict) -> None:
    for kind, k in row["kinds"].items():
        mine = into["kinds"].setdefault(kind, {"records": 0, "bytes": 0})
        mine["records"] += k["records"]
        mine["bytes"] += k["bytes"]
    for key in ("records", "bytes", "socket_bytes"):
        into[key] += row[key]
    into["complete"] = into["complete"] and row["complete"]


def _settle(settings, timeout_s: float = 60.0) -> None:
    """Wait until no topic but the markers (ticks) grew for ``SETTLE_S``."""
    last, since = None, time.monotonic()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = {t: v for t, v in high_watermarks(settings).items() if t != settings.markers_topic}
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= SETTLE_S:
            return
        time.sleep(0.5)


def shared_amplification(args) -> dict:
    lanes = {"deliveries_partitions": args.lanes} if args.lanes else {}
    with stack(queue_partitions=args.partitions, dispatch="shared", compression=args.compression,
               **lanes) as (settings, _t, _b):
        client = kmq.Client(settings=settings)
        queues = [f"tenant{i:03d}" for i in range(args.queues)]
        before = high_watermarks(settings)
        t0 = time.monotonic()
        for _ in range(args.per_queue // 100):  # interleaved, as concurrent producers would
            for q in queues:
                client.send_batch(q, payloads(args.payload, args.size, 100))
        client.flush(300)
        sent = args.per_queue // 100 * 100 * len(queues)
        print(f"sent {sent} in {time.monotonic() - t0:.1f} s", flush=True)
        sharing: dict[int, int] = {}
        for q in queues:
            p = queue_partitions(q, args.partitions)[0]
            sharing[p] = sharing.get(p, 0) + 1
        one_at_a_time = []
        for q in queues[: args.sample]:
            r = drain_one(client, q, args.per_queue, time.monotonic() + DRAIN_S)
            r["queues_on_its_partition"] = sharing[queue_partitions(q, args.partitions)[0]]
            one_at_a_time.append(r)
            print(f"shared {q} alone: {r['amplification']:.2f} (socket {r['amplification_socket']:.2f}), "
                  f"{r['delivered']} delivered", flush=True)
        rest = queues[args.sample:]
        together: list[dict] = []
        t1 = time.monotonic()
        stop_at = t1 + DRAIN_S
        threads = [threading.Thread(target=lambda q=q: together.append(
            drain_one(client, q, args.per_queue, stop_at)), daemon=True) for q in rest]
        for t in threads:
            t.start()
        for t in threads:
            t.join(DRAIN_S + 60)
        drain_s = time.monotonic() - t1
        amps = sorted(r["amplification"] for r in together)
        above = sum(1 for a in amps if a > 1.5)
        moves = sum(r["lane_moves"] for r in together)
        print(f"{len(rest)} at once in {drain_s:.1f} s: median {statistics.median(amps):.2f}, "
              f"max {amps[-1]:.2f}, {above} above 1.5; {moves} lane moves", flush=True)
        _settle(settings)
        written = bytes_written(settings, before)
        delivered = sum(r["delivered"] for r in one_at_a_time + together)
        total = sum(t["bytes"] for t in written.values())
        total_socket = sum(t["socket_bytes"] for t in written.values())
        payload_bytes = sent * args.size
        return {
            "reference_rule": "own: the range and one in N of the queue's records after it (N consumers), of the range and the 256 KiB after it; copy what the index no longer spans; a consumer leaves a lane others fill",
            "queues": args.queues, "partitions": args.partitions, "per_queue": args.per_queue,
            "size": args.size, "payload": args.payload,
            "compression": settings.effective_compression, "sent": sent, "delivered": delivered,
            "deliveries_partitions": settings.deliveries_partitions,
            "lane_topics": settings.lane_layout.topics,
            "queues_per_partition": sharing,
            "one_at_a_time": one_at_a_time,
            "one_at_a_time_median": statistics.median(r["amplification"] for r in one_at_a_time),
            "together": {"consumers": len(rest), "drain_s": round(drain_s, 1),
                         "median": statistics.median(amps), "max": amps[-1], "above_1_5": above,
                         "lane_moves": moves,
                         "median_socket": statistics.median(r["amplification_socket"] for r in together),
                         "runs": together},
            "written": written, "written_bytes": total, "written_socket_bytes": total_socket,
            "written_per_payload_byte": total / payload_bytes,
            "written_socket_per_payload_byte": total_socket / payload_bytes,
        }
