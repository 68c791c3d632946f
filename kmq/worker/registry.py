"""``@kmq.handler``: a function bound to a queue, and how a worker finds them in a module.

A decorated function stays callable as before; the decorator returns a :class:`Handler`
that also says which queue it serves and how (concurrency, prefetch, non-retryable
exception types, consumer options). ``kmq worker jobs`` imports module ``jobs`` and runs
every :class:`Handler` among its attributes: no global registry.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any, Callable

from kmq.consumer.arguments import check_arguments
from kmq.consumer.options import check_options
from kmq.errors import ConfigError
from kmq.protocol.placement import validate_queue_name
from kmq.worker.module_import import import_module

MAX_CONCURRENCY = 10_000
_MODULE_PATH = re.compile(r"[^\W\d]\w*(\.[^\W\d]\w*)*")  # jobs, myapp.jobs


@dataclass(frozen=True)
class Handler:
    """A handler of one queue: ``fn(message)``; return = ack, raise = retry or dead-letter."""

    queue: str
    fn: Callable[..., Any]
    concurrency: int = 1
    prefetch: int | None = None  # messages held beyond the running ones (None: see read_ahead)
    non_retryable: tuple[type[BaseException], ...] = ()
    consumer_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        validate_queue_name(self.queue)
        _check_count("concurrency", self.concurrency, 1)
        if self.prefetch is not None:
            _check_count("prefetch", self.prefetch, 0)
        if not isinstance(self.non_retryable, tuple) or not all(
                isinstance(t, type) and issubclass(t, BaseException) for t in self.non_retryable):
            raise ConfigError(f"non_retryable={self.non_retryable!r} must be a tuple of exception "
                              "types, e.g. (ValueError, KeyError)")

    @property
    def name(self) -> str:
        """``module.function``: the handler's label in logs and metrics (of a callable object,
        ``module.Class``: the same every run, not its repr with an address)."""
        fn = self.fn if hasattr(self.fn, "__qualname__") else type(self.fn)
        return f"{getattr(fn, '__module__', '?')}.{fn.__qualname__}"

    @property
    def is_async(self) -> bool:
        """``async def`` (or an object whose ``__call__`` is one): run as tasks on one event
        loop; else on a thread pool."""
        return inspect.iscoroutinefunction(self.fn) or (
            not inspect.isroutine(self.fn) and inspect.iscoroutinefunction(getattr(self.fn, "__call__", None)))

    @property
    def read_ahead(self) -> int:
        """Messages held ready beyond the running ones: ``prefetch``, else 8 x concurrency
        (at least 32): enough to cover a shared queue's credit round trip (~0.1 s) at full
        speed. bench/worker.py, 32 x 20 ms handlers, shared: read-ahead 32 -> 0.52 of ideal,
        96 -> 0.69, 256 -> 0.90."""
        return max(32, 8 * self.concurrency) if self.prefetch is None else self.prefetch

    @property
    def max_in_flight(self) -> int:
        """What its consumer may hold: the running ones and the prefetched ones."""
        return self.concurrency + self.read_ahead

    def with_concurrency(self, concurrency: int | None) -> "Handler":
        return self if concurrency is None else replace(self, concurrency=concurrency)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


def handler(queue: str | None = None, *, concurrency: int = 1, prefetch: int | None = None,
            non_retryable: tuple[type[BaseException], ...] = (),
            **consumer_options: Any) -> Callable[[Callable[..., Any]], Handler]:
    """Make ``fn(msg: kmq.Message)`` the handler of ``queue``; run it with ``kmq worker``.

    ``concurrency``: messages handled at once (threads for a plain function, tasks for
    ``async def``). ``prefetch``: messages held ready beyond those (default: 8 x concurrency, at least 32).
    ``non_retryable``: exception types that dead-letter at once, like :class:`kmq.Reject`.
    Other keywords go to :meth:`kmq.Client.consumer` (e.g. ``visibility_timeout_s``,
    ``max_processing_s``).
    """
    if callable(queue) and not isinstance(queue, str):  # a bare @kmq.handler: no queue given
        raise ConfigError(f"@kmq.handler needs the queue it serves: write @kmq.handler(\"emails\") "
                          f"above {getattr(queue, '__name__', queue)!r}, not a bare @kmq.handler")
    if queue is None:  # @kmq.handler(): a TypeError before
        raise ConfigError("@kmq.handler() needs the queue it serves: write @kmq.handler(\"emails\")")
    validate_queue_name(queue)
    if "max_in_flight" in consumer_options:
        raise ConfigError("max_in_flight is concurrency + prefetch for a handler: give those instead")
    check_options(consumer_options, f"@kmq.handler({queue!r})",
                  allowed=("concurrency", "prefetch", "non_retryable"), refused=("max_in_flight",))
    try:  # their values too, here: `kmq worker` refused a nan only when it started (an audit)
        o = consumer_options
        check_arguments(o.get("visibility_timeout_s"), o.get("max_processing_s"), 1, o.get("batch_size", 1),
                        None, o.get("flush_interval_s", 0.1))
    except ConfigError as exc:
        raise ConfigError(f"@kmq.handler({queue!r}): {exc}") from None

    def decorate(fn: Callable[..., Any]) -> Handler:
        if not callable(fn):
            raise ConfigError(f"@kmq.handler({queue!r}) decorates a function, not {fn!r}")
        # A list is taken as a tuple; anything else (one type: ValueError) is refused by name.
        types = tuple(non_retryable) if isinstance(non_retryable, list) else non_retryable
        return Handler(queue, fn, concurrency, prefetch, types, dict(consumer_options))

    return decorate


def handlers_in(module: ModuleType | str) -> list[Handler]:
    """Every :class:`Handler` among the attributes of ``module`` (a module or its import path)."""
    if isinstance(module, str):
        # A file path (./jobs.py) was a TypeError or ValueError from importlib: name the module.
        name = module.removesuffix(".py").strip("./").replace("/", ".") or "jobs"
        hint = f"give its import name, e.g. `kmq worker {name}` (run from its directory or set PYTHONPATH)"
        if not _MODULE_PATH.fullmatch(module):
            raise ConfigError(f"module {module!r} is not a module path: {hint}")
        module = import_module(module, hint)  # its own failures: file:line and what (one line)
    found = [v for v in vars(module).values() if isinstance(v, Handler)]
    return sorted({id(h): h for h in found}.values(), key=lambda h: (h.queue, h.name))


def _check_count(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_CONCURRENCY:
        raise ConfigError(f"{name}={value!r} must be a whole number from {low} to {MAX_CONCURRENCY}")
