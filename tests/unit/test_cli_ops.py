"""The kmq command line without a broker: help, bench pass-through, a broker that is down."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from kmq.cli import main
from tests import http_stub

ROOT = Path(__file__).resolve().parents[2]


def test_every_command_has_help():
    runner = CliRunner()
    for args in (["send", "--help"], ["receive", "--help"], ["stats", "--help"], ["dlq", "--help"],
                 ["dlq", "list", "--help"], ["dlq", "redrive", "--help"], ["dlq", "purge", "--help"],
                 ["queue", "--help"], ["queue", "show", "--help"], ["queue", "set", "--help"],
                 ["queue", "purge", "--help"]):
        out = runner.invoke(main, args)
        assert out.exit_code == 0, (args, out.output)
        assert "Usage: " in out.output


def test_bench_lists_the_harness_and_passes_arguments_through():
    runner = CliRunner()
    out = runner.invoke(main, ["bench"])
    assert out.exit_code == 0 and "throughput" in out.output
    # argparse of bench/throughput.py answers: the arguments reached the harness.
    out = runner.invoke(main, ["bench", "throughput", "--help"])
    assert out.exit_code == 0 and "--messages" in out.output
    out = runner.invoke(main, ["bench", "nonesuch"])
    assert out.exit_code == 2 and "throughput" in out.output


def test_a_broker_that_is_down_is_a_clear_error_not_a_hang():
    runner = CliRunner()
    t0 = time.monotonic()
    out = runner.invoke(main, ["send", "--bootstrap-servers", "127.0.0.1:1", "--connect-timeout-s", "1",
                               "orders", "hello"])
    assert time.monotonic() - t0 < 10
    assert out.exit_code == 1
    assert "127.0.0.1:1" in out.output and "tried for 1." in out.output
    assert "Traceback" not in out.output


def test_a_broker_that_is_down_as_a_subprocess():
    for args in (["send", "orders", "hello"], ["receive", "orders"], ["dlq", "list", "orders"]):
        t0 = time.monotonic()
        out = subprocess.run([sys.executable, "-m", "kmq.cli", *args, "--bootstrap-servers", "127.0.0.1:1",
                              "--connect-timeout-s", "2"], capture_output=True, text=True, timeout=60,
                             cwd=ROOT)
        assert time.monotonic() - t0 < 30
        assert out.returncode == 1, out
        assert out.stderr.startswith("error: no Kafka broker answered at 127.0.0.1:1 (tried for 2."), out.stderr
        assert "Traceback" not in out.stderr


def test_stats_without_a_tracker_names_the_address():
    out = CliRunner().invoke(main, ["stats", "--url", "http://127.0.0.1:1", "--timeout-s", "2"])
    assert out.exit_code == 1
    assert "no tracker web view answered at http://127.0.0.1:1" in out.output


@pytest.mark.parametrize("given", [["--sort", "depth"], ["--limit", "5"], ["--sort", "queue", "--limit", "100"]])
def test_stats_of_one_queue_refuses_the_tables_sort_and_limit_naming_them(given):
    # They were silently ignored: the detail view lists no queues. Refused before any request.
    out = CliRunner().invoke(main, ["stats", "orders", "--url", "http://127.0.0.1:1", *given])
    assert out.exit_code == 2, out.output
    named = [a for a in given if a.startswith("--")]
    assert f"Error: {' and '.join(named)} shape" in out.output and "table of all queues" in out.output
    assert "no tracker web view" not in out.output


def test_routed_views_hash_the_queue_key_like_kmq_placement():
    # The detail view's router lookup (external_topic_key_store) serializes the queue with the markers topic's key
    # serializer and hashes it with the producer's partitioner: that must be
    # murmur2 of the utf-8 queue id, the markers partition kmq writes to.
    code = ("import app.topics as t; from aiokafka.partitioner import DefaultPartitioner as P; "
            "from kmq.protocol.placement import markers_partition as mp; ps=list(range(8)); "
            "qs=['orders','emails','a','queue-%d'*3,'x.y_z~1']; "
            "print(all(P()(t.markers_topic.prepare_key(q, None)[0], ps, ps) == mp(q, 8) for q in qs))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT,
                         env={"PATH": "/usr/bin:/bin", "KMQ_MARKERS_PARTITIONS": "8"})
    assert out.stdout.strip() == "True", out.stderr[-2000:]


def test_stats_waits_for_the_depth_scans_first_pass():
    # The scan starts when somebody looks: the first `kmq stats` after a quiet spell showed
    # every depth as "-" and left out queues only sent to.
    def answer(path, n):  # the depths come on the third ask
        scanned = n >= 2
        row = {"queue": "orders", "depth": 42 if scanned else None, "depth_exact": True}
        return 200, http_stub.queue_list([row], scanned=scanned), "application/json"

    with http_stub.serving(answer) as (url, asked):
        out = CliRunner().invoke(main, ["stats", "--url", url, "--timeout-s", "30"])
    assert out.exit_code == 0, out.output
    assert len(asked) == 3 and "42" in out.output


def test_redrive_error_before_any_move_is_one_line_without_a_progress_bar(monkeypatch):
    import kmq.cli.connect
    monkeypatch.setattr(kmq.cli.connect, "check_broker", lambda settings, timeout_s: None)
    out = CliRunner().invoke(main, ["dlq", "redrive", "bad name!", "--bootstrap-servers", "127.0.0.1:1"])
    assert out.exit_code == 1
    assert out.output.startswith("error: queue='bad name!' is not a valid queue id"), out.output
    assert "redriving" not in out.output and "0/?" not in out.output
