"""The Dockerfile's image: it runs the same worker command as the compose file from the service
tree as a non-root user, installs pinned dependencies before the SDK, takes a base image
pinned by digest, documents ``KMQ_*`` defaults that parse as settings, listens on every
interface only with auth on, and checks readiness where the worker listens.

The files are parsed as Docker would read them (tests/unit/deployment_files.py).
"""

from __future__ import annotations

import json
import re
import shlex

import pytest

from kmq.settings import Settings
from tests.unit.deployment_files import ROOT, WORKER_COMMAND, base_image, dockerfile, dockerfile_cmd, \
    worker_settings, workers
from tests.unit.deployment_files import compose, services  # noqa: F401 - the module's fixtures


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
