"""docker-compose.yml's stack matches what the code reads: three KRaft brokers replicate three
ways with two in sync; every ``KMQ_*`` variable is a real setting; two workers run ``faust -A
app worker`` with their own data volume and web port; the topics job creates exactly the topics
``kmq.kafka.admin.topic_specs`` derives from the workers' ``KMQ_*`` settings.

The files are parsed as Docker would read them (tests/unit/deployment_files.py).
"""

from __future__ import annotations

import re
import shlex

from kmq.kafka import profiles
from kmq.kafka.admin import topic_specs
from tests.unit.deployment_files import (ROOT, SETTING_VARIABLES, brokers, compose_text, env_of, interpolate,
                                         listeners, published, volume_mounts, worker_settings, workers)
from tests.unit.deployment_files import compose, services  # noqa: F401 - the module's fixtures


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
