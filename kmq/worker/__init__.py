"""The worker runtime: ``@kmq.handler`` functions run by ``kmq worker module``.

- :mod:`kmq.worker.registry`: the decorator and finding handlers in a module;
- :mod:`kmq.worker.outcome`: return = ack, raise = retry then dead-letter (pure);
- :mod:`kmq.worker.runner`: one handler's receive loop, thread pool or event loop;
- :mod:`kmq.worker.shutdown`: SIGTERM drains within a grace, a second one exits (pure);
- :mod:`kmq.worker.main`: one process of runners, or N processes;
- :mod:`kmq.worker.metrics`: the optional per-worker Prometheus endpoint;
- :mod:`kmq.tracing` (outside: sends use it too): OpenTelemetry spans, when installed.

See docs/workers.md.
"""

from kmq.worker.outcome import Reject, decide
from kmq.worker.registry import Handler, handler, handlers_in

__all__ = ["Handler", "Reject", "decide", "handler", "handlers_in"]
