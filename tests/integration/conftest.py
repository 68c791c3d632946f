"""Fixtures the integration tests share beyond tests/conftest.py's."""

from __future__ import annotations

import pytest

from kmq.settings import DEFAULT_MAX_PROCESSING_S


@pytest.fixture
def default_settings(shared_settings):
    """The suite's settings with the 5-minute default back (the suite sets 0)."""
    return shared_settings.replace(max_processing_s=DEFAULT_MAX_PROCESSING_S)


@pytest.fixture(params=["shared", "partition"])
def mode(request):
    """Each test once per dispatch mode."""
    return request.param
