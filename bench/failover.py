"""Group failover: time from a SIGKILLed group member to the survivor owning all partitions.

Two librdkafka members of one group on a 4-partition topic (one a subprocess), the
profile's heartbeat (session/6, at most 3 s); the subprocess is SIGKILLed and the
survivor polls until it is assigned all 4. Chooses the production session timeout
(docs/deployment.md, "Failover and shutdown"). On the embedded broker a join is held
about half a session timeout, so Apache Kafka fails over faster.

    python -m bench.failover 6000 10000 15000 45000     # session timeouts (ms)
"""
import subprocess, sys, time, json
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic
from kmq.dev.embedded import EmbeddedBroker

MEMBER = r'''
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "session.timeout.ms": int(sys.argv[3]),
              "heartbeat.interval.ms": max(100, min(3000, int(sys.argv[3]) // 6)), "max.poll.interval.ms": 300000})
got = []
c.subscribe([sys.argv[4]], on_assign=lambda c, ps: got.append(len(ps)))
while True:
    c.poll(0.1)
    if got: print("assigned", got[-1], flush=True); got.clear()
'''
def run(bs, session_ms):
    topic = f"t{session_ms}"; group = f"g{session_ms}"
    a = AdminClient({"bootstrap.servers": bs})
    for f in a.create_topics([NewTopic(topic, 4, 1)]).values(): f.result(10)
    pa = subprocess.Popen([sys.executable, "-c", MEMBER, bs, group, str(session_ms), topic], stdout=subprocess.PIPE, text=True)
    assert pa.stdout.readline().startswith("assigned")
    parts = []
    b = Consumer({"bootstrap.servers": bs, "group.id": group, "session.timeout.ms": session_ms,
                  "heartbeat.interval.ms": max(100, min(3000, session_ms // 6)), "max.poll.interval.ms": 300000})
    b.subscribe([topic], on_assign=lambda c, ps: parts.append(len(ps)), on_revoke=lambda c, ps: parts.append(0))
    deadline = time.monotonic() + 180
    while not (parts and 0 < parts[-1] < 4) and time.monotonic() < deadline:
        b.poll(0.1)
    assert parts and 0 < parts[-1] < 4, parts
    for _ in range(20): b.poll(0.1)  # settled
    t0 = time.monotonic(); pa.kill(); pa.wait()
    while not (parts and parts[-1] == 4) and time.monotonic() < deadline:
        b.poll(0.05)
    dt = time.monotonic() - t0
    b.close()
    return dt

with EmbeddedBroker() as br:
    out = {}
    for ms in [int(x) for x in sys.argv[1:]]:
        out[ms] = round(run(br.bootstrap_servers, ms), 1)
        print(ms, out[ms], flush=True)
    print(json.dumps(out))

