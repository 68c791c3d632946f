"""The numbers of a known workload in the web API, /metrics, the dashboard (a real headless
Chromium) and the kmq commands (`kmq stats`, `send`, `receive`, `dlq`), against one running
worker with auth on (an admin token, two tenants).

One deployment for the module (tests/integration/web_deployment.py). Who may see what:
test_web_access.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

import kmq
from kmq.cli import main
from tests.conftest import wait_for
from tests.integration.browser import browse, parse
from tests.integration.web_deployment import (ADMIN, A, B, C, D, alpha_settled, get, rates_fresh, rows_of,
                                              sends_counted)
from tests.integration.web_deployment import deployment, tokens, workload  # noqa: F401 - the module's fixtures

ROOT = Path(__file__).resolve().parents[2]


def test_queue_list_has_the_numbers_of_the_workload(deployment, workload):
    """The first view comes after the sends: they are counted all the same, at their timestamps."""
    _, t = deployment
    body = wait_for(lambda: sends_counted(alpha_settled(t)), 60, interval_s=0.3, what="the workload's numbers")
    by_name = {r["queue"]: r for r in body["queues"]}
    assert [r["queue"] for r in body["queues"]] == [A, B, D, C]
    assert body["total"] == 4 and body["workers"] == 1 and not body["partial"]
    assert 0 <= by_name[A]["oldest_in_flight_age_s"] < 120 and by_name[A]["tenant"] == "acme"
    assert by_name[B]["depth"] == 5 and by_name[B]["in_flight"] == 0
    assert by_name[B]["oldest_in_flight_age_s"] is None  # docs/web.md: null when nothing is in flight
    assert by_name[D]["depth"] == 1
    g = by_name[C]
    assert (g["depth"], g["in_flight"]) == (0, 0)
    if rates_fresh():  # else the per-minute window may have turned over since the workload began
        assert by_name[B]["sent_per_min"] == 5 and (g["acked_per_min"], g["redelivered_per_min"]) == (1, 1)
        assert g["received_per_min"] == 2 and g["sent_per_min"] == 2  # the send and the redelivered copy
    assert body["totals"]["depth"] == 26 and body["totals"]["in_flight"] == 3
    assert sum(body["history"]["series"]["acked"]) == 7
    assert len(body["history"]["starts"]) == len(body["history"]["series"]["sent"]) == 60


def test_list_is_sorted_and_paginated(deployment, workload):
    _, t = deployment
    wait_for(lambda: alpha_settled(t), 60, what="q-alpha's numbers")
    page1 = rows_of(t, limit=2, offset=0)
    page2 = rows_of(t, limit=2, offset=2)
    assert [r["queue"] for r in page1["queues"]] == [A, B] and page1["total"] == 4
    assert [r["queue"] for r in page2["queues"]] == [D, C]
    by_depth = rows_of(t, sort="depth")
    assert [r["queue"] for r in by_depth["queues"]][:3] == [A, B, D]
    assert [r["queue"] for r in rows_of(t, sort="depth", order="asc")["queues"]][0] == C
    assert get(t.url + "/kmq/api/queues?sort=nonsense", ADMIN)[0] == 400


def test_queue_detail_shows_ranges_with_deadlines_and_delivery_counts_and_dead_letters(deployment, workload):
    _, t = deployment
    wait_for(lambda: alpha_settled(t), 60, what="q-alpha's numbers")
    status, d = get(f"{t.url}/kmq/api/queues/{A}", ADMIN)
    assert status == 200, d
    assert d["queue"] == A and d["depth"] == 20 and d["in_flight"] == 3 and d["scheduled"] == 2
    assert sum(r["pending"] for r in d["in_flight_ranges"]) == 3
    causes = sorted((g["cause"], g["count"]) for r in d["in_flight_ranges"] for g in r["groups"])
    assert causes == [("released", 1), ("timeout", 2)]
    assert all(g["deadline_ms"] > r["started_ms"] for r in d["in_flight_ranges"] for g in r["groups"])
    assert sum(n for r in d["in_flight_ranges"] for k, n in (r["delivery_counts"] or {}).items()
               if k == "1") == 3
    dl = d["dead_letters_detail"]
    assert dl["count"] == 1 and dl["recent"][0]["reason"] == "rejected"
    assert dl["recent"][0]["detail"] == "poison"
    assert d["since_start"]["acked"] == 6 and d["since_start"]["sent"] == 30
    assert d["config"]["visibility_timeout_s"] == 2.0 and d["tenant"] == "acme"
    assert get(f"{t.url}/kmq/api/queues/no-such-queue", ADMIN)[0] == 404


def scrape(t) -> tuple[str, dict[str, float]]:
    """/metrics as text and as {series: value}."""
    status, text = get(t.url + "/metrics", ADMIN)
    assert status == 200, text
    metrics = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            metrics[name] = float(value)
    return text, metrics


def caught_up(scraped: tuple[str, dict[str, float]]) -> tuple[str, dict[str, float]] | None:
    """``scraped`` once it has a lag series for each of the 4 markers partitions, all 0."""
    lags = [v for k, v in scraped[1].items() if k.startswith("kmq_tracker_lag_records{")]
    return scraped if len(lags) == 4 and not any(lags) else None


def test_prometheus_metrics_with_bounded_queue_labels(deployment, workload):
    _, t = deployment
    wait_for(lambda: alpha_settled(t), 60, what="q-alpha's numbers")
    # The tracker's own TICK markers keep coming, so a scrape can fall between a marker's
    # write and its processing: the lag must reach 0, not be 0 in any one scrape.
    text, metrics = wait_for(lambda: caught_up(scrape(t)), 60, interval_s=0.2, what="kmq_tracker_lag_records 0")
    assert metrics['kmq_queue_depth{queue="q-alpha"}'] == 20
    assert metrics['kmq_queue_in_flight{queue="q-alpha"}'] == 3
    assert metrics['kmq_queue_scheduled{queue="q-alpha"}'] == 2
    assert metrics['kmq_queue_dead_letters{queue="q-alpha"}'] == 1
    assert metrics['kmq_queue_messages_total{event="sent",queue="q-alpha"}'] == 30
    assert metrics['kmq_queue_messages_total{event="acked",queue="q-alpha"}'] == 6
    assert metrics['kmq_queue_messages_total{event="dead_lettered",queue="q-alpha"}'] == 1
    # KMQ_METRICS_TOP_QUEUES=2: two queues by name, the rest summed as ~other.
    labels = {m.group(1) for m in re.finditer(r'kmq_queue_depth\{queue="([^"]+)"\}', text)}
    assert len(labels) == 3 and "~other" in labels and "q-alpha" in labels
    depth_sum = sum(v for k, v in metrics.items() if k.startswith("kmq_queue_depth{"))
    assert depth_sum == 26
    assert metrics["kmq_metrics_other_queues"] == 2
    # The age series is there only for labels with messages in flight (docs/web.md).
    ages = {m.group(1) for m in re.finditer(r'kmq_queue_oldest_in_flight_age_seconds\{queue="([^"]+)"\}', text)}
    assert ages == {q for q in labels if metrics[f'kmq_queue_in_flight{{queue="{q}"}}'] > 0} == {"q-alpha"}
    assert {f'kmq_tracker_gc_seconds_total{{generation="{g}"}}' for g in "012"} <= set(metrics)
    assert metrics["kmq_dispatcher_held_bytes"] >= 0  # there (this deployment is in partition mode)


def test_kmq_stats_prints_the_table(deployment, workload):
    s, t = deployment
    wait_for(lambda: alpha_settled(t), 60, what="q-alpha's numbers")
    out = subprocess.run([sys.executable, "-m", "kmq.cli", "stats", "--url", t.url], capture_output=True,
                         text=True, timeout=60, cwd=ROOT, env={**os.environ, "KMQ_TOKEN": ADMIN})
    assert out.returncode == 0, out.stderr
    row = next(line for line in out.stdout.splitlines() if " q-alpha " in line)
    assert re.search(r"q-alpha\s+\S+\s+20\s+\S+\s+3\s+\S+\s+2\s+\S+\s+1\s", row), row
    one = CliRunner().invoke(main, ["stats", A, "--url", t.url, "--token", ADMIN, "--json"])
    assert one.exit_code == 0 and json.loads(one.output)["depth"] == 20
    denied = CliRunner().invoke(main, ["stats", "--url", t.url])
    assert denied.exit_code == 1 and "HTTP 403" in denied.output


def test_kmq_send_receive_and_dlq_commands(deployment, tokens):
    s, t = deployment
    runner = CliRunner()
    common = ["--bootstrap-servers", s.bootstrap_servers]
    env = {"KMQ_QUEUE_TOPIC": s.queue_topic, "KMQ_MARKERS_TOPIC": s.markers_topic, "KMQ_DLQ_TOPIC": s.dlq_topic,
           "KMQ_QUEUES_TOPIC": s.queues_topic, "KMQ_GROUP_PREFIX": s.group_prefix, "KMQ_PROFILE": "embedded",
           "KMQ_APP_ID": s.app_id, "KMQ_MARKERS_PARTITIONS": "4", "KMQ_QUEUE_PARTITIONS": "4",
           "KMQ_DLQ_PARTITIONS": "2", "KMQ_DELIVERIES_TOPIC": s.deliveries_topic, "KMQ_DISPATCH": s.dispatch}
    out = runner.invoke(main, ["send", "c-cli", "one", "two", "three", "-H", "k=v", *common], env=env)
    assert out.exit_code == 0 and "sent 3 messages to c-cli" in out.output, out.output
    # A partition-mode queue: the group join alone takes 3-4 s (measured 3.96-4.02 s on a quiet
    # machine), more than the default --timeout-s 5 leaves on a loaded one. It stops at 3.
    out = runner.invoke(main, ["receive", "c-cli", "--ack", "--max", "3", "--json", "--timeout-s", "120", *common],
                        env=env)
    assert out.exit_code == 0, out.output
    got = [json.loads(line) for line in out.output.splitlines()]
    assert sorted(m["value"] for m in got) == ["one", "three", "two"]
    assert all(m["headers"] == {"k": "v"} and m["delivery_count"] == 1 for m in got)
    # The acks reached the tracker: all three acked, nothing left in flight or waiting (a
    # receive cannot show that quickly: its group join takes longer than a short window).
    def all_three_acked() -> bool:
        status, r = get(f"{t.url}/kmq/api/queues/c-cli", ADMIN)
        return status == 200 and r["depth"] == 0 and r["in_flight"] == 0 and r["since_start"].get("acked") == 3
    wait_for(all_three_acked, 60, what="c-cli's three acks at the tracker")
    # An empty receive says so.
    out = runner.invoke(main, ["receive", "c-cli", "--max", "1", "--timeout-s", "1.5", *common], env=env)
    assert out.exit_code == 0 and "c-cli: 0 messages" in out.output
    # Dead letters: three rejected, listed, redriven as a subprocess (progress bar), purged.
    with kmq.Client(settings=s.replace(token=ADMIN)) as client:
        client.send_batch("c-dead", [b"x", b"y", b"z"])
        client.flush()
        with client.consumer("c-dead", visibility_timeout_s=30) as c:
            msgs = []
            wait_for(lambda: msgs.extend(c.receive_batch(3, timeout_s=0.2)) or len(msgs) >= 3, 30)
            for m in msgs:
                m.reject(reason="bad")
            c.flush()
        wait_for(lambda: len(client.dead_letters("c-dead")) == 3, 30, what="three dead letters")
    denied = runner.invoke(main, ["dlq", "list", "c-dead", *common], env=env)
    assert denied.exit_code == 1 and "requires a token" in denied.output
    out = runner.invoke(main, ["dlq", "list", "c-dead", "--token", ADMIN, *common], env=env)
    assert out.exit_code == 0 and "c-dead: 3 dead letters" in out.output and "rejected: bad" in out.output
    proc = subprocess.run([sys.executable, "-m", "kmq.cli", "dlq", "redrive", "c-dead", "--limit", "2", *common],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, **env, "KMQ_TOKEN": ADMIN})
    assert proc.returncode == 0, proc.stderr
    assert "redrove 2 dead letters to c-dead; 1 remain" in proc.stdout
    assert "2/2" in proc.stderr  # the progress bar
    out = runner.invoke(main, ["dlq", "purge", "c-dead", "--yes", "--token", ADMIN, *common], env=env)
    assert out.exit_code == 0 and "purged 1 dead letter of c-dead" in out.output
    # The tracker's view follows: no dead letters left, the two redriven ones are waiting.
    wait_for(lambda: (lambda r: r["dead_letters"] == 0 and r["depth"] == 2)(
        get(f"{t.url}/kmq/api/queues/c-dead", ADMIN)[1]), 60, what="c-dead's numbers after redrive and purge")


# -- the dashboard in a real headless Chromium ------------------------------------------------

def test_dashboard_shows_the_queues_in_a_real_browser(deployment, tokens, workload, artifacts):
    _, t = deployment
    wait_for(lambda: alpha_settled(t), 60, what="q-alpha's numbers")
    page = parse(browse(f"{t.url}/kmq/ui#token={ADMIN}"))
    assert {A, B, C, D} <= set(page.rows), page.status
    alpha = page.rows[A]
    assert (alpha["depth"], alpha["in_flight"], alpha["scheduled"], alpha["dead_letters"]) == ("20", "3", "2", "1")
    assert page.rows[B]["depth"] == "5"
    if rates_fresh():  # else the per-minute window has turned over since the workload
        assert (alpha["acked_per_min"], alpha["sent_per_min"]) == ("6", "30")
        assert page.rows[C]["redelivered_per_min"] == "1"
    # A tenant's token: its queue only.
    tenant = parse(browse(f"{t.url}/kmq/ui#token={tokens['acme']}"))
    assert set(tenant.rows) == {A} and tenant.rows[A]["depth"] == "20"
    # No token: the page says access is denied and shows no queue.
    anonymous = parse(browse(f"{t.url}/kmq/ui"))
    assert anonymous.rows == {} and "access denied" in anonymous.status
    detail = parse(browse(f"{t.url}/kmq/ui/queue/{A}#token={ADMIN}"))
    assert (detail.fields["depth"], detail.fields["in_flight"], detail.fields["scheduled"]) == ("20", "3", "2")
    assert detail.fields["reason"] == "rejected"
    for name, url in (("dashboard.png", f"{t.url}/kmq/ui#token={ADMIN}"),
                      ("dashboard-queue.png", f"{t.url}/kmq/ui/queue/{A}#token={ADMIN}")):
        browse(url, screenshot=artifacts / name)
        assert (artifacts / name).stat().st_size > 10_000
