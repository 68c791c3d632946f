"""One worker process: every handler's runner on its own thread, signals on the main one.

``run_worker`` is what ``kmq worker`` calls (after checking that a broker answers);
``run_processes`` starts N such processes (``--processes N``) and passes signals on to
them. ``ready`` is printed on stdout only once every handler's consumer is open, and no
handler runs before it (each runner waits for it once its consumer is open); a
handler whose consumer does not open makes ``run_worker`` raise its error (``kmq worker``
prints it as one line), never ``ready``. Exit status: 0 after a clean (first signal)
shutdown; 1 after a second signal (exit at once), a failed start or a runner's failure.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from types import ModuleType
from typing import TYPE_CHECKING, Sequence

from kmq.errors import ConfigError, KmqError
from kmq.worker.registry import Handler, handlers_in
from kmq.worker.runner import HandlerRunner
from kmq.worker.shutdown import ShutdownSignal

if TYPE_CHECKING:  # pragma: no cover
    from kmq.settings import Settings

log = logging.getLogger("kmq.worker")
PARENT_CHECK_S = 0.5  # how often a --processes child looks whether its parent is still there

DEFAULT_GRACE_S = 30.0  # Celery's and Kubernetes' usual terminationGracePeriodSeconds


def select(handlers: Sequence[Handler], queues: Sequence[str] = (),
           concurrency: int | None = None) -> list[Handler]:
    """The handlers to run: those of ``queues`` (all when empty), ``concurrency`` overridden."""
    if queues:
        missing = set(queues) - {h.queue for h in handlers}
        if missing:
            raise ConfigError(f"--queues {', '.join(sorted(missing))}: no @kmq.handler for "
                              f"{'it' if len(missing) == 1 else 'them'}; handlers serve "
                              f"{', '.join(sorted({h.queue for h in handlers})) or 'no queue'}")
        handlers = [h for h in handlers if h.queue in queues]
    if not handlers:
        raise ConfigError("no @kmq.handler found: decorate a function of the module with "
                          "@kmq.handler(\"queue\")")
    return [h.with_concurrency(concurrency) for h in handlers]


def run_worker(module: ModuleType | str, *, queues: Sequence[str] = (), concurrency: int | None = None,
               grace_s: float = DEFAULT_GRACE_S, metrics_port: int | None = None,
               metrics_host: str = "127.0.0.1", settings: "Settings | None" = None,
               parent_pid: int | None = None) -> int:
    """Run the module's handlers until SIGTERM/SIGINT; returns the exit status (main thread).

    ``settings`` default to the ``KMQ_*`` variables. Raises the error of a handler whose
    consumer did not open (the others stopped), without printing ``ready``.
    """
    from kmq.client import Client

    if grace_s < 0:
        raise ConfigError(f"--grace-s={grace_s!r} must be >= 0 seconds")
    handlers = select(handlers_in(module), queues, concurrency)
    metrics = None
    if metrics_port is not None:
        from kmq.worker.metrics import WorkerMetrics
        try:
            metrics = WorkerMetrics().serve(metrics_host, metrics_port)
        except OSError as exc:  # taken, or not an address of this host
            if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:  # the host's fault
                raise ConfigError(f"--metrics-host {metrics_host!r} (--metrics-port {metrics_port}): "
                                  f"{exc.strerror or exc}; give an address of this host, e.g. 127.0.0.1") from exc
            raise ConfigError(f"--metrics-port {metrics_port} on {metrics_host}: {exc.strerror or exc}; "
                              "give a free port, or 0 for any") from exc
    shutdown = ShutdownSignal(grace_s)

    def on_signal(signum: int, _frame: object) -> None:
        state = shutdown.signal(time.monotonic(), announce_force=False)
        if state.phase == "forced":
            # Exit at once: what was running comes back after its visibility timeout. (Were
            # ``forced`` set, a runner could log grace_over and flush before the exit.)
            os.write(2, b'{"event": "forced_exit"}\n')
            os._exit(1)
        log.info("%s", json.dumps({"event": "draining", "signal": signal.Signals(signum).name,
                                   "grace_s": grace_s}))

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    if parent_pid is not None:
        threading.Thread(target=_drain_when_orphaned, args=(parent_pid, shutdown), daemon=True,
                         name="kmq-worker-parent").start()
    client = Client(settings=settings)
    runners = [HandlerRunner(client, h, shutdown, metrics) for h in handlers]
    failed: list[BaseException] = []
    not_started: list[KmqError] = []  # consumers that did not open: the first is raised

    def run(runner: HandlerRunner) -> None:
        try:
            runner.run()
        except BaseException as exc:  # noqa: BLE001 - one failing runner stops the worker
            if isinstance(exc, KmqError) and not runner.ready.is_set():
                not_started.append(exc)  # its message says it all (broker, topic, setting)
            else:
                log.exception("handler %s of queue %s failed", runner.handler.name,
                              runner.handler.queue)
            failed.append(exc)
            if not shutdown.stopping.is_set():
                shutdown.signal(time.monotonic())  # the others drain and stop too

    threads = [threading.Thread(target=run, args=(r,), name=f"kmq-worker-{r.handler.queue}", daemon=True)
               for r in runners]
    for r in runners:
        r.go.clear()  # each opens its consumer, then waits for the `ready` line below
    for t in threads:
        t.start()
    # wait_ready also returns once stopping: a signal, or a runner that failed to start.
    if wait_ready(runners, shutdown):
        log.info("%s", json.dumps({"event": "ready", "pid": os.getpid(),
                                   "handlers": [{"queue": h.queue, "handler": h.name,
                                                 "concurrency": h.concurrency,
                                                 "async": h.is_async} for h in handlers],
                                   "metrics_port": metrics.port if metrics else None}))
        # One write of the whole line (tests and supervisors wait for it): print() wrote "ready"
        # and "\n" apart on an unbuffered stdout, and two processes of --processes 2 made one
        # line "readyready" in a CI run. A write under PIPE_BUF bytes to a pipe is atomic.
        sys.stdout.write("ready\n")
        sys.stdout.flush()
    for r in runners:
        r.go.set()  # handle now; or, stopping, drain and close
    for t in threads:
        while t.is_alive():
            t.join(0.2)  # short joins: the main thread takes signals between them
    client.close()
    if metrics is not None:
        metrics.close()
    stuck = sum(r.still_running_at_close for r in runners)
    if not_started:
        if not stuck:
            raise not_started[0]
        log.error("%s", not_started[0])  # os._exit below: kmq worker would not print it
    log.info("%s", json.dumps({"event": "stopped", "released_after_grace": stuck}))
    sys.stdout.flush()
    sys.stderr.flush()
    status = 1 if failed else 0
    if stuck:
        os._exit(status)  # handler threads past the grace must not hold the exit up
    return status


def _drain_when_orphaned(parent_pid: int, shutdown: ShutdownSignal) -> None:
    """A ``--processes`` child: its own process group (a terminal's Ctrl-C or a group kill
    reaches only the parent, which passes one signal on), so it drains by itself when the
    parent is gone (SIGKILLed) instead of running on unsupervised."""
    while not shutdown.stopping.is_set():
        if os.getppid() != parent_pid:
            log.warning("%s", json.dumps({"event": "draining", "signal": "parent-gone", "parent": parent_pid}))
            shutdown.begin(time.monotonic())
            return
        shutdown.stopping.wait(PARENT_CHECK_S)


def wait_ready(runners: Sequence[HandlerRunner], shutdown: ShutdownSignal) -> bool:
    """Wait until every runner's consumer is open (True) or shutdown has begun (False)."""
    while not shutdown.stopping.is_set():
        if all(r.ready.is_set() for r in runners):
            return True
        shutdown.stopping.wait(0.05)
    return False


def run_processes(argvs: Sequence[Sequence[str]]) -> int:
    """Run ``kmq worker`` once per ``argvs`` entry (each child's options); pass signals on.

    A child that ends with a failure while no signal came (a start that failed, a runner's
    failure) stops the others: the parent then exits with its status, for a supervisor to
    restart the whole worker, rather than running on short of processes.
    """
    # Each child in a process group of its own: a terminal's Ctrl-C (or a supervisor's
    # signal to the group) reaches the parent only, and it passes one on. Reaching the
    # children too, it made the parent's copy their second signal: an exit without the grace.
    children = [subprocess.Popen([sys.executable, "-m", "kmq.cli", "worker", *argv], process_group=0)
                for argv in argvs]
    signalled = []

    def forward(signum: int, _frame: object) -> None:
        signalled.append(signum)
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    status = 0
    while any(child.poll() is None for child in children):
        for child in children:
            code = child.poll()
            if code is not None and code != 0 and not signalled:
                log.error("%s", json.dumps({"event": "process_failed", "pid": child.pid, "status": code}))
                forward(signal.SIGTERM, None)
        time.sleep(0.2)  # a supervisor's poll, not a wait for a condition
    for child in children:
        status = max(status, child.returncode if child.returncode >= 0 else 1)
    return status
