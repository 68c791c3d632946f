"""Failover after a crash: time from SIGKILL of one of two group members to the survivor owning all.

Chooses the production session timeout (docs/deployment.md, "Failover and shutdown").
On the embedded broker a join is held about half a session timeout, so Apache Kafka
fails over faster; the ratio between session timeouts is what this shows.

- default: two librdkafka members of one group on a 4-partition topic (one a
  subprocess), heartbeat session/6 (at most 3 s) as the profiles give; the subprocess
  is SIGKILLed and the survivor polls until it is assigned all 4;
- ``--tracker``: two tracker workers (4 markers partitions, one standby replica); one
  is SIGKILLed; time until the survivor's ``/kmq/health`` owns all 4 and is ready.

    python -m bench.failover 6000 10000 15000 45000            # session timeouts (ms)
    python -m bench.failover --tracker 6000 10000 15000 45000
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from kmq.dev.devstack import TrackerProcess
from kmq.dev.embedded import EmbeddedBroker, free_port
from kmq.kafka.admin import ensure_topics
from kmq.settings import Settings

PARTITIONS = 4
MEMBER = r'''
import sys
from confluent_kafka import Consumer
bootstrap, group, session_ms, topic = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": session_ms,
              "heartbeat.interval.ms": max(100, min(3000, session_ms // 6))})
got = []
c.subscribe([topic], on_assign=lambda c, ps: got.append(len(ps)))
while True:
    c.poll(0.1)
    if got:
        print("assigned", got.pop(), flush=True)
'''


def _until(condition, timeout_s: float, what: str, step=lambda: time.sleep(0.1)) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        step()


def group_failover_s(bootstrap: str, session_ms: int) -> float:
    topic, group = f"failover-{session_ms}", f"failover-{session_ms}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the future resolves
    for fut in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        fut.result(10)
    other = subprocess.Popen([sys.executable, "-c", MEMBER, bootstrap, group, str(session_ms), topic],
                             stdout=subprocess.PIPE, text=True)
    assert other.stdout.readline().startswith("assigned")
    owned: list[int] = []
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": session_ms,
                  "heartbeat.interval.ms": max(100, min(3000, session_ms // 6))})
    c.subscribe([topic], on_assign=lambda _, ps: owned.append(len(ps)),
                on_revoke=lambda _, ps: owned.append(0))
    _until(lambda: owned and 0 < owned[-1] < PARTITIONS, 180, "a shared assignment", lambda: c.poll(0.1))
    for _ in range(20):
        c.poll(0.1)  # let the group settle
    start = time.monotonic()
    other.kill()
    other.wait()
    _until(lambda: owned[-1] == PARTITIONS, 180, "the survivor to own all", lambda: c.poll(0.05))
    took = time.monotonic() - start
    c.close()
    return took


def tracker_failover_s(bootstrap: str, session_ms: int) -> float:
    tag = f"failover-{session_ms}"
    base = dict(bootstrap_servers=bootstrap, profile="embedded", app_id=tag,
                queue_topic=f"{tag}.q", markers_topic=f"{tag}.m", dlq_topic=f"{tag}.d",
                queues_topic=f"{tag}.qs", deliveries_topic=f"{tag}.dl", queue_partitions=PARTITIONS,
                markers_partitions=PARTITIONS, dlq_partitions=2, group_prefix=f"{tag}.",
                session_timeout_ms=session_ms, standby_replicas=1)
    first, second = (Settings(**base, data_dir=tempfile.mkdtemp(), web_port=free_port()) for _ in "12")
    ensure_topics(first)
    a = TrackerProcess(first, tempfile.mkstemp(suffix=f"-{tag}-a.log")[1]).start(timeout_s=180)
    b = TrackerProcess(second, tempfile.mkstemp(suffix=f"-{tag}-b.log")[1]).start(timeout_s=180, wait=False)

    def balanced() -> bool:
        ha, hb = a.health(), b.health()
        return bool(ha and hb and ha.get("ready") and hb.get("ready")
                    and len(ha.get("partitions", [])) == len(hb.get("partitions", [])) == PARTITIONS // 2)
    try:
        _until(balanced, 240, "two balanced workers")
        time.sleep(3)  # let the group settle
        start = time.monotonic()
        a.kill()
        b.wait_ready(timeout_s=240, partitions=PARTITIONS)
        return time.monotonic() - start
    finally:
        a.stop()
        b.stop()


def main(argv: list[str]) -> None:
    tracker = argv[:1] == ["--tracker"]
    measure = tracker_failover_s if tracker else group_failover_s
    with EmbeddedBroker() as broker:
        for session_ms in (int(x) for x in argv[tracker:]):
            print(f"session {session_ms} ms: failover {measure(broker.bootstrap_servers, session_ms):.1f} s",
                  flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
