"""A worker restarted on the data dir of a killed one rebuilds its tables from the changelog.

RocksDB takes a table write before the changelog does; a killed worker's data dir can hold
writes the changelog never got, which a restarted worker would keep without ever writing
them again (app/data_dir.py). After a clean stop the data dir is reused as it is.
"""

from __future__ import annotations


import pytest

import kmq
from kmq.dev.devstack import TrackerProcess
from tests.conftest import wait_for
from tests.integration.views import scheduled

UNCLEAN = "did not stop cleanly"


@pytest.mark.slow
def test_a_killed_workers_tables_are_rebuilt_and_a_cleanly_stopped_ones_reused(make_settings, artifacts, queue):
    s = make_settings()
    log = artifacts / f"tracker-unclean-{s.app_id}.log"
    t = TrackerProcess(s, log).start(timeout_s=120)
    try:
        with kmq.Client(settings=s) as client:
            client.send(queue, b"delayed", delay_s=3600)  # an entry in the tracker's table
            client.flush()
        wait_for(lambda: scheduled(t, queue) == 1, 60, what="the delayed send in the table")
        t.stop()
        t = TrackerProcess(s, log).start(timeout_s=120)  # after a clean stop: reused
        wait_for(lambda: scheduled(t, queue) == 1, 60, what="the delayed send after a clean stop")
        assert log.read_text().count(UNCLEAN) == 0
        t.kill()
        t = TrackerProcess(s, log).start(timeout_s=120)  # after a kill: rebuilt from the changelog
        wait_for(lambda: scheduled(t, queue) == 1, 60, what="the delayed send restored")
        assert log.read_text().count(UNCLEAN) == 1
    finally:
        t.stop()
