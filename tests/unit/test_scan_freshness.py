"""Whether the views' depth figures are current (``scanned``): the scan runs only while
somebody looks, so the first look after a quiet spell gets the last pass's figures, from
before it, until the pass it started ends (`kmq stats` waits for that)."""

from kmq.queue_config import QueueConfig
from kmq.settings import Settings
from web.queue_scan import QueueScanner


def test_figures_are_fresh_only_after_a_pass_that_ended_since_the_scanner_was_woken():
    scanner = QueueScanner(Settings(bootstrap_servers="127.0.0.1:1"), owned=set, known_queues=set,
                           started_upto=lambda q, p: None, config=lambda q: QueueConfig())
    assert not scanner.fresh  # a worker that just started: nothing scanned
    scanner.want()
    scanner.passes += 1
    assert scanner.fresh
    scanner.want()  # still watched: no wake, the figures stay current
    assert scanner.fresh
    scanner._wanted_until = 0.0  # a quiet spell: passes stopped, the figures went stale
    scanner.want()  # it said scanned here, with depths from before the quiet spell
    assert not scanner.fresh
    scanner.passes += 1
    assert scanner.fresh
