"""JSON log lines for the tracker worker (``KMQ_LOG_FORMAT=json``): one object a line on stdout.

Faust configures logging when the worker starts (mode's ``setup_logging``); with
``logging_config`` set it merges ours over its own, so the root logger keeps the
level of ``-l info`` and its one handler writes :class:`JsonFormatter` lines. Faust's
start-up spinner hid and showed the cursor on stdout even when it was no terminal, so the
first JSON line began with those escape codes (black-box audit): :func:`quiet_spinner`
leaves a stdout that is no terminal alone.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Any


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "message"[, "exc"]}``, UTC timestamps with milliseconds."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def logging_config() -> dict[str, Any]:
    """Faust's ``logging_config``: merged over mode's, replacing its coloured stdout handler."""
    return {
        "merge": True,
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {"default": {"class": "logging.StreamHandler", "formatter": "json",
                                 "stream": "ext://sys.stdout"}},
    }


def quiet_spinner() -> None:
    """Faust's spinner writes its cursor codes only to a terminal (once per process)."""
    from faust.utils.terminal.spinners import Spinner

    if getattr(Spinner, "_kmq_quiet", False):
        return
    begin, finish_codes = Spinner.begin, Spinner._finish.__func__

    def begin_on_a_terminal(self: Spinner) -> None:
        if self.file.isatty():
            begin(self)

    def finish_on_a_terminal(cls: type, file: Any, *, at_exit: bool = False) -> None:
        if file.isatty():
            finish_codes(cls, file, at_exit=at_exit)

    def finish(self: Spinner) -> None:
        if self.file.isatty():
            print(f"{self.bell * (self.width + 1)}", end="", file=self.file)
        type(self)._finish(self.file)
        self.stop()

    Spinner.begin = begin_on_a_terminal
    Spinner._finish = classmethod(finish_on_a_terminal)
    Spinner.finish = finish
    Spinner._kmq_quiet = True
