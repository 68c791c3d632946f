"""Run the tracker worker as a child process (dev, demo, tests, benchmarks).

``TrackerProcess`` starts ``faust -A app worker`` from the service checkout
with ``KMQ_*`` settings, waits until its web view answers with every markers
partition assigned, and stops it by its own pid (SIGTERM, then SIGKILL after
a grace period: Faust's shutdown can hang).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import fields
from pathlib import Path

from kmq.dev.processes import terminate
from kmq.errors import BrokerUnavailableError, ConfigError
from kmq.settings import Settings


def service_root() -> Path:
    """The checkout holding ``app/``, ``agents/`` and ``tables/``."""
    candidates = [os.environ.get("KMQ_SERVICE_ROOT"), os.getcwd(),
                  str(Path(__file__).resolve().parents[2])]  # kmq/dev/ -> the checkout
    for c in candidates:
        if c and (Path(c) / "app" / "__init__.py").is_file() and (Path(c) / "agents").is_dir():
            return Path(c)
    raise ConfigError(
        "the tracker service (app/, agents/, tables/) was not found: run from a kmq checkout "
        "or set KMQ_SERVICE_ROOT to one")


def settings_env(settings: Settings) -> dict[str, str]:
    """``KMQ_*`` variables that reproduce ``settings`` in a child process."""
    env = {}
    for f in fields(settings):
        env[f.metadata["env"]] = str(getattr(settings, f.name))
    return env


class TrackerProcess:
    """One tracker worker subprocess."""

    def __init__(self, settings: Settings, log_path: str | os.PathLike,
                 extra_env: dict[str, str] | None = None) -> None:
        self.settings = settings
        self.log_path = Path(log_path)
        self.extra_env = extra_env or {}
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{self.settings.web_host}:{self.settings.web_port}"

    def start(self, timeout_s: float = 90.0, wait: bool = True) -> "TrackerProcess":
        env = {**os.environ, **settings_env(self.settings), **self.extra_env,
               "PYTHONUNBUFFERED": "1"}
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "faust", "-A", "app", "worker", "-l", "info"],
            cwd=service_root(), env=env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        if wait:
            self.wait_ready(timeout_s)
        return self

    def health(self) -> dict | None:
        try:
            with urllib.request.urlopen(self.url + "/kmq/health", timeout=2) as resp:
                return json.loads(resp.read())
        except (OSError, ValueError):
            return None

    def wait_ready(self, timeout_s: float = 90.0, partitions: int | None = None) -> dict:
        """Wait until the web view answers and owns ``partitions`` markers partitions.

        ``partitions`` defaults to all of them (a single worker).
        """
        want = self.settings.markers_partitions if partitions is None else partitions
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise BrokerUnavailableError(
                    f"tracker worker exited ({self.process and self.process.returncode}); "
                    f"log: {self.log_path}")
            h = self.health()
            if h is not None and len(h.get("partitions", [])) >= want and h.get("ready", True):
                return h
            time.sleep(0.1)
        raise BrokerUnavailableError(
            f"tracker worker not ready within {timeout_s:g}s at {self.url}; log: {self.log_path}")

    def stop(self, grace_s: float = 15.0) -> None:
        """SIGTERM our worker, SIGKILL it after ``grace_s``."""
        p, self.process = self.process, None
        terminate(p, grace_s)

    def kill(self) -> None:
        """SIGKILL our worker (crash test)."""
        p, self.process = self.process, None
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()

    def __enter__(self) -> "TrackerProcess":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
