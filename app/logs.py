"""JSON log lines for the tracker worker (``KMQ_LOG_FORMAT=json``): one object a line on stdout.

Faust configures logging when the worker starts (mode's ``setup_logging``); with
``logging_config`` set it merges ours over its own, so the root logger keeps the
level of ``-l info`` and its one handler writes :class:`JsonFormatter` lines.
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
