"""The README's main job and the tracker's commands, run as users run them."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from kmq.kafka.admin import topic_partition_counts
from kmq.dev.devstack import service_root, settings_env
from tests.conftest import wait_for

ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is gone for our purposes.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_kmq_dev_runs_the_demo_and_reports_what_happened():
    out = subprocess.run([sys.executable, "-m", "kmq.cli", "dev", "--exit-after-demo", "--web-port", "0"],
                         capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    assert "web view   http://127.0.0.1:" in text
    rows = {m.group(1): list(map(int, m.groups()[1:])) for m in
            re.finditer(r"^\s+(orders|emails|payments)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$", text, re.M)}
    assert set(rows) == {"orders", "emails", "payments"}, text
    for sent, acked, redelivered, dead in rows.values():
        assert sent == 100 and acked > 0 and redelivered > 0 and dead > 0
        assert acked + redelivered + dead == sent
    assert "max-deliveries" in text and text.rstrip().endswith("stopped")


def test_ctrl_c_stops_everything_kmq_dev_started():
    p = subprocess.Popen([sys.executable, "-m", "kmq.cli", "dev", "--no-demo", "--web-port", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    lines: list[str] = []
    try:
        wait_for(lambda: lines.append(p.stdout.readline()) or "running;" in lines[-1], 180,
                 what="kmq dev to be running")
        text = "".join(lines)
        broker_pid = int(re.search(r"broker .*pid (\d+)", text).group(1))
        tracker_pid = int(re.search(r"tracker .*pid (\d+)", text).group(1))
        assert _alive(broker_pid) and _alive(tracker_pid)
        # The env line it prints is all a client needs, kmq stats too (its tracker on port 0's pick).
        env_line = re.search(r"^env\s+export (.*)$", text, re.M).group(1).split()
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("KMQ_")},
               **dict(kv.split("=", 1) for kv in env_line)}
        stats = subprocess.run([sys.executable, "-m", "kmq.cli", "stats", "--json"], env=env, cwd=ROOT,
                               capture_output=True, text=True, timeout=60)
        assert stats.returncode == 0 and "queues" in json.loads(stats.stdout), stats.stderr[-2000:]
        p.send_signal(signal.SIGINT)
        p.wait(60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0
    wait_for(lambda: not _alive(broker_pid) and not _alive(tracker_pid), 30,
             what="broker and tracker to exit")


def test_faust_create_topics_creates_the_three_topics(make_settings):
    s = make_settings()
    fresh = s.replace(queue_topic=s.queue_topic + "-new", markers_topic=s.markers_topic + "-new",
                      dlq_topic=s.dlq_topic + "-new", dlq_partitions=3,
                      deliveries_topic=s.deliveries_topic + "-new", deliveries_partitions=40)
    env = {**os.environ, **settings_env(fresh)}
    out = subprocess.run([sys.executable, "-m", "faust", "-A", "app", "create-topics"], env=env,
                         cwd=service_root(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    counts = topic_partition_counts(fresh)
    assert counts[fresh.queue_topic] == 4 and counts[fresh.markers_topic] == 4
    assert counts[fresh.dlq_topic] == 3
    # 40 lanes, 16 a topic on the embedded broker: three topics of 16 (kmq.protocol.lane_layout)
    lanes = [fresh.deliveries_topic, f"{fresh.deliveries_topic}.1", f"{fresh.deliveries_topic}.2"]
    assert [counts.get(t) for t in lanes] == [16, 16, 16] and f"{fresh.deliveries_topic}.3" not in counts
    assert "(created)" in out.stdout + out.stderr
    assert "3 deliveries topics of 16 partitions, 48 lanes (created)" in out.stdout + out.stderr
    again = subprocess.run([sys.executable, "-m", "faust", "-A", "app", "create-topics"], env=env,
                           cwd=service_root(), capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "(exists)" in again.stdout + again.stderr
    # The settings disagree with an existing topic: one line naming the variable, no traceback.
    env["KMQ_DLQ_PARTITIONS"] = "2"
    bad = subprocess.run([sys.executable, "-m", "faust", "-A", "app", "create-topics"], env=env,
                         cwd=service_root(), capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1
    assert f"error: topic {fresh.dlq_topic} has 3 partitions but KMQ_DLQ_PARTITIONS=2: set KMQ_DLQ_PARTITIONS=3" \
        in bad.stderr and "Traceback" not in bad.stderr, bad.stderr[-2000:]
