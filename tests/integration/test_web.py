"""The web API, metrics, dashboard and the kmq commands against one running worker with a
known workload, auth on (an admin token, two tenants).

One deployment for the module (own topics and queues topic, so its ``!auth``
record touches no other test's deployment).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import time
import uuid
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

import kmq
from kmq.cli import main
from kmq.dev.devstack import TrackerProcess
from tests.conftest import wait_for

ADMIN = "admin-token-for-tests-0123456789"
ROOT = Path(__file__).resolve().parents[2]
A, B, C, D = "q-alpha", "q-beta", "q-gamma", "q-delta"


def get(url: str, token: str | None = None) -> tuple[int, dict | str]:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            body = r.read().decode()
            status = r.status
    except urllib.error.HTTPError as e:
        body, status = e.read().decode(), e.code
    try:
        return status, json.loads(body)
    except ValueError:
        return status, body


@pytest.fixture(scope="module")
def deployment(make_settings, artifacts):
    # Partition mode: the numbers below count no shared consumer's read-ahead.
    s = make_settings(queues_topic=f"web-{uuid.uuid4().hex[:8]}.queues", auth="on", admin_token=ADMIN,
                      metrics_top_queues=2, stats_refresh_ms=300, dispatch="partition",
                      tracker_gc_threshold=20_000)  # not the default: the health view shows it applied
    t = TrackerProcess(s, artifacts / "tracker-web.log").start(timeout_s=120)
    yield s, t
    t.stop()


@pytest.fixture(scope="module")
def tokens(deployment):
    s, _ = deployment
    with kmq.Client(settings=s.replace(token=ADMIN)) as admin:
        acme, globex = admin.create_tenant("acme"), admin.create_tenant("globex")
        admin.configure_queue(A, tenant="acme")
        admin.configure_queue(B, tenant="globex")
    return {"acme": acme, "globex": globex}


@pytest.fixture(scope="module")
def workload(deployment, tokens):
    """q-alpha: 30 sent, 10 received (6 acked, 1 rejected, 1 released for later, 2 open), 2 delayed;
    q-beta: 5 waiting; q-gamma: 1 redelivered once, then acked; q-delta: 1 waiting."""
    s, t = deployment
    # Nobody looks before the sends (the scan starts with the first view, after them): sends
    # are counted at their timestamps all the same. They were counted only as "appended since
    # the previous pass", so the dashboard opened after ./scripts/dev's demo showed sent/min 0.
    WORKLOAD_STARTED_AT.append(time.time())
    client = kmq.Client(settings=s.replace(token=ADMIN))
    client.send_batch(A, [b"a%d" % i for i in range(30)])
    client.send(A, b"later-1", delay_s=600)
    client.send(A, b"later-2", delay_s=600)
    client.send_batch(B, [b"b"] * 5)
    client.send(C, b"slow")
    client.send(D, b"d")
    client.flush()
    # The two open messages must stay in flight for the whole module: with 60 s, a loaded
    # machine reached the dashboard test after they had come back (depth 22, in flight 1).
    alpha = client.consumer(A, visibility_timeout_s=3600, max_in_flight=10, batch_size=10)
    got = []
    wait_for(lambda: got.extend(alpha.receive_batch(10 - len(got), timeout_s=0.2)) or len(got) >= 10, 30,
             what="10 messages of q-alpha")
    for m in got[:6]:
        m.ack()
    got[6].reject(reason="poison")
    got[7].release(delay_s=600)
    alpha.flush()
    with client.consumer(C, visibility_timeout_s=1) as gamma:
        first = wait_for(lambda: gamma.receive(0.2), 30, what="q-gamma")
        again = wait_for(lambda: gamma.receive(0.2), 30, what="q-gamma redelivered")
        assert again.delivery_count == 2 and first.id == again.id
        again.ack()
        gamma.flush()
    yield client
    alpha.close()
    client.close()


# Per-minute figures count an event for 50 to 60 s (10 s buckets, epoch-aligned): they are
# asserted only while the workload's first event is surely in the window, measured from before
# it began (measured from its end, a slow workload let its sends leave the window while the
# figures were still asserted). The 10-minute history and the totals are asserted always.
WORKLOAD_STARTED_AT: list[float] = []
RATES_CERTAIN_S = 45
SENT_IN_WORKLOAD = 30 + 5 + 2 + 1  # q-alpha, q-beta, q-gamma (its send, its redelivered copy), q-delta


def rates_fresh() -> bool:
    return bool(WORKLOAD_STARTED_AT) and time.time() - WORKLOAD_STARTED_AT[-1] < RATES_CERTAIN_S


def rows_of(t, token=ADMIN, **params) -> dict:
    from urllib.parse import urlencode
    status, body = get(t.url + "/kmq/api/queues?" + urlencode({"prefix": "q-", **params}), token)
    assert status == 200, body
    return body


EXPECTED_ALPHA = {"depth": 20, "depth_exact": True, "in_flight": 3, "scheduled": 2, "dead_letters": 1}
EXPECTED_ALPHA_RATES = {"sent_per_min": 30, "received_per_min": 10, "acked_per_min": 6, "rejected_per_min": 1,
                        "released_per_min": 1, "dead_lettered_per_min": 1, "redelivered_per_min": 0}
EXPECTED_GAMMA_RATES = {"redelivered_per_min": 1, "acked_per_min": 1, "sent_per_min": 2, "received_per_min": 2}


def alpha_settled(t) -> dict | None:
    body = rows_of(t)
    row = next((r for r in body["queues"] if r["queue"] == A), None)
    gamma = next((r for r in body["queues"] if r["queue"] == C), None)
    if not (row and gamma and all(row[k] == v for k, v in EXPECTED_ALPHA.items())
            and (gamma["in_flight"], gamma["depth"]) == (0, 0)):
        return None
    if rates_fresh() and not (all(row[k] == v for k, v in EXPECTED_ALPHA_RATES.items())
                              and all(gamma[k] == v for k, v in EXPECTED_GAMMA_RATES.items())):
        return None  # ("sent" comes from the periodic queue-topic scan: it may trail the rest)
    return body


def sends_counted(body: dict | None) -> dict | None:
    """``body`` once the history (10 minutes: certain here) counts every send of the workload."""
    return body if body and sum(body["history"]["series"]["sent"]) == SENT_IN_WORKLOAD else None


def test_queue_list_has_the_numbers_of_the_workload(deployment, workload):
    """The first view comes after the sends: they are counted all the same, at their timestamps."""
    _, t = deployment
    body = wait_for(lambda: sends_counted(alpha_settled(t)), 60, interval_s=0.3, what="the workload's numbers")
    by_name = {r["queue"]: r for r in body["queues"]}
    assert [r["queue"] for r in body["queues"]] == [A, B, D, C]
    assert body["total"] == 4 and body["workers"] == 1 and not body["partial"]
    assert 0 <= by_name[A]["oldest_in_flight_age_s"] < 120 and by_name[A]["tenant"] == "acme"
    assert by_name[B]["depth"] == 5 and by_name[B]["in_flight"] == 0
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


def test_auth_tenants_see_only_their_queues_and_foreign_ones_look_missing(deployment, tokens, workload):
    _, t = deployment
    wait_for(lambda: alpha_settled(t), 60, what="q-alpha's numbers")
    acme = rows_of(t, token=tokens["acme"])
    assert [r["queue"] for r in acme["queues"]] == [A] and acme["total"] == 1
    assert acme["totals"]["depth"] == 20  # no other tenant's counts in the totals
    assert set(json.dumps(acme)) and B not in json.dumps(acme) and C not in json.dumps(acme)
    assert [r["queue"] for r in rows_of(t, token=tokens["globex"])["queues"]] == [B]
    assert get(f"{t.url}/kmq/api/queues/{A}", tokens["acme"])[0] == 200
    foreign = get(f"{t.url}/kmq/api/queues/{B}", tokens["acme"])
    missing = get(f"{t.url}/kmq/api/queues/q-nothing", tokens["acme"])
    assert foreign[0] == missing[0] == 403
    assert foreign[1] == json.loads(json.dumps(missing[1]).replace("q-nothing", B))
    for token in (None, "not-a-token"):
        assert get(t.url + "/kmq/api/queues", token)[0] == 403
        assert get(f"{t.url}/kmq/api/queues/{A}", token)[0] == 403
        assert get(t.url + "/metrics", token)[0] == 403
    assert get(t.url + "/metrics", tokens["acme"])[0] == 403  # metrics name every queue: admin only
    assert get(t.url + "/kmq/stats", tokens["acme"])[0] == 403
    status, health = get(t.url + "/kmq/health")
    assert status == 200 and health["partitions"] == [0, 1, 2, 3] and health["ready"] and health["waiting_for"] == []
    assert health["gc"]["threshold"][0] == 20_000 and len(health["gc"]["collections"]) == 3
    assert get(t.url + "/kmq/ready")[0] == 200


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

def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None and os.geteuid() == 0:  # a fresh CI machine: Debian's package
        subprocess.run(["apt-get", "install", "-y", "-q", "chromium"], check=False, timeout=900,
                       capture_output=True)
        path = shutil.which("chromium")
    assert path, "Debian's chromium is needed for the dashboard test: apt-get install -y chromium"
    return path


def browse(url: str, *, screenshot: Path | None = None, budget_ms: int = 8000) -> str:
    with tempfile.TemporaryDirectory(prefix="kmq-chromium-") as profile:
        args = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}", "--window-size=1400,1000"]
        args += [f"--screenshot={screenshot}"] if screenshot else ["--dump-dom"]
        out = subprocess.run([*args, url], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


class Cells(HTMLParser):
    """``tr[data-queue]`` -> {data-field: text} and card values, from a dumped DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, dict[str, str]] = {}
        self.fields: dict[str, str] = {}
        self._row: str | None = None
        self._field: str | None = None
        self.status = ""
        self._in_status = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and "data-queue" in a:
            self._row = a["data-queue"]
            self.rows[self._row] = {}
        if "data-field" in a:
            self._field = a["data-field"]
        if a.get("id") == "status":
            self._in_status = True

    def handle_data(self, data):
        if self._field is not None:
            target = self.rows[self._row] if self._row is not None else self.fields
            target[self._field] = target.get(self._field, "") + data
        if self._in_status:
            self.status += data

    def handle_endtag(self, tag):
        if tag in ("td", "b"):
            self._field = None
        if tag == "tr":
            self._row = None
        if tag == "div":
            self._in_status = False


def parse(dom: str) -> Cells:
    p = Cells()
    p.feed(dom)
    return p


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


def test_fausts_own_table_and_router_endpoints_are_not_served(deployment, workload):
    """They answered without any token: /table/tracker/<key>/ gave raw entries (delayed sends'
    payloads), /router/ the partition map."""
    _, t = deployment
    for path in ("/table/tracker/", "/router/", "/graph/"):
        status, _body = get(t.url + path)
        assert status == 404, f"{path} answered {status}"
    assert get(t.url + "/kmq/api/queues", ADMIN)[0] == 200  # kmq's own views still are


def test_a_tenant_is_created_once_then_rotated_or_revoked(deployment):
    s, t = deployment
    name = f"initech-{uuid.uuid4().hex[:6]}"
    queue = f"q-{name}"
    with kmq.Client(settings=s.replace(token=ADMIN)) as admin:
        first = admin.create_tenant(name)
        admin.configure_queue(queue, tenant=name)
        with pytest.raises(kmq.ConfigError, match="rotate_tenant_token"):
            admin.create_tenant(name)  # it silently replaced the token before
        # The tracker follows the queues topic: the token works once it has the record.
        wait_for(lambda: get(f"{t.url}/kmq/api/queues/{queue}", first)[0] == 200, 30, what="the first token")
        second = admin.rotate_tenant_token(name)
        assert second != first
        wait_for(lambda: get(f"{t.url}/kmq/api/queues/{queue}", first)[0] in (401, 403), 30,
                 what="the old token refused")
        assert get(f"{t.url}/kmq/api/queues/{queue}", second)[0] == 200
        admin.revoke_tenant(name)
        wait_for(lambda: get(f"{t.url}/kmq/api/queues/{queue}", second)[0] in (401, 403), 30,
                 what="the revoked token refused")
        assert get(f"{t.url}/kmq/api/queues/{queue}", ADMIN)[0] == 200
        with pytest.raises(kmq.ConfigError, match="no tenant"):
            admin.rotate_tenant_token(name)


def test_a_forged_auth_record_makes_nobody_admin_on_the_tracker(deployment):
    """The tracker trusted the queues topic's `!auth` record before its own KMQ_ADMIN_TOKEN:
    anyone allowed to write that topic could make their own token admin."""
    from confluent_kafka import Producer

    from kmq.ops.tenancy import AUTH_KEY, encode_auth
    from kmq.ops.queues_writes import publish_auth

    s, t = deployment
    forged = "f" * 32
    raw = Producer(s.client_config())
    raw.produce(s.queues_topic, encode_auth(forged), AUTH_KEY)
    assert raw.flush(30) == 0
    try:
        # A tenant created after the forged record: once the tracker knows it, it read past it.
        probe = Tenant_token(s, f"probe-{uuid.uuid4().hex[:6]}")
        wait_for(lambda: get(f"{t.url}/kmq/api/queues?prefix=zzz", probe)[0] == 200, 30,
                 what="the tracker past the forged record")
        assert get(f"{t.url}/kmq/api/queues", forged)[0] in (401, 403)
        assert get(f"{t.url}/kmq/api/queues", ADMIN)[0] == 200
    finally:
        publish_auth(s)  # the deployment's own record again, for the SDK processes' checks


def Tenant_token(s, name: str) -> str:
    """A tenant written straight to the queues topic (the SDK now trusts the forged admin hash),
    signed with the admin token as the tracker requires."""
    from kmq.ops.control_sig import sign_tenant
    from kmq.ops.tenancy import Tenant, hash_token, new_token
    from kmq.ops.queues_writes import write_tenant
    token = new_token()
    digest = hash_token(token)
    write_tenant(s, Tenant(name, digest, sign_tenant(ADMIN, name, digest)))
    return token


def test_forged_tenant_records_and_queue_tenants_grant_nothing_on_the_tracker(deployment, tokens):
    """Whoever may write the queues topic (a tenant that configures its own queues) could add a
    tenant with a token of its own, or name itself the tenant of another tenant's queue: the
    tracker's views granted both. Only what the admin signed counts now."""
    from confluent_kafka import Producer

    from kmq.ops.tenancy import Tenant, hash_token, new_token
    from kmq.queue_config import QueueConfig

    s, t = deployment
    queue = f"z-forged-{uuid.uuid4().hex[:6]}"
    with kmq.Client(settings=s.replace(token=ADMIN)) as admin:
        admin.configure_queue(queue, tenant="globex")
    wait_for(lambda: get(f"{t.url}/kmq/api/queues/{queue}", tokens["globex"])[0] == 200, 30,
             what="globex's queue")
    mallory = new_token()
    raw = Producer(s.client_config())
    raw.produce(s.queues_topic, Tenant("mallory", hash_token(mallory)).encode(), b"!tenant/mallory")
    raw.produce(s.queues_topic, QueueConfig(tenant="acme").encode(), queue.encode())
    assert raw.flush(30) == 0
    probe = Tenant_token(s, f"probe-{uuid.uuid4().hex[:6]}")  # signed, after the forged records
    wait_for(lambda: get(f"{t.url}/kmq/api/queues?prefix=zzz", probe)[0] == 200, 30,
             what="the tracker past the forged records")
    assert get(f"{t.url}/kmq/api/queues", mallory)[0] == 403
    assert get(f"{t.url}/kmq/api/queues/{queue}", tokens["acme"])[0] == 403
    assert queue not in json.dumps(rows_of(t, token=tokens["acme"], prefix="z-"))
    # The forged setting replaced globex's (the topic keeps the newest): admin only until reassigned.
    assert get(f"{t.url}/kmq/api/queues/{queue}", tokens["globex"])[0] == 403
    assert get(f"{t.url}/kmq/api/queues/{queue}", ADMIN)[0] == 200


def test_debug_views_are_admin_only(deployment):
    """/kmq/debug/state decoded every entry for anyone who asked, on the event loop."""
    _, t = deployment
    for path in ("/kmq/debug/state", "/kmq/debug/ticks"):
        assert get(t.url + path)[0] == 403
        status, body = get(t.url + path, ADMIN)
        assert status == 200 and isinstance(body, dict)
