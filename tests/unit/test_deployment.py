"""docker-compose.yml and the Dockerfile match what the code reads (no Docker engine needed).

Given the committed deployment files, parsed as Docker would read them, then:
three KRaft brokers replicate three ways with two in sync; the topics job
creates exactly the topics ``kmq.kafka.admin.topic_specs`` derives from the
workers' ``KMQ_*`` settings; every ``KMQ_*`` variable is a real setting; two
workers run ``faust -A app worker`` with their own data volume and web port;
the image runs the same command from the service tree as a non-root user;
docs/deployment.md's retention relations state the code's defaults.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from kmq.kafka import profiles
from kmq.kafka.admin import topic_specs
from kmq.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
WORKER_COMMAND = ["faust", "-A", "app", "worker", "-l", "info"]
SETTING_VARIABLES = {f.metadata["env"] for f in Settings.__dataclass_fields__.values()}


# -- reading the files as Docker does ------------------------------------------------


def compose_text() -> str:
    return (ROOT / "docker-compose.yml").read_text()


def interpolate(value: str) -> str:
    """Compose's interpolation: ``$$`` is a literal ``$``; anything else would read the host env."""
    unescaped = value.replace("$$", "")
    assert "$" not in unescaped, f"the stack must not depend on host variables: {value!r}"
    return value.replace("$$", "$")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(compose_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


def env_of(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: interpolate(str(v)) for k, v in env.items()}


def brokers(services: dict) -> dict[str, dict]:
    return {n: s for n, s in services.items()
            if str(s.get("image", "")).startswith("apache/kafka:") and "KAFKA_NODE_ID" in env_of(s)}


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def base_image(build_args: dict[str, str] | None = None) -> str:
    """The FROM image, its ``${ARG}`` resolved from the ARG defaults and ``build_args``."""
    steps = dockerfile()
    args = dict(a.split("=", 1) for w, a in steps if w == "ARG" and "=" in a) | (build_args or {})
    (image,) = [a for w, a in steps if w == "FROM"]
    return re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], image)


def dockerfile_cmd() -> list[str]:
    (cmd,) = [json.loads(args) for word, args in dockerfile() if word == "CMD"]
    return cmd


def workers(services: dict) -> dict[str, dict]:
    return {n: s for n, s in services.items() if s.get("command", dockerfile_cmd()
                                                         if "build" in s else None) == WORKER_COMMAND}


def worker_settings(service: dict) -> Settings:
    return Settings.from_env(env_of(service))


def volume_mounts(service: dict) -> dict[str, str]:
    """target -> source of the service's volumes (short syntax)."""
    mounts = {}
    for v in service.get("volumes", []):
        source, target = v.split(":")[:2]
        mounts[target] = source
    return mounts


def published(service: dict) -> list[tuple[str, int, int]]:
    """(host ip, host port, container port) of the service's published ports."""
    out = []
    for p in service.get("ports", []):
        ip, host, container = str(p).split(":")
        out.append((ip, int(host), int(container)))
    return out


def listeners(value: str) -> dict[str, tuple[str, int]]:
    """``NAME://host:port,...`` -> {NAME: (host, port)}."""
    out = {}
    for item in value.split(","):
        name, _, address = item.partition("://")
        host, _, port = address.rpartition(":")
        out[name] = (host, int(port))
    return out


# -- brokers -------------------------------------------------------------------------


def test_three_kraft_brokers_replicate_three_ways_with_two_in_sync(services):
    nodes = brokers(services)
    assert len(nodes) == 3
    envs = {n: env_of(s) for n, s in nodes.items()}
    assert {e["KAFKA_NODE_ID"] for e in envs.values()} == {"1", "2", "3"}
    assert len({e["CLUSTER_ID"] for e in envs.values()}) == 1, "one cluster id for all nodes"
    for name, env in envs.items():
        s = nodes[name]
        assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
        assert not any("ZOOKEEPER" in k for k in env), "KRaft mode: no ZooKeeper"
        assert not s["image"].endswith(":latest")
        assert env["KAFKA_DEFAULT_REPLICATION_FACTOR"] == "3"
        assert env["KAFKA_MIN_INSYNC_REPLICAS"] == "2"
        assert env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "3"
        assert env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == "3"
        assert env["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"] == "2"
        assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false", "kmq creates its topics explicitly"
        # Every node is a voter at its own controller listener.
        voters = dict(v.split("@") for v in env["KAFKA_CONTROLLER_QUORUM_VOTERS"].split(","))
        controller_port = listeners(env["KAFKA_LISTENERS"])[env["KAFKA_CONTROLLER_LISTENER_NAMES"]][1]
        assert voters[env["KAFKA_NODE_ID"]] == f"{s['hostname']}:{controller_port}"
        advertised = listeners(env["KAFKA_ADVERTISED_LISTENERS"])
        assert advertised[env["KAFKA_INTER_BROKER_LISTENER_NAME"]][0] == s["hostname"]
        # Data survives a restart: the log dir is a named volume of its own.
        assert volume_mounts(s)[env["KAFKA_LOG_DIRS"]] == f"{name}-data"
        assert all(ip == "127.0.0.1" for ip, _, _ in published(s)), "host ports on loopback only"
    assert len({tuple(sorted(env_of(s)["KAFKA_CONTROLLER_QUORUM_VOTERS"].split(",")))
                for s in nodes.values()}) == 1
    assert len(set(voters)) == 3


def test_the_host_reaches_every_broker_at_its_published_external_listener(services):
    for s in brokers(services).values():
        env = env_of(s)
        external = listeners(env["KAFKA_ADVERTISED_LISTENERS"])["EXTERNAL"]
        inside = listeners(env["KAFKA_LISTENERS"])["EXTERNAL"][1]
        assert ("127.0.0.1", external[1], inside) in published(s)


# -- workers and their settings --------------------------------------------------------


def test_every_kmq_variable_in_the_deployment_files_is_a_setting():
    text = compose_text() + (ROOT / "Dockerfile").read_text()
    used = set(re.findall(r"\bKMQ_[A-Z0-9_]+", text))
    assert used, "the deployment configures kmq through KMQ_* variables"
    assert used <= SETTING_VARIABLES, f"not settings: {sorted(used - SETTING_VARIABLES)}"


def test_workers_read_a_durable_production_configuration(services):
    nodes = brokers(services)
    internal = {f"{s['hostname']}:{listeners(env_of(s)['KAFKA_ADVERTISED_LISTENERS'])['INTERNAL'][1]}"
                for s in nodes.values()}
    ws = workers(services)
    for name, service in ws.items():
        s = worker_settings(service)  # parses and validates like the worker does at start
        assert s.profile == "production"
        assert set(s.bootstrap_servers.split(",")) == internal, "bootstrap from every broker"
        assert s.effective_replication_factor == 3
        assert profiles.min_insync_replicas(s) == 2
        assert 1 <= s.standby_replicas < len(ws), "a standby needs another worker to live on"
        for var in ("KMQ_QUEUE_PARTITIONS", "KMQ_MARKERS_PARTITIONS", "KMQ_DLQ_PARTITIONS",
                    "KMQ_REPLICATION_FACTOR", "KMQ_STANDBY_REPLICAS"):
            assert var in env_of(service), f"{name}: set {var} explicitly"
    # One tracker: the same app id (consumer group) and topics on every worker.
    shared = {(s.app_id, s.topics, s.markers_partitions, s.queue_partitions)
              for s in map(worker_settings, ws.values())}
    assert len(shared) == 1


def test_two_workers_run_faust_with_their_own_data_volume_and_web_port(compose, services):
    ws = workers(services)
    assert len(ws) == 2
    sources, host_ports = set(), set()
    for name, service in ws.items():
        s = worker_settings(service)
        assert service["build"] == ".", "the worker image is built from this checkout"
        assert volume_mounts(service).get(s.data_dir) is not None, f"{name}: KMQ_DATA_DIR on a volume"
        source = volume_mounts(service)[s.data_dir]
        assert source in compose["volumes"], f"{name}: {source} is a named volume"
        sources.add(source)
        assert s.web_host == s.web_advertised_host == service["hostname"]
        ports = [(ip, host) for ip, host, inside in published(service) if inside == s.web_port]
        assert len(ports) == 1 and ports[0][0] == "127.0.0.1", f"{name}: web port on loopback"
        host_ports.add(ports[0][1])
        assert service["depends_on"]["kmq-topics"]["condition"] == "service_completed_successfully"
    assert len(sources) == 2 and len(host_ports) == 2, "each worker has its own data and port"


def test_a_worker_advertises_its_service_name_to_the_other_workers(services):
    from app.settings import faust_options

    for service in workers(services).values():
        opts = faust_options(worker_settings(service))  # raises for an open wildcard bind
        assert opts["web_bind"] == service["hostname"]  # auth off: the compose network only
        assert opts["web_host"] == service["hostname"]  # Faust's canonical URL for routed views


# -- the topics job -------------------------------------------------------------------


def topic_commands(service: dict) -> list[list[str]]:
    """The argument lists of the job's ``create`` calls, and the function's own command."""
    script = interpolate(service["command"][0])
    assert service["entrypoint"] == ["/bin/bash", "-c"]
    lines = [ln.strip() for ln in script.splitlines()]
    body = [ln for ln in lines if "kafka-topics.sh" in ln and "--create" in ln]
    assert len(body) == 1 and "--if-not-exists" in body[0], "idempotent creation"
    return [shlex.split(body[0])] + [shlex.split(ln)[1:] for ln in lines if ln.startswith("create ")]


def parse_create(args: list[str]) -> tuple[str, int, int, dict[str, str]]:
    opts: dict[str, list[str]] = {}
    for flag, value in zip(args[::2], args[1::2]):
        opts.setdefault(flag, []).append(value)
    configs = dict(c.split("=", 1) for c in opts.get("--config", []))
    return (opts["--topic"][0], int(opts["--partitions"][0]),
            int(opts["--replication-factor"][0]), configs)


def test_the_topics_job_creates_what_the_workers_settings_describe(services):
    job = services["kmq-topics"]
    function, *calls = topic_commands(job)
    bootstrap = function[function.index("--bootstrap-server") + 1]
    assert len(bootstrap.split(",")) == 3
    assert all(c["condition"] == "service_healthy" for c in job["depends_on"].values())
    assert set(job["depends_on"]) == set(brokers(services))
    created = {name: (parts, rf, configs) for name, parts, rf, configs in map(parse_create, calls)}
    for service in workers(services).values():
        specs = topic_specs(worker_settings(service))
        expected = {t.topic: (t.num_partitions, t.replication_factor, dict(t.config)) for t in specs}
        assert created == expected


def test_the_markers_partitions_equal_the_tracker_table_partitions(services):
    # Faust raises PartitionsMismatch otherwise; the table takes KMQ_MARKERS_PARTITIONS.
    calls = topic_commands(services["kmq-topics"])[1:]
    created = {name: parts for name, parts, _, _ in map(parse_create, calls)}
    for service in workers(services).values():
        s = worker_settings(service)
        assert created[s.markers_topic] == s.markers_partitions
        # Redelivery reads payloads back: retention well above the longest delay, visibility or hold.
        longest_s = max(s.max_delay_s, s.visibility_timeout_s, s.max_processing_s)
        assert s.queue_retention_ms >= 2 * 1000 * longest_s


# -- the image --------------------------------------------------------------------------


def test_the_image_runs_the_worker_from_the_service_tree_as_a_non_root_user(services):
    steps = dockerfile()
    words = [w for w, _ in steps]
    assert base_image() == "python:3.11-slim"
    assert any(w == "RUN" and re.search(r"""pip install --no-deps ["']?\.\[tracker\]["']?""", a)
               for w, a in steps)
    copied = {a.split()[0].rstrip("/") for w, a in steps if w == "COPY"}
    assert {"kmq", "app", "agents", "tables"} <= copied
    for d in ("kmq", "app", "agents", "tables"):
        assert (ROOT / d / "__init__.py").is_file()
    (workdir,) = [a for w, a in steps if w == "WORKDIR"]
    assert workdir.startswith("/")
    users = [a for w, a in steps if w == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert words.index("USER") > max(i for i, w in enumerate(words) if w == "RUN"), \
        "no RUN step after dropping root"
    assert dockerfile_cmd() == WORKER_COMMAND
    for service in workers(services).values():
        assert service["command"] == dockerfile_cmd()
        s = worker_settings(service)
        (volume,) = [json.loads(a) for w, a in steps if w == "VOLUME"]
        assert s.data_dir in volume
        (expose,) = [a for w, a in steps if w == "EXPOSE"]
        assert int(expose) == s.web_port


def test_the_image_defaults_parse_as_settings():
    env = {}
    for word, args in dockerfile():
        if word == "ENV":
            env.update(dict(tok.split("=", 1) for tok in shlex.split(args)))
    kmq_env = {k: v for k, v in env.items() if k.startswith("KMQ_")}
    assert kmq_env, "the image documents its KMQ_* defaults"
    s = Settings.from_env(kmq_env)
    assert s.profile == "production" and s.web_host == "0.0.0.0"


def test_the_image_listens_on_every_interface_only_with_auth_on():
    """The image bound 0.0.0.0 with auth off: every view open to whoever reached the port."""
    from app.settings import check_web_bind
    from kmq.errors import ConfigError

    env = {}
    for word, args in dockerfile():
        if word == "ENV":
            env.update(dict(tok.split("=", 1) for tok in shlex.split(args)))
    kmq_env = {k: v for k, v in env.items() if k.startswith("KMQ_")}
    with pytest.raises(ConfigError, match="KMQ_WEB_HOST='0.0.0.0'.*KMQ_AUTH=off.*KMQ_AUTH=on"):
        check_web_bind(Settings.from_env(kmq_env))
    with pytest.raises(ConfigError, match="KMQ_WEB_HOST"):
        check_web_bind(Settings.from_env({**kmq_env, "KMQ_WEB_HOST": "::"}))
    check_web_bind(Settings.from_env({**kmq_env, "KMQ_AUTH": "on", "KMQ_ADMIN_TOKEN": "a" * 24}))
    for host in ("127.0.0.1", "tracker-1", "10.0.0.5"):
        check_web_bind(Settings.from_env({**kmq_env, "KMQ_WEB_HOST": host}))


def test_the_build_context_keeps_what_the_image_copies():
    ignored = {ln.strip().rstrip("/") for ln in (ROOT / ".dockerignore").read_text().splitlines()
               if ln.strip() and not ln.startswith("#")}
    for needed in ("kmq", "app", "agents", "tables", "pyproject.toml", "README.md"):
        assert needed not in ignored
    assert ".venv" in ignored and ".git" in ignored


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


def test_the_image_installs_pinned_dependencies_before_copying_the_sdk():
    steps = dockerfile()
    copies = [(i, a.split()) for i, (w, a) in enumerate(steps) if w == "COPY"]
    (pins,) = [i for i, args in copies if args[0] == "constraints.txt"]
    (sdk,) = [i for i, args in copies if args[0].rstrip("/") == "kmq"]
    (install,) = [i for i, (w, a) in enumerate(steps) if w == "RUN" and "-r constraints.txt" in a]
    assert pins < install < sdk, "a change to kmq/ must not re-download the dependencies"


def test_the_base_image_can_be_pinned_by_digest_without_editing_the_dockerfile():
    steps = dockerfile()
    assert [w for w, _ in steps][:2] == ["ARG", "FROM"], "the ARG before FROM: usable in FROM"
    pinned = "python:3.11-slim@sha256:" + "0" * 64
    assert base_image({"BASE_IMAGE": pinned}) == pinned
    assert "--build-arg BASE_IMAGE=python:3.11-slim@sha256:" in (ROOT / "docs/deployment.md").read_text()


def test_the_health_check_asks_for_readiness_where_the_worker_listens(monkeypatch):
    (check,) = [a for w, a in dockerfile() if w == "HEALTHCHECK"]
    cmd = json.loads(check[check.index("CMD") + 3:].strip())
    code = cmd[cmd.index("-c") + 1]
    assert "/kmq/ready" in code and "KMQ_WEB_HOST" in code
    asked = []
    import urllib.request
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: asked.append(url))
    for host, url in (("0.0.0.0", "http://127.0.0.1:6066/kmq/ready"),
                      ("10.0.0.5", "http://10.0.0.5:6066/kmq/ready"),
                      ("::", "http://[::1]:6066/kmq/ready")):
        monkeypatch.setenv("KMQ_WEB_HOST", host)
        monkeypatch.setenv("KMQ_WEB_PORT", "6066")
        exec(code, {})
        assert asked[-1] == url


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
