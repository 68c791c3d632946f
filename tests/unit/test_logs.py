"""KMQ_LOG_FORMAT=json makes the tracker worker log one JSON object a line."""

from __future__ import annotations

import io
import json
import logging
import sys

import pytest

from app import logs
from app.settings import faust_options
from kmq.errors import ConfigError
from kmq.settings import Settings


def test_json_is_asked_for_by_its_setting_and_text_stays_fausts():
    assert "logging_config" not in faust_options(Settings())
    assert faust_options(Settings(log_format="json"))["logging_config"]["merge"] is True
    with pytest.raises(ConfigError, match="KMQ_LOG_FORMAT='xml': use text or json"):
        Settings(log_format="xml")


def test_faust_logging_setup_with_the_json_config_writes_json_lines(monkeypatch):
    from mode.utils.logging import setup_logging

    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        setup_logging(loglevel="info", logging_config=logs.logging_config())
        logging.getLogger("kmq.tracker").info("hello %s", "world")
        logging.getLogger("kmq.tracker").debug("not at info")
        try:
            raise ValueError("boom")
        except ValueError:
            logging.getLogger("faust").exception("failed")
    finally:
        root.handlers[:], root.level = saved
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(x["level"], x["logger"], x["message"]) for x in lines] == [
        ("INFO", "kmq.tracker", "hello world"), ("ERROR", "faust", "failed")]
    assert "ValueError: boom" in lines[1]["exc"] and lines[0]["ts"].endswith("+00:00")
