"""Run the tracker worker as a child process (dev, demo, tests, benchmarks).

``TrackerProcess`` starts ``faust -A app worker`` from the service checkout
with ``KMQ_*`` settings, waits until its web view answers with every markers
partition assigned, and stops it by its own pid (SIGTERM, then SIGKILL after
a grace period: Faust's shutdown can hang).

A web port picked free (``free_port``) may be taken by another process before
the worker binds it, seconds later: the worker then exits, and is started again
on a new free port (``PORT_ATTEMPTS`` picks in all; ``url`` follows). Only our
own worker's answers count: ``/kmq/health`` says the worker's pid, so a stranger
on the port (another test's worker) is never taken for ours.
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

from kmq import writable_dir
from kmq.dev.embedded import PORT_ATTEMPTS, free_port
from kmq.dev.processes import terminate
from kmq.errors import BrokerUnavailableError, ConfigError
from kmq.settings import Settings


def service_root() -> Path:
    """The checkout holding ``app/``, ``agents/`` and ``tables/``: ``KMQ_SERVICE_ROOT`` when
    set (an error when it does not hold the service), else the working directory, else the
    checkout kmq is imported from."""
    configured = os.environ.get("KMQ_SERVICE_ROOT")
    if configured:
        if _holds_service(Path(configured)):
            return Path(configured)
        # Not skipped: a tracker started from another checkout than the one asked for is
        # a surprise found much later.
        raise ConfigError(
            f"KMQ_SERVICE_ROOT={configured} does not hold the tracker service (no app/__init__.py "
            "and agents/ there): set it to a kmq checkout, or unset it to use the working "
            "directory's")
    for c in (os.getcwd(), str(Path(__file__).resolve().parents[2])):  # kmq/dev/ -> the checkout
        if _holds_service(Path(c)):
            return Path(c)
    raise ConfigError(
        "the tracker service (app/, agents/, tables/) was not found: run from a kmq checkout "
        "or set KMQ_SERVICE_ROOT to one")


def _holds_service(root: Path) -> bool:
    return (root / "app" / "__init__.py").is_file() and (root / "agents").is_dir()


def make_data_dir(path: str) -> None:
    """Create ``kmq dev --data-dir`` now, before the broker starts: the tracker would fail
    on it later with a traceback in its log and only "tracker worker exited" on screen."""
    found = writable_dir.problem(path)
    if found is None:
        try:
            Path(path).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            found = f"cannot be created ({exc.strerror or exc})"
    if found:
        raise ConfigError(f"--data-dir {path} {found}: give a directory path you can write, "
                          "or leave --data-dir out for a fresh temporary one")


def dev_settings(bootstrap_servers: str, data_dir: str, web_port: int) -> Settings:
    """``kmq dev``'s settings: the defaults (whatever ``KMQ_*`` the shell has), embedded
    profile, so a client given only the ``env`` line it prints agrees with its tracker."""
    return Settings.from_env({}, bootstrap_servers=bootstrap_servers, profile="embedded",
                             data_dir=data_dir, web_port=web_port)


def settings_env(settings: Settings) -> dict[str, str]:
    """``KMQ_*`` variables that reproduce ``settings`` in a child process."""
    env = {}
    for f in fields(settings):
        env[f.metadata["env"]] = str(getattr(settings, f.name))
    return env


# Faust's words when its web server cannot bind (aiohttp's OSError, errno 98).
PORT_TAKEN = b"address already in use"


class TrackerProcess:
    """One tracker worker subprocess."""

    def __init__(self, settings: Settings, log_path: str | os.PathLike,
                 extra_env: dict[str, str] | None = None, port_attempts: int = PORT_ATTEMPTS) -> None:
        self.settings = settings
        self.log_path = Path(log_path)
        self.extra_env = extra_env or {}
        self.process: subprocess.Popen | None = None
        # 1: the port the settings name is kept, taken or not (the start fails instead).
        self.port_attempts = port_attempts
        self._attempts = 0
        self._log_at = 0  # where this start's lines begin in the log

    @property
    def url(self) -> str:
        return f"http://{self.settings.web_host}:{self.settings.web_port}"

    def start(self, timeout_s: float = 90.0, wait: bool = True) -> "TrackerProcess":
        self._attempts = 0
        self._spawn()
        if wait:
            try:
                self.wait_ready(timeout_s)
            except BaseException:
                # Not ready, or interrupted (Ctrl-C; a test run's SIGTERM): the caller never
                # got the handle, so the worker is ours to end (it was left running).
                self.stop()
                raise
        return self

    def _spawn(self) -> None:
        self._attempts += 1
        env = {**os.environ, **settings_env(self.settings), **self.extra_env,
               "PYTHONUNBUFFERED": "1"}
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self._log_at = log.tell()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "faust", "-A", "app", "worker", "-l", "info"],
            cwd=service_root(), env=env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()

    def _respawned(self) -> bool:
        """Our worker exited because its web port was taken: started again on a new free
        port (attempts left). True if it was."""
        p = self.process
        if p is None or p.poll() is None or self._attempts >= self.port_attempts:
            return False
        with open(self.log_path, "rb") as f:
            f.seek(self._log_at)
            if PORT_TAKEN not in f.read().lower():
                return False
        self.settings = self.settings.replace(web_port=free_port())
        self._spawn()
        return True

    def health(self) -> dict | None:
        """``/kmq/health`` of our worker; None while it does not answer (or another process
        answers on its port). A worker whose port was taken is started again (see above)."""
        self._respawned()
        pid = self.process.pid if self.process is not None else None
        try:
            with urllib.request.urlopen(self.url + "/kmq/health", timeout=2) as resp:
                h = json.loads(resp.read())
        except (OSError, ValueError):
            return None
        return h if isinstance(h, dict) and h.get("pid") == pid else None

    def wait_ready(self, timeout_s: float = 90.0, partitions: int | None = None) -> dict:
        """Wait until the web view answers and owns ``partitions`` markers partitions.

        ``partitions`` defaults to all of them (a single worker).
        """
        want = self.settings.markers_partitions if partitions is None else partitions
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._respawned():
                continue
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
