"""The Kafka ACLs each role needs: every topic, group and transactional id kmq uses, in one place.

Five roles run kmq code against the cluster:

- **producer**: an application that sends (``Client.send``, delayed sends);
- **consumer**: an application that receives, in either dispatch mode (a queue
  can switch mode, so a consumer needs both);
- **tenant admin**: ``configure_queue``, tenants, dead-letter list/redrive/purge
  (the SDK's admin calls and the ``kmq`` CLI);
- **tracker**: the Faust workers (``faust -A app worker``);
- **analytics**: the Spark reports (``kmq spark``, :mod:`kmq.spark`), read only.

:func:`grants` derives, from one :class:`~kmq.settings.Settings`, what each role
needs; docs/security.md and docs/deployment.md carry :func:`checklist_markdown`,
docs/security.md also the ``kafka-acls.sh`` commands (:func:`acl_commands`)
(tests/unit/test_acls.py checks the docs are current and that every group id,
transactional id and topic the code names is covered). Groups that "never join
or commit" (readers with ``assign()``) are listed too: a broker may still check
them (OffsetFetch), and their names say whose reader it is.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from kmq.errors import ConfigError
from kmq.setting_checks import TRACKER_TABLE
from kmq.settings import Settings

ROLES = ("producer", "consumer", "tenant admin", "tracker", "analytics")
SPARK_GROUP_PREFIX = "kmq-spark-"  # kmq.spark.offsets: one random reader group per read


@dataclass(frozen=True)
class Grant:
    """One ACL: ``operations`` on a resource named ``name`` (exactly, or every name it prefixes)."""

    resource: str          # Topic, Group, TransactionalId, Cluster
    name: str
    prefixed: bool
    operations: tuple[str, ...]
    why: str

    def covers(self, resource: str, name: str, operation: str | None = None) -> bool:
        """Whether this grant allows ``operation`` (any, if None) on that resource."""
        if resource != self.resource or (operation is not None and operation not in self.operations):
            return False
        return name.startswith(self.name) if self.prefixed else name == self.name


def changelog_topic(s: Settings) -> str:
    """Faust's changelog of the tracker's table: ``<app id>-<table>-changelog``."""
    return f"{s.app_id}-{TRACKER_TABLE}-changelog"


def redrive_transactional_id(s: Settings, queue: str) -> str:
    """The transactional id of one queue's redrive (kmq.ops.deadletters): fences an earlier one."""
    return f"{s.app_id}-redrive-{queue}"


def _queue_settings_reader(s: Settings) -> list[Grant]:
    # kmq.ops.queues_topic loads every queue's settings at start, in every role.
    return [
        Grant("Topic", s.queues_topic, False, ("Read", "Describe"),
              "queue settings, loaded at start (without READ every SDK process stops there)"),
        Grant("Group", f"{s.app_id}-queue-configs", False, ("Read",),
              "the queue-settings reader (assign only, never commits)"),
    ]


def grants(s: Settings) -> dict[str, list[Grant]]:
    """Role -> the ACLs it needs, with the names these settings give."""
    t, app, prefix = s.topics, s.app_id, s.group_prefix
    lanes = s.lane_layout
    # Lanes in several topics (kmq.protocol.lane_layout): `kmq.deliveries`, `kmq.deliveries.1`, ...
    lanes_prefixed = lanes.topics > 1
    lanes_note = (f" ({lanes.topics} topics `{t.deliveries}`, `{t.deliveries}.1`, ...: prefix ACL)"
                  if lanes_prefixed else "")
    producer = [
        Grant("Topic", t.queue, False, ("Write", "Describe"), "messages"),
        Grant("Topic", t.markers, False, ("Write", "Describe"), "SCHEDULE markers of delayed sends"),
        *_queue_settings_reader(s),
    ]
    consumer = [
        Grant("Topic", t.queue, False, ("Read", "Describe"),
              "partition mode: the group's partitions; shared mode: referenced ranges"),
        Grant("Topic", t.deliveries, lanes_prefixed, ("Read", "Describe"),
              "shared mode: the consumer's lane" + lanes_note),
        Grant("Topic", t.markers, False, ("Write", "Describe"),
              "START (partition mode), ACK, EXTEND, RELEASE, REJECT; CREDIT (shared mode)"),
        Grant("Group", prefix, True, ("Read", "Describe"),
              f"`{prefix}<queue>`, `{prefix}<queue>@<switch ms>` after a mode switch, "
              f"readers `{prefix}<queue>.lanes` and `.refs` (prefix ACL)"),
        Grant("TransactionalId", prefix, True, ("Write", "Describe"),
              f"KMQ_TRANSACTIONAL_STARTS=on: `{prefix}<queue>.<random>` unless the consumer "
              "passes its own transactional_id (then grant that)"),
        *_queue_settings_reader(s),
    ]
    tenant_admin = [
        Grant("Topic", t.queues, False, ("Read", "Write", "Describe"),
              "configure_queue, tenants, purge points"),
        Grant("Group", f"{app}-queue-configs", False, ("Read",),
              "the queue-settings reader (assign only, never commits)"),
        Grant("Topic", t.dlq, False, ("Read", "Write", "Describe"), "list, redrive, purge dead letters"),
        Grant("Group", f"{app}-dlq-reader", False, ("Read",), "the dead-letter reader (assign only)"),
        Grant("Group", f"{app}-end-offsets", False, ("Read",),
              "configure_queue reads the queue topic's ends (partition starts; assign only)"),
        Grant("Topic", t.queue, False, ("Write", "Describe"), "redrive republishes dead letters"),
        Grant("Topic", t.markers, False, ("Write", "Describe"), "PURGE markers of a queue purge"),
        Grant("TransactionalId", f"{app}-redrive-", True, ("Write", "Describe"),
              "`<KMQ_APP_ID>-redrive-<queue>`: one redrive per queue at a time"),
    ]
    tracker = [
        *(Grant("Topic", name, False, ("Read", "Write", "Describe", "DescribeConfigs"), why)
          for name, why in ((t.queue, "payload read-back, redeliveries, due delayed sends"),
                            (t.markers, "the markers it tracks; it writes TICK, BEGIN, ACQUIRE, FLOOR, RELEASE"),
                            (t.dlq, "dead letters; the views count them"))),
        Grant("Topic", t.deliveries, lanes_prefixed, ("Read", "Write", "Describe", "DescribeConfigs"),
              "shared queues' deliveries" + lanes_note),
        Grant("Topic", t.queues, False, ("Read", "Write", "Describe", "DescribeConfigs"),
              "queue settings, handover, its auth record"),
        Grant("Topic", f"{app}-", True, ("Read", "Write", "Describe", "Create", "DescribeConfigs"),
              f"Faust's internal topics: `{changelog_topic(s)}`, `{app}-__assignor-__leader`"),
        Grant("Group", app, True, ("Read", "Describe"),
              f"Faust's group `{app}`; readers `{app}-payload-reader`, `-dispatcher`, `-gap-reader`, "
              "`-end-offsets`, `-queue-configs`, `-dlq-reader` and the views' (assign only)"),
        Grant("Group", prefix, True, ("Describe",),
              "the views read queues' group offsets (partition-mode depth)"),
        Grant("Cluster", "kafka-cluster", False, ("Create", "DescribeConfigs", "Describe"),
              "Create: kmq's topics at start (drop it if they are made by your tooling); "
              "DescribeConfigs: the start-up checks of offsets retention and transaction timeout; "
              "Describe: listing groups"),
    ]
    analytics = [
        *(Grant("Topic", name, False, ("Read", "Describe"), why)
          for name, why in ((t.markers, "`kmq spark` jobs: marker events, deliveries"),
                            (t.queue, "queue records"),
                            (t.dlq, "dead letters"),
                            (changelog_topic(s), "the tracker's in-flight state (`kmq spark inflight`)"))),
        Grant("Group", SPARK_GROUP_PREFIX, True, ("Read",),
              f"kmq's Spark source, `{SPARK_GROUP_PREFIX}<random>` (assign only); Spark's own "
              "`kafka` format uses its `groupIdPrefix` option instead"),
    ]
    return {"producer": producer, "consumer": consumer, "tenant admin": tenant_admin,
            "tracker": tracker, "analytics": analytics}


def checklist_markdown(s: Settings | None = None) -> str:
    """The ACL checklist as a markdown table, with the default names (generated into the docs)."""
    s = s or Settings()
    rows = ["| role | resource | name | pattern | operations | why |",
            "| --- | --- | --- | --- | --- | --- |"]
    for role, gs in grants(s).items():
        for g in gs:
            pattern = "prefixed" if g.prefixed else "literal"
            rows.append(f"| {role} | {g.resource} | `{g.name}` | {pattern} | "
                        f"{', '.join(g.operations)} | {g.why} |")
    return "\n".join(rows) + "\n"


def default_principal(role: str) -> str:
    """The placeholder principal of a role in the printed commands: ``User:kmq-<role>``."""
    return "User:kmq-" + role.replace(" ", "-")


_RESOURCE_OPTION = {"Topic": "--topic", "Group": "--group", "TransactionalId": "--transactional-id"}


def grant_command(g: Grant, principal: str, bootstrap: str = "$BOOTSTRAP") -> str:
    """The ``kafka-acls.sh`` command that creates grant ``g`` for ``principal``."""
    # The placeholder stays a shell variable; any other address is quoted as the principals are.
    words = ["kafka-acls.sh", "--bootstrap-server", bootstrap if bootstrap == "$BOOTSTRAP" else
             shlex.quote(bootstrap), "--command-config", "$ADMIN_CONFIG",
             "--add", "--allow-principal", shlex.quote(principal)]
    for op in g.operations:
        words += ["--operation", op]
    if g.resource == "Cluster":
        words.append("--cluster")
    else:
        words += [_RESOURCE_OPTION[g.resource], shlex.quote(g.name)]
        if g.prefixed:
            words += ["--resource-pattern-type", "prefixed"]
    return " ".join(words)


def acl_commands(s: Settings | None = None, principals: dict[str, str] | None = None,
                 bootstrap: str = "$BOOTSTRAP") -> str:
    """Every grant of :func:`grants` as a ``kafka-acls.sh`` command, one role after another.

    ``principals`` maps a role to its principal (``User:orders-app``); a role
    not given gets :func:`default_principal`.
    """
    s = s or Settings()
    principals = principals or {}
    unknown = set(principals) - set(ROLES)
    if unknown:
        raise ConfigError(f"unknown role(s) {sorted(unknown)}: use {', '.join(ROLES)}")
    for role, principal in principals.items():
        kind, _, name = principal.partition(":")
        # kafka-acls.sh: "Could not parse principal"; its types are case-sensitive (User, Group),
        # and a space around the principal or the type is part of what it parses.
        if not (kind[:1].isupper() and not any(c.isspace() for c in kind) and name.strip()
                and principal == principal.strip()):
            raise ConfigError(f"principal {principal!r} of role {role} is not TYPE:NAME, "
                              "e.g. User:orders-app (TYPE capitalized, no spaces around)")
    lines = []
    for role, gs in grants(s).items():
        lines.append(f"# {role}")
        lines += [grant_command(g, principals.get(role) or default_principal(role), bootstrap) for g in gs]
    return "\n".join(lines) + "\n"


BEGIN, END = "<!-- acl-checklist: begin (generated by `kmq acls`) -->", "<!-- acl-checklist: end -->"
COMMANDS_BEGIN = "<!-- acl-commands: begin (generated by `kmq acls --commands`) -->"
COMMANDS_END = "<!-- acl-commands: end -->"


def _replace_block(doc: str, begin: str, end: str, body: str) -> str:
    head, sep, rest = doc.partition(begin)
    _, sep2, tail = rest.partition(end)
    if not sep or not sep2:
        raise ValueError(f"the document has no {begin} ... {end} markers")
    return f"{head}{begin}\n{body}{end}{tail}"


def with_checklist(doc: str, s: Settings | None = None) -> str:
    """``doc`` with the text between the checklist markers replaced by the current checklist,
    and the commands between the acl-commands markers too, where it has them."""
    doc = _replace_block(doc, BEGIN, END, checklist_markdown(s))
    if COMMANDS_BEGIN in doc:
        doc = _replace_block(doc, COMMANDS_BEGIN, COMMANDS_END, f"```sh\n{acl_commands(s)}```\n")
    return doc
