"""A worker's Prometheus endpoint (``--metrics-port``), in the text exposition format.

Written with the standard library: ``prometheus_client`` is in the tracker's extra only,
and the SDK never depends on it. Per queue and handler: messages handled by outcome
(acked, released, rejected, lapsed), failures, a handler-duration histogram, and the
handlers running now.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from kmq.worker.registry import Handler

BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
OUTCOME_COUNTER = {"ack": "acked", "release": "released", "reject": "rejected"}


class WorkerMetrics:
    """Counters of one worker process; :meth:`render` is the /metrics body."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._outcomes: dict[tuple[str, str, str], int] = defaultdict(int)
        self._failed: dict[tuple[str, str], int] = defaultdict(int)
        self._running: dict[tuple[str, str], int] = defaultdict(int)
        self._buckets: dict[tuple[str, str], list[int]] = {}
        self._sum_s: dict[tuple[str, str], float] = defaultdict(float)
        self._server: ThreadingHTTPServer | None = None
        self.port: int | None = None

    def handled(self, h: "Handler", outcome: str, *, failed: bool, duration_s: float) -> None:
        key = (h.queue, h.name)
        with self._lock:
            self._outcomes[(*key, OUTCOME_COUNTER.get(outcome, outcome))] += 1
            if failed:
                self._failed[key] += 1
            counts = self._buckets.setdefault(key, [0] * (len(BUCKETS_S) + 1))
            counts[bisect_left(BUCKETS_S, duration_s)] += 1
            self._sum_s[key] += duration_s

    def in_flight(self, h: "Handler", delta: int) -> None:
        with self._lock:
            self._running[(h.queue, h.name)] += delta

    def render(self) -> str:
        """The Prometheus text format of every metric."""
        out = ["# HELP kmq_worker_messages_total Messages handled, by outcome.",
               "# TYPE kmq_worker_messages_total counter"]
        with self._lock:
            for (q, name, outcome), n in sorted(self._outcomes.items()):
                out.append(f'kmq_worker_messages_total{{{_labels(q, name)},outcome="{outcome}"}} {n}')
            out += ["# HELP kmq_worker_failures_total Handler calls that raised.",
                    "# TYPE kmq_worker_failures_total counter"]
            for (q, name), n in sorted(self._failed.items()):
                out.append(f"kmq_worker_failures_total{{{_labels(q, name)}}} {n}")
            out += ["# HELP kmq_worker_in_flight Handlers running now.",
                    "# TYPE kmq_worker_in_flight gauge"]
            for (q, name), n in sorted(self._running.items()):
                out.append(f"kmq_worker_in_flight{{{_labels(q, name)}}} {n}")
            out += ["# HELP kmq_worker_handler_seconds Handler duration.",
                    "# TYPE kmq_worker_handler_seconds histogram"]
            for (q, name), counts in sorted(self._buckets.items()):
                total = 0
                for le, n in zip((*BUCKETS_S, float("inf")), counts):
                    total += n
                    bound = "+Inf" if le == float("inf") else repr(le)
                    out.append(f'kmq_worker_handler_seconds_bucket{{{_labels(q, name)},le="{bound}"}} {total}')
                out.append(f"kmq_worker_handler_seconds_sum{{{_labels(q, name)}}} {self._sum_s[(q, name)]:.6f}")
                out.append(f"kmq_worker_handler_seconds_count{{{_labels(q, name)}}} {total}")
        return "\n".join(out) + "\n"

    def serve(self, host: str, port: int) -> "WorkerMetrics":
        """Serve ``/metrics`` on ``host:port`` (0: a free port, see :attr:`port`) in a thread."""
        metrics = self

        class Page(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                body = metrics.render().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass  # scrapes are not news

        self._server = ThreadingHTTPServer((host, port), Page)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name="kmq-worker-metrics",
                         daemon=True).start()
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def _labels(queue: str, handler: str) -> str:
    return f'queue="{_escape(queue)}",handler="{_escape(handler)}"'


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
