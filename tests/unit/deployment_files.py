"""docker-compose.yml and the Dockerfile read as Docker reads them, for the deployment tests
(test_deployment_compose.py, test_deployment_image.py, test_deployment_operations.py):
compose's interpolation, the services' environments, volumes, ports and listeners, the
Dockerfile's instructions. No Docker engine needed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

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
