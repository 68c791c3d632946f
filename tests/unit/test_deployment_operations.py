"""The deployment operated over days (issue 16): the brokers pass the workers' start-up checks,
workers get time to leave their group before a SIGKILL, and docs/deployment.md's retention
relations and README.md's abandoned-transaction hold state the code's defaults.

The files are parsed as Docker would read them (tests/unit/deployment_files.py).
"""

from __future__ import annotations

import json
import re

from kmq.settings import Settings
from tests.unit.deployment_files import ROOT, brokers, dockerfile, env_of, worker_settings, workers
from tests.unit.deployment_files import compose, services  # noqa: F401 - the module's fixtures


# -- operating over days (issue 16) ---------------------------------------------------


def broker_configs(service: dict) -> dict[str, str]:
    """The apache/kafka image's env-to-config mapping: KAFKA_OFFSETS_RETENTION_MINUTES -> offsets.retention.minutes."""
    return {k[len("KAFKA_"):].lower().replace("_", "."): v
            for k, v in env_of(service).items() if k.startswith("KAFKA_")}


def test_the_brokers_pass_the_workers_start_up_checks(services):
    from kmq.kafka.broker_checks import check_broker

    for broker in brokers(services).values():
        configs = broker_configs(broker)
        assert "offsets.retention.minutes" in configs and "transaction.max.timeout.ms" in configs
        for worker in workers(services).values():
            assert check_broker(worker_settings(worker), configs) == []


def duration_s(text: str) -> float:
    """Compose durations as used here: ``100s``, ``2m``, ``1m30s``."""
    parts = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", text)
    assert parts and text, text
    return int(parts.group(1) or 0) * 60 + int(parts.group(2) or 0)


def test_workers_get_time_to_leave_their_group_before_a_sigkill(services):
    import mode

    # The redeliverer's flush on stop (agents/redeliver.py, _flush's default timeout).
    source = (ROOT / "agents" / "redeliver.py").read_text()
    (flush_s,) = re.findall(r"def _flush\(self, producer: Producer, timeout_s: float = ([\d.]+)\)", source)
    needed_s = mode.Service.shutdown_timeout + float(flush_s)
    for name, service in workers(services).items():
        assert duration_s(service["stop_grace_period"]) >= needed_s, f"{name}: stop_grace_period"
        assert "init" not in service, f"{name}: the image has its init; a second one would be nested"
    # The image runs faust under an init process that forwards SIGTERM (to the process group).
    (entrypoint,) = [json.loads(a) for w, a in dockerfile() if w == "ENTRYPOINT"]
    assert entrypoint[0].endswith("/tini") and "--" in entrypoint
    assert any(w == "RUN" and "install" in a and " tini" in a for w, a in dockerfile())


def retention_rows() -> dict[str, str]:
    """docs/deployment.md's retention relations: the 'what' cell -> the 'default (compose)' cell."""
    text = (ROOT / "docs" / "deployment.md").read_text()
    section = text.split("## Retention relations")[1].split("\n## ")[0]
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in section.splitlines()
            if ln.startswith("| ") and not ln.startswith("| ---")]
    return {cells[0].split(" (")[0]: cells[1] for cells in rows[1:]}


def days(ms: float) -> str:
    n = ms / 86_400_000
    return f"{n:g} day" + ("" if n == 1 else "s")


def test_the_retention_relations_table_states_the_codes_defaults(services):
    """One table in deployment.md relates queue, markers, offsets, changelog tombstones and
    delays (up to 7 days); its defaults are the code's and the compose file's."""
    from kmq.consumer.marker_writer import OPEN_TRANSACTION_LIMIT_MS
    from kmq.kafka import broker_checks as B
    from kmq.protocol.limits import MAX_TIMEOUT_MS
    from kmq.setting_checks import MAX_PROCESSING_S

    s, rows = Settings(), retention_rows()
    (broker, *_) = brokers(services).values()
    compose_offsets_ms = int(broker_configs(broker)["offsets.retention.minutes"]) * 60_000
    expected = {
        "longest delay": [days(s.max_delay_s * 1000)],
        "visibility timeout": [f"{s.visibility_timeout_s:g} s", f"<= {MAX_TIMEOUT_MS // 3_600_000} h"],
        "longest processing": [f"{s.max_processing_s:g} s", f"<= {days(MAX_PROCESSING_S * 1000)}"],
        "queue retention": [days(s.queue_retention_ms)],
        "group offsets retention": [f"Kafka {days(B.KAFKA_OFFSETS_RETENTION_MINUTES * 60_000)}",
                                    f"compose {days(compose_offsets_ms)}"],
        "markers retention": [days(s.markers_retention_ms)],
        "changelog tombstones": ["kmq: markers retention"],
        "deliveries retention": [days(s.deliveries_retention_ms)],
        "dead letters": [days(s.dlq_retention_ms)],
        "transactions": [f"{s.delivery_timeout_ms // 1000} s", f"{OPEN_TRANSACTION_LIMIT_MS // 1000} s"],
    }
    assert set(expected) <= set(rows), f"rows missing: {set(expected) - set(rows)}"
    for what, values in expected.items():
        for value in values:
            assert value in rows[what], f"deployment.md, {what}: {rows[what]!r} should say {value!r}"
    assert B.changelog_delete_retention_ms(s) == s.markers_retention_ms


def test_the_docs_say_how_long_an_abandoned_transaction_holds_readers():
    """Its timeout, then the broker's next abort check: about 20 s for a consumer's
    transactional STARTs, not the 10 s of the timeout alone."""
    from kmq.consumer.marker_writer import OPEN_TRANSACTION_LIMIT_MS

    kafka_abort_check_ms = 10_000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    hold_s = (OPEN_TRANSACTION_LIMIT_MS + kafka_abort_check_ms) // 1000
    for doc in ("README.md", "docs/deployment.md"):
        assert f"about {hold_s} s" in " ".join((ROOT / doc).read_text().split()), doc
