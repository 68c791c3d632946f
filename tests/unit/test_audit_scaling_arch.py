"""Claims of docs/scaling.md and docs/architecture.md a user or operator relies on, checked
against the code: the partition-mode consumer group's name, the queue retention start-up
check, what a spread accepts, and that every ``KMQ_*`` variable and file the two docs name
exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kmq.errors import ConfigError
from kmq.queue_config import QueueConfig
from kmq.setting_names import OTHER_VARIABLE_NAMES
from kmq.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "docs" / "scaling.md", ROOT / "docs" / "architecture.md", ROOT / "docs" / "embedded-broker.md"]


def test_a_queue_switched_to_partition_mode_from_the_default_gets_a_group_of_its_switch():
    # docs/scaling.md: the group is <KMQ_GROUP_PREFIX><queue>, with @<switch time ms> after a
    # switch of mode, which configure_queue(dispatch="partition") is under KMQ_DISPATCH=shared.
    s = Settings(group_prefix="p.")
    before = QueueConfig()
    switched = before.changed(dispatch="partition").switched(s, before)
    assert re.fullmatch(r"p\.orders@\d+", switched.group_id(s, "orders"))
    # A queue that was always in partition mode (KMQ_DISPATCH=partition) has the bare name.
    s = Settings(group_prefix="p.", dispatch="partition")
    assert QueueConfig().group_id(s, "orders") == "p.orders"


def test_queue_retention_must_exceed_max_processing_plus_the_visibility_timeout():
    # docs/scaling.md, Retention: a held message comes back a visibility timeout after its last
    # keepalive, so the check is against KMQ_MAX_PROCESSING_S + KMQ_VISIBILITY_TIMEOUT_S.
    with pytest.raises(ConfigError, match="KMQ_QUEUE_RETENTION_MS=301000"):
        Settings(max_delay_s=100, max_processing_s=300, visibility_timeout_s=30,
                 queue_retention_ms=301_000)
    Settings(max_delay_s=100, max_processing_s=300, visibility_timeout_s=30, queue_retention_ms=331_000)
    # With no keepalive (0), only the visibility timeout and the longest delay count.
    Settings(max_delay_s=100, max_processing_s=0, visibility_timeout_s=30, queue_retention_ms=101_000)


@pytest.mark.parametrize("spread", ["4", 0, -2, 2.5, True, None])
def test_a_spread_that_is_not_a_whole_number_from_1_is_a_config_error_naming_it(spread):
    # "4" compared with an int was a TypeError; 0 and -2 were "below the current 1".
    with pytest.raises(ConfigError, match=r"spread=.* must be a whole number from 1 to 1024"):
        QueueConfig().spread_to(spread, {})


def test_a_spread_still_only_grows():
    with pytest.raises(ConfigError, match="spread=2 is below the current 3: a spread only grows"):
        QueueConfig(spread=3).spread_to(2, {})
    assert QueueConfig(spread=3).spread_to(4, {5: 10}).partition_starts == {5: 10}


def _doc_text() -> str:
    return "\n".join(p.read_text() for p in DOCS)


def test_every_kmq_variable_the_docs_name_is_one_kmq_reads():
    import dataclasses
    read = {f.metadata["env"] for f in dataclasses.fields(Settings)} | set(OTHER_VARIABLE_NAMES)
    named = set(re.findall(r"\bKMQ_[A-Z0-9_]*[A-Z0-9]\b", _doc_text()))
    assert named and named <= read, sorted(named - read)


def test_every_file_the_docs_name_exists():
    named = set(re.findall(r"`((?:kmq|agents|app|tables|web|tests)/[\w/]+\.py)`", _doc_text()))
    assert named and all((ROOT / n).exists() for n in named), sorted(n for n in named if not (ROOT / n).exists())


@pytest.mark.parametrize("args, named", [
    (("orders", 0), "num_partitions=0"), (("orders", -4), "num_partitions=-4"),
    (("orders", 8.0), "num_partitions=8.0"), (("orders", "8"), "num_partitions='8'"),
    (("orders", 8, 0), "spread=0"), (("orders", 8, 1.5), "spread=1.5"), ((b"orders", 8), "queue=b'orders'"),
])
def test_queue_partitions_refuses_bad_arguments_naming_them(args, named):
    # docs/scaling.md tells operators to check a placement with queue_partitions: a zero count
    # was a ZeroDivisionError, a negative one (0,), spread=0 one partition, bytes AttributeError.
    from kmq.protocol.placement import queue_partitions
    with pytest.raises(ConfigError, match=re.escape(named)):
        queue_partitions(*args)


@pytest.mark.parametrize("args, named", [(("orders", 0), "num_partitions=0"), (("orders", -3), "num_partitions=-3"),
                                         ((None, 8), "queue=None")])
def test_markers_partition_refuses_bad_arguments_naming_them(args, named):
    from kmq.protocol.placement import markers_partition
    with pytest.raises(ConfigError, match=re.escape(named)):
        markers_partition(*args)


def test_placement_as_documented():
    # docs/scaling.md: home = murmur2(queue id) mod Pq, then the k consecutive partitions.
    from kmq.protocol.placement import markers_partition, murmur2, queue_partitions
    home = (murmur2(b"orders") & 0x7FFFFFFF) % 16
    assert queue_partitions("orders", 16, 3) == (home, (home + 1) % 16, (home + 2) % 16)
    assert markers_partition("orders", 12) == (murmur2(b"orders") & 0x7FFFFFFF) % 12
