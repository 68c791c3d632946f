"""Where the tracker service is found (kmq.dev.devstack.service_root)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kmq.dev.devstack import service_root
from kmq.errors import ConfigError

CHECKOUT = Path(__file__).resolve().parents[2]


def test_found_from_any_working_directory(tmp_path, monkeypatch):
    # A benchmark or a `kmq dev` run from elsewhere finds the checkout kmq was imported from.
    monkeypatch.delenv("KMQ_SERVICE_ROOT", raising=False)
    monkeypatch.chdir(tmp_path)
    assert service_root() == CHECKOUT


def test_kmq_service_root_comes_first(tmp_path, monkeypatch):
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "agents").mkdir()
    monkeypatch.setenv("KMQ_SERVICE_ROOT", str(tmp_path))
    assert service_root() == tmp_path


def test_a_root_without_the_service_is_an_error_naming_it(tmp_path, monkeypatch):
    # Not skipped for the checkout kmq runs from: that tracker is not the one asked for.
    monkeypatch.setenv("KMQ_SERVICE_ROOT", str(tmp_path))  # no app/ there
    monkeypatch.chdir(CHECKOUT)
    with pytest.raises(ConfigError, match=f"KMQ_SERVICE_ROOT={tmp_path} does not hold the tracker "
                                          "service .*set it to a kmq checkout, or unset it"):
        service_root()


def test_no_checkout_anywhere_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.delenv("KMQ_SERVICE_ROOT", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("kmq.dev.devstack.__file__", str(tmp_path / "kmq" / "dev" / "devstack.py"))
    with pytest.raises(ConfigError, match="KMQ_SERVICE_ROOT"):
        service_root()
