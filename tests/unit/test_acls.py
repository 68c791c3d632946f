"""The ACL checklist (kmq.kafka.acls) covers every name the code uses, and the docs carry it.

Given the source of each role's modules, every ``group.id`` and ``transactional.id``
they build and every kmq topic they name must be granted to that role; the
docs' checklist (and security.md's kafka-acls.sh commands) must be what ``kmq acls --update``
renders today, and the commands must create exactly the checklist's grants.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest

from kmq.kafka import acls
from kmq.protocol.markers import Marker
from kmq.queue_config import QueueConfig
from kmq.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
S = Settings(app_id="app-x", group_prefix="pfx.")

# Which roles run each module: every name in it must be granted to each of them, except in
# kmq/client.py, whose methods each role uses a part of (there: to one of them).
ALL = acls.ROLES
SHARED_BY_PARTS = ("kmq/client.py", "kmq/aio/__init__.py")
ROLE_OF = {
    "kmq/queue_config.py": ALL[:4],
    "kmq/aio/__init__.py": ("producer", "consumer", "tenant admin"),
    "kmq/aio/consumer.py": ("consumer",),
    "kmq/ops/queues_topic.py": ALL[:4],
    "kmq/ops/queues_writes.py": ("tracker", "tenant admin"),  # handovers and auth; settings, tenants
    "kmq/ops/config_update.py": ("tracker", "tenant admin"),  # handovers; configure_queue
    "kmq/client.py": ("producer", "consumer", "tenant admin"),
    "kmq/queue_admin.py": ("tenant admin",),
    "kmq/consumer/": ("consumer",),
    "kmq/ops/": ("tenant admin",),
    "kmq/kafka/offsets.py": ("tracker", "tenant admin"),
    "kmq/kafka/admin.py": ("tracker",),
    "kmq/kafka/broker_checks.py": ("tracker",),
    "kmq/stats/": ("tracker",),
    "app/": ("tracker",),
    "agents/": ("tracker",),
    "tables/": ("tracker",),
    "web/": ("tracker",),
    "kmq/spark/": ("analytics",),
}
# Modules that name kmq's topics or ids and are no role's: why.
NO_ROLE = {
    "kmq/kafka/acls.py": "the checklist itself",
    "kmq/kafka/profiles.py": "client configs; group ids come from the callers, scanned there",
    "kmq/kafka/patient_reader.py": "takes its callers' configs (group id as its name); the callers are scanned",
    "kmq/dev/demo.py": "the local demo on the embedded broker, no ACLs",
}
# `"group.id": f"..."` in a config dict, or `conf["transactional.id"] = x or f"..."`.
ID_RE = re.compile(r'"(group\.id|transactional\.id)"(?::|\]\s*=)\s*(?:[a-z_]+ or )?(f?)"([^"]*)"')
# Group consumers built by the profile: the group id is the call's second argument.
GROUP_CONSUMER_RE = re.compile(r"group_consumer_config\(\s*\w+,\s*([^\n]*)\)")

TOPIC_RE = re.compile(r"\b(?:self\.)?(?:_?settings|s)\.(queue|markers|dlq|queues|deliveries)_topic\b")
NAMES_RE = re.compile(f'"(?:group|transactional)\\.id"|{TOPIC_RE.pattern}|group_consumer_config\\(')


def roles_of(rel: str) -> tuple[str, ...]:
    return next((roles for prefix, roles in ROLE_OF.items() if rel.startswith(prefix)), ())


def role_files() -> list[tuple[str, str]]:
    out = []
    for folder in ("kmq", "app", "agents", "tables", "web"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            if roles_of(rel):
                out.append((rel, path.read_text()))
    return out


def render(is_f: str, template: str) -> str:
    """An f-string template with the sample settings' names (anything else: a sample value)."""
    if not is_f:
        return template

    def value(m: re.Match) -> str:
        expr = m.group(1)
        if "app_id" in expr:
            return S.app_id
        if "group_id(" in expr:
            return S.group_id("orders")
        return "x"
    return re.sub(r"\{([^}]*)\}", value, template)


def test_every_module_that_talks_to_kafka_has_a_role():
    for folder in ("kmq/consumer", "kmq/ops", "app", "agents", "tables", "web"):
        for path in (ROOT / folder).rglob("*.py"):
            assert roles_of(str(path.relative_to(ROOT))), path


def test_every_module_that_names_a_topic_or_an_id_has_a_role():
    """kmq/spark's reader group and kmq/aio's topics were named by no role's module."""
    for folder in ("kmq", "app", "agents", "tables", "web"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            if NAMES_RE.search(path.read_text()) and rel not in NO_ROLE:
                assert roles_of(rel), f"{rel} names kmq's topics or ids: give it a role in ROLE_OF"


def test_every_group_and_transactional_id_in_the_code_is_granted_to_its_role():
    granted = acls.grants(S)
    found: set[tuple[str, str]] = set()
    for rel, text in role_files():
        for kind, is_f, template in ID_RE.findall(text):
            name = render(is_f, template)
            resource = "Group" if kind == "group.id" else "TransactionalId"
            assert_granted(rel, granted, resource, name)
            found.add((rel, resource))
        for argument in GROUP_CONSUMER_RE.findall(text):
            # Only queue groups (QueueConfig.group_id: kmq.<queue>[@<switch ms>]) are known here.
            assert "group_id(" in argument, f"{rel}: a group consumer of {argument!r}: render it here"
            assert_granted(rel, granted, "Group", S.group_id("orders"))
            found.add((rel, "Group"))
    # The scan sees the ids it must: a consumer's transactional STARTs, redrive, a partition
    # mode group, Spark's reader.
    for expected in (("kmq/consumer/marker_writer.py", "TransactionalId"),
                     ("kmq/ops/deadletters.py", "TransactionalId"),
                     ("kmq/consumer/partition_source.py", "Group"),
                     ("kmq/spark/offsets.py", "Group")):
        assert expected in found, f"the scan misses {expected}"


def assert_granted(rel: str, granted: dict, resource: str, name: str) -> None:
    covered = {role: any(g.covers(resource, name) for g in granted[role]) for role in roles_of(rel)}
    ok = any(covered.values()) if rel in SHARED_BY_PARTS else all(covered.values())
    assert ok, f"{rel}: {resource} {name!r} is missing in the ACLs of {covered} (kmq/kafka/acls.py)"


def test_partition_mode_groups_before_and_after_a_mode_switch_are_granted_to_consumers():
    consumer = acls.grants(S)["consumer"]
    for config in (QueueConfig(), QueueConfig(dispatch_since_ms=1_700_000_000_000)):
        assert any(g.covers("Group", config.group_id(S, "orders"), "Read") for g in consumer)


def test_every_kmq_topic_a_module_names_is_granted_to_its_role():
    granted = acls.grants(S)
    for rel, text in role_files():
        for kind in set(TOPIC_RE.findall(text)):
            topic = getattr(S.topics, kind)
            assert_granted(rel, granted, "Topic", topic)


@pytest.mark.parametrize("profile", ["embedded", "production"])
def test_every_lane_topic_is_granted_to_consumers_and_the_tracker_and_nothing_beside(profile):
    s = Settings.from_env({}, profile=profile)
    granted = acls.grants(s)
    for role in ("consumer", "tracker"):
        for name in s.lane_layout.names():
            assert any(g.covers("Topic", name, "Read") for g in granted[role]), (role, name)
    consumer = [g for g in granted["consumer"] if g.resource == "Topic"]
    assert not any(g.covers("Topic", "kmq.queues-other", "Read") for g in consumer if g.prefixed)
    assert (s.lane_layout.topics > 1) == any(g.prefixed and g.name == s.deliveries_topic for g in consumer)


def test_the_tracker_may_use_fausts_changelog_and_group_and_the_redrive_ids():
    tracker = acls.grants(S)["tracker"]
    from kmq.spark.changelog import tracker_changelog_topic
    assert acls.changelog_topic(S) == tracker_changelog_topic(S.app_id)
    for name in (acls.changelog_topic(S), f"{S.app_id}-__assignor-__leader"):
        assert any(g.covers("Topic", name, "Write") for g in tracker)
    assert any(g.covers("Group", S.app_id, "Read") for g in tracker)
    admin = acls.grants(S)["tenant admin"]
    assert any(g.covers("TransactionalId", acls.redrive_transactional_id(S, "orders"), "Write")
               for g in admin)
    # Every app loads queue settings at start (the SDK stops there otherwise); Spark does not.
    for role, gs in acls.grants(S).items():
        if role != "analytics":
            assert any(g.covers("Topic", S.queues_topic, "Read") for g in gs), role


def test_the_redrive_uses_the_transactional_id_of_the_checklist():
    text = (ROOT / "kmq/ops/deadletters.py").read_text()
    (template,) = re.findall(r'"transactional\.id":\s*f"([^"]*)"', text)
    assert render("f", template) == acls.redrive_transactional_id(S, "x")


# A marker built to be produced: `M.Ack(...)` (kmq.protocol builds them only to decode).
MARKER_RE = re.compile(r"\bM\.([A-Z][a-z]+)\(")
MARKER_NAMES = {cls.__name__.upper() for cls in get_args(Marker)}


def markers_why(role: str) -> str:
    """The why of ``role``'s Write grant on the markers topic ('' if it has none)."""
    return next((g.why for g in acls.grants(S)[role]
                 if g.covers("Topic", S.markers_topic, "Write")), "")


def named_markers(why: str) -> set[str]:
    return set(re.findall(r"\b[A-Z]{3,}\b", why)) & MARKER_NAMES


def test_the_markers_grants_name_exactly_the_markers_each_role_writes():
    """The tracker's said "TICK, ACQUIRE, BEGIN" though its dispatcher writes FLOORs too,
    and the consumer's "..." hid its EXTENDs."""
    written: dict[str, set[str]] = {role: set() for role in acls.ROLES}
    found: set[tuple[str, str]] = set()
    for rel, text in role_files():
        for name in {n.upper() for n in MARKER_RE.findall(text)} & MARKER_NAMES:
            found.add((rel, name))
            covered = {role: name in named_markers(markers_why(role)) for role in roles_of(rel)}
            ok = any(covered.values()) if rel in SHARED_BY_PARTS else all(covered.values())
            assert ok, (f"{rel} writes {name} markers: name them in the markers grant of {covered} "
                        "(kmq/kafka/acls.py)")
            for role in (r for r, yes in covered.items() if yes):
                written[role].add(name)
    for role in acls.ROLES:
        extra = named_markers(markers_why(role)) - written[role]
        assert not extra, f"the {role}'s markers grant names {extra}, which no module of that role writes"
    # The scan sees every writer: the SDK's delayed sends, purge, consumers, the tracker's agents.
    for expected in (("kmq/client.py", "SCHEDULE"), ("kmq/queue_admin.py", "PURGE"),
                     ("kmq/consumer/settlement.py", "EXTEND"), ("kmq/consumer/credits.py", "CREDIT"),
                     ("agents/propose_ticks.py", "TICK"), ("agents/dispatch/dispatcher.py", "FLOOR")):
        assert expected in found, f"the scan misses {expected}"
    assert set().union(*written.values()) == MARKER_NAMES, "a marker nobody writes, or the scan misses it"


@pytest.mark.parametrize("doc", ["docs/security.md", "docs/deployment.md"])
def test_the_docs_carry_the_current_checklist(doc):
    text = (ROOT / doc).read_text()
    assert text == acls.with_checklist(text), f"run: kmq acls --update {doc}"


def parse_command(line: str) -> tuple[str, acls.Grant]:
    """(principal, grant) a kafka-acls.sh line creates, read back the way the tool reads it."""
    import argparse
    import shlex

    p = argparse.ArgumentParser()
    for opt in ("--bootstrap-server", "--command-config", "--allow-principal", "--topic", "--group",
                "--transactional-id", "--resource-pattern-type"):
        p.add_argument(opt)
    p.add_argument("--operation", action="append")
    p.add_argument("--add", action="store_true")
    p.add_argument("--cluster", action="store_true")
    words = shlex.split(line)
    assert words[0] == "kafka-acls.sh"
    a = p.parse_args(words[1:])
    assert a.add and a.resource_pattern_type in (None, "prefixed")
    (resource, name), = [(r, n) for r, n in (("Topic", a.topic), ("Group", a.group),
                                             ("TransactionalId", a.transactional_id),
                                             ("Cluster", "kafka-cluster" if a.cluster else None)) if n]
    return a.allow_principal, acls.Grant(resource, name, a.resource_pattern_type == "prefixed",
                                         tuple(a.operation), "")


def test_the_commands_create_exactly_the_checklists_grants_for_each_roles_principal():
    principals = {"consumer": "User:orders app", "tracker": "User:kmq"}
    lines = [ln for ln in acls.acl_commands(S, principals).splitlines() if not ln.startswith("#")]
    made = [parse_command(ln) for ln in lines]
    wanted = [(principals.get(role, acls.default_principal(role)), g)
              for role, gs in acls.grants(S).items() for g in gs]
    strip = lambda pg: (pg[0], pg[1].resource, pg[1].name, pg[1].prefixed, pg[1].operations)  # noqa: E731
    assert [strip(m) for m in made] == [strip(w) for w in wanted]
    with pytest.raises(ValueError, match="unknown role"):
        acls.acl_commands(S, {"admin": "User:x"})


def test_security_md_carries_the_commands():
    text = (ROOT / "docs/security.md").read_text()
    assert acls.COMMANDS_BEGIN in text and "kafka-acls.sh --bootstrap-server" in text


def test_kmq_acls_prints_the_names_of_the_environment_and_updates_docs_with_the_defaults(
        tmp_path, monkeypatch):
    from click.testing import CliRunner

    from kmq.cli import main

    monkeypatch.setenv("KMQ_APP_ID", "billing-tracker")
    printed = CliRunner().invoke(main, ["acls"])
    assert printed.exit_code == 0 and "`billing-tracker-redrive-`" in printed.output
    doc = tmp_path / "doc.md"
    doc.write_text(f"intro\n{acls.BEGIN}\nstale\n{acls.END}\nrest\n")
    assert CliRunner().invoke(main, ["acls", "--update", str(doc)]).exit_code == 0
    text = doc.read_text()
    assert text.startswith("intro\n") and text.endswith("rest\n") and "stale" not in text
    assert "`kmq-tracker-redrive-`" in text and "billing" not in text
    cmds = CliRunner().invoke(main, ["acls", "--commands", "--principal", "consumer=User:orders-app"])
    assert cmds.exit_code == 0 and "--allow-principal User:orders-app" in cmds.output
    assert "--transactional-id billing-tracker-redrive-" in cmds.output
    bad = CliRunner().invoke(main, ["acls", "--commands", "--principal", "User:x"])
    assert bad.exit_code == 2 and "ROLE=PRINCIPAL" in bad.output


def test_fausts_internal_topic_names_are_the_ones_the_checklist_grants():
    import inspect

    from faust.assignor import leader_assignor
    from faust.tables import base

    assert 'f"{self.app.conf.id}-__assignor-__leader"' in inspect.getsource(leader_assignor)
    assert 'f"{self.app.conf.id}-{self.name}-changelog"' in inspect.getsource(base)
    from tables.tracker import tracker_state
    assert tracker_state.name == acls.TRACKER_TABLE
