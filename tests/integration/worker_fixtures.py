"""Fixtures of the worker tests (test_worker_handlers.py, test_worker_process.py): the
settings with the real defaults, a client of them, and each test once per dispatch mode."""

from __future__ import annotations

import pytest

import kmq
from kmq.settings import DEFAULT_MAX_PROCESSING_S
from tests.conftest import partition_mode


@pytest.fixture
def settings(shared_settings):
    # The real defaults: a 5-minute max_processing_s and a 30 s visibility, not the suite's
    # 2 s. With 2 s a worker stalled for 2 s on a loaded machine let a message lapse and come
    # back, handled twice (test_sigterm_mid_run's fresh-clone run: 8 of 600). The test of
    # the visibility timeout sets a short one itself.
    return shared_settings.replace(max_processing_s=DEFAULT_MAX_PROCESSING_S, visibility_timeout_s=30.0)


@pytest.fixture
def client(settings):
    with kmq.Client(settings=settings) as c:
        yield c


@pytest.fixture(params=["shared", "partition"])
def mode(request, client, queue):
    if request.param == "partition":
        partition_mode(client, queue)
    else:
        client.configure_queue(queue, dispatch="shared")
    return request.param
