"""The stop watchdog (app.stop_watchdog): armed, it exits with status 1 after its limit, once."""

from __future__ import annotations

import pytest

from app.stop_watchdog import StopWatchdog
from kmq.errors import ConfigError
from kmq.settings import Settings
from tests.conftest import wait_for


def test_armed_it_exits_with_status_1_after_its_limit_and_a_second_arm_changes_nothing():
    exits: list[int] = []
    dog = StopWatchdog(0.05, exit_now=exits.append)
    dog.arm()
    first = dog._thread
    dog.arm()
    assert dog._thread is first
    wait_for(lambda: exits, 10, what="the exit")
    first.join(10)
    assert exits == [1]


def test_unarmed_or_cancelled_it_never_exits():
    exits: list[int] = []
    StopWatchdog(0.01, exit_now=exits.append)  # never armed: no thread at all
    dog = StopWatchdog(0.5, exit_now=exits.append)
    dog.arm()
    dog.cancel()
    dog._thread.join(10)
    assert not dog._thread.is_alive() and exits == []


def test_the_limit_is_a_setting_with_bounds():
    assert Settings.from_env({}).stop_timeout_s == 90.0
    assert Settings.from_env({"KMQ_STOP_TIMEOUT_S": "20"}).stop_timeout_s == 20.0
    with pytest.raises(ConfigError, match="KMQ_STOP_TIMEOUT_S=0 is not above 0"):
        Settings.from_env({"KMQ_STOP_TIMEOUT_S": "0"})
    with pytest.raises(ConfigError, match=r"KMQ_STOP_TIMEOUT_S=5000000000.0 is above 4,294,967"):
        Settings.from_env({"KMQ_STOP_TIMEOUT_S": "5e9"})


def test_a_log_handler_that_blocks_does_not_keep_the_worker_alive():
    # An audit: one worker of 22 logged no watchdog line and ran on; whatever held it, the
    # exit no longer waits for the line to be written.
    import logging
    import threading

    release = threading.Event()

    class Stuck(logging.Handler):
        def emit(self, record):
            release.wait(30)

    stuck = Stuck()
    logging.getLogger("kmq.tracker").addHandler(stuck)
    try:
        exits: list[int] = []
        dog = StopWatchdog(0.01, exit_now=exits.append, say_why_s=0.05)
        dog.arm()
        wait_for(lambda: exits, 10, what="the exit while the log line is stuck")
        assert exits == [1]
    finally:
        release.set()
        logging.getLogger("kmq.tracker").removeHandler(stuck)
