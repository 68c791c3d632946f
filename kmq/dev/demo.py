"""The demo workload of ``kmq dev``: some messages acked, some timing out and
redelivered, some dead-lettered, on a few queues; returns what happened."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import TopicPartition

from kmq.protocol import envelope
from kmq.client import Client
from kmq.kafka import profiles

QUEUES = ("orders", "emails", "payments")
DEMO_MAX_DELIVERIES = 3  # poison is dead-lettered sooner than at the default 5


@dataclass
class DemoReport:
    sent: Counter = field(default_factory=Counter)
    acked_first_time: Counter = field(default_factory=Counter)
    redelivered_then_acked: Counter = field(default_factory=Counter)
    dead_lettered: Counter = field(default_factory=Counter)
    dead_letter_reasons: Counter = field(default_factory=Counter)
    seconds: float = 0.0

    def lines(self) -> list[str]:
        out = [f"{'queue':<10} {'sent':>5} {'acked 1st':>9} {'redelivered':>11} {'dead-lettered':>13}"]
        for q in QUEUES:
            out.append(f"{q:<10} {self.sent[q]:>5} {self.acked_first_time[q]:>9} "
                       f"{self.redelivered_then_acked[q]:>11} {self.dead_lettered[q]:>13}")
        reasons = ", ".join(f"{r}: {n}" for r, n in sorted(self.dead_letter_reasons.items()))
        out.append(f"dead-letter reasons: {reasons or 'none'}; took {self.seconds:.1f} s")
        return out


def run_demo(client: Client, per_queue: int = 100, visibility_timeout_s: float = 1.5,
             timeout_s: float = 90.0) -> DemoReport:
    """Per queue: 80% acked at once, 15% left to time out (redelivered, then acked),
    5% poison (never acked: dead-lettered after ``DEMO_MAX_DELIVERIES``)."""
    report = DemoReport()
    t0 = time.monotonic()
    kinds: dict[str, str] = {}
    for q in QUEUES:  # a queue setting, so `kmq queue show` and the web view say it too
        client.configure_queue(q, max_deliveries=DEMO_MAX_DELIVERIES)
    for q in QUEUES:
        for i in range(per_queue):
            kind = "poison" if i % 20 == 0 else ("slow" if i % 7 == 0 else "ok")
            msg_id = client.send(q, f"{q} #{i}".encode(), headers={"kind": kind.encode()})
            kinds[msg_id] = kind
            report.sent[q] += 1
    client.flush()
    poison = {i for i, k in kinds.items() if k == "poison"}
    expected_done = {i for i, k in kinds.items() if k != "poison"}
    done: set[str] = set()
    # max_processing_s = the visibility: the demo's unsettled messages time out while held.
    consumers = [client.consumer(q, visibility_timeout_s=visibility_timeout_s, max_in_flight=200,
                                 max_processing_s=visibility_timeout_s)
                 for q in QUEUES]
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for c in consumers:
                for m in c.receive_batch(200, timeout_s=0.05):
                    kind = kinds.get(m.id, "ok")
                    if kind == "poison" or (kind == "slow" and m.delivery_count == 1):
                        continue  # never settled: its visibility times out
                    m.ack()
                    if m.id not in done:
                        done.add(m.id)
                        key = "acked_first_time" if m.delivery_count == 1 else "redelivered_then_acked"
                        getattr(report, key)[m.queue] += 1
            dead = _dead_letters(client, poison)
            if done >= expected_done and len(dead) >= len(poison):
                break
    finally:
        for c in consumers:
            c.close()
    for _, (queue, reason) in _dead_letters(client, poison).items():
        report.dead_lettered[queue] += 1
        report.dead_letter_reasons[reason] += 1
    report.seconds = time.monotonic() - t0
    return report


def _dead_letters(client: Client, ids: set[str]) -> dict[str, tuple[str, str]]:
    """Dead-letter records among ``ids``: id -> (queue, reason)."""
    s = client.settings
    reader = KafkaConsumer(profiles.reader_config(s, "kmq-demo-dlq-reader", fetch_wait_ms=50, eof=True))
    try:
        parts = client.partition_count(s.dlq_topic)
        reader.assign([TopicPartition(s.dlq_topic, p, 0) for p in range(parts)])
        found: dict[str, tuple[str, str]] = {}
        eof: set[int] = set()
        deadline = time.monotonic() + 5
        while len(eof) < parts and time.monotonic() < deadline:
            for rec in reader.consume(500, 0.1):
                if rec.error() is not None:
                    eof.add(rec.partition())
                    continue
                ours, _ = envelope.split(rec.headers())
                msg_id = ours.get(envelope.ID, b"").decode()
                if msg_id in ids:
                    found[msg_id] = ((rec.key() or b"").decode(),
                                     ours.get(envelope.DLQ_REASON, b"").decode())
        return found
    finally:
        reader.close()
