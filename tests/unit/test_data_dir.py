"""A tracker data dir unused for longer than the changelog keeps tombstones is rebuilt at start.

Given a data dir with Faust's table folders and a stamp (times set explicitly, no sleeps):
a recent one is kept, a stale one loses its tables and nothing else.
"""

from __future__ import annotations

import os

from app import data_dir as D

DAY_S = 86_400
WEEK_MS = 7 * DAY_S * 1000
NOW = 1_800_000_000.0


def tables(root) -> None:
    d = root / "v1" / "tables" / "tracker-0.db"
    d.mkdir(parents=True)
    (d / "000001.sst").write_bytes(b"x")


def test_a_data_dir_used_recently_is_kept(tmp_path):
    tables(tmp_path)
    D.stamp(tmp_path, NOW - 6 * DAY_S)
    assert not D.rebuild_if_stale(tmp_path, NOW, WEEK_MS)
    assert D.table_dirs(tmp_path)


def test_a_data_dir_older_than_the_tombstones_loses_only_its_tables(tmp_path):
    tables(tmp_path)
    (tmp_path / "other.txt").write_text("kept")
    D.stamp(tmp_path, NOW - 8 * DAY_S)
    assert D.rebuild_if_stale(tmp_path, NOW, WEEK_MS)
    assert D.table_dirs(tmp_path) == [] and (tmp_path / "other.txt").read_text() == "kept"
    assert (tmp_path / "v1").is_dir()


def test_without_a_stamp_the_newest_table_file_tells_the_age(tmp_path):
    tables(tmp_path)
    sst = tmp_path / "v1" / "tables" / "tracker-0.db" / "000001.sst"
    os.utime(sst, (NOW - 2 * DAY_S, NOW - 2 * DAY_S))
    assert D.last_seen_s(tmp_path) == NOW - 2 * DAY_S
    assert D.is_stale(D.last_seen_s(tmp_path), NOW, DAY_S * 1000)
    assert not D.is_stale(D.last_seen_s(tmp_path), NOW, WEEK_MS)


def test_an_empty_or_missing_data_dir_has_nothing_to_rebuild(tmp_path):
    assert not D.rebuild_if_stale(tmp_path / "missing", NOW, 1)
    assert not D.rebuild_if_stale(tmp_path, NOW, 1)


def test_the_margin_counts_most_of_the_tombstone_retention_as_fresh():
    assert not D.is_stale(NOW - 0.89 * 7 * DAY_S, NOW, WEEK_MS)
    assert D.is_stale(NOW - 0.91 * 7 * DAY_S, NOW, WEEK_MS)


def test_the_warning_says_the_share_of_the_tombstone_retention_it_passed(tmp_path, caplog):
    # It said "last used 6.4 days ago, longer than the changelog keeps tombstones (7.0 days)".
    tables(tmp_path)
    D.stamp(tmp_path, NOW - 6.4 * DAY_S)
    with caplog.at_level("WARNING", logger="kmq.tracker"):
        assert D.rebuild_if_stale(tmp_path, NOW, WEEK_MS)
        partition = tmp_path / "p" / "tracker-0.db"
        partition.mkdir(parents=True)
        (partition / "000001.sst").write_bytes(b"x")
        backdate(partition, NOW - 6.4 * DAY_S)
        assert D.rebuild_partition_if_stale(partition, NOW, WEEK_MS)
    assert (f"data dir {tmp_path} was last used 6.4 days ago, past 90% of the 7.0 days the changelog "
            "keeps tombstones (delete.retention.ms): its tables are rebuilt") in caplog.text
    assert ("table partition tracker-0.db was last written 6.4 days ago, past 90% of the 7.0 days the "
            "changelog keeps tombstones (delete.retention.ms): it is rebuilt") in caplog.text


def test_tables_of_a_worker_that_did_not_stop_cleanly_are_rebuilt(tmp_path):
    tables(tmp_path)
    (tmp_path / "other.txt").write_text("kept")
    assert D.rebuild_if_unclean(tmp_path)  # killed: no clean-stop mark
    assert D.table_dirs(tmp_path) == [] and (tmp_path / "other.txt").read_text() == "kept"


def test_tables_after_a_clean_stop_are_kept_and_the_mark_is_taken_at_start(tmp_path):
    tables(tmp_path)
    D.mark_clean_stop(tmp_path)
    assert not D.rebuild_if_unclean(tmp_path)
    assert D.table_dirs(tmp_path)
    # Running now: a kill from here on leaves no mark, so the next start rebuilds.
    assert D.rebuild_if_unclean(tmp_path) and D.table_dirs(tmp_path) == []


def test_a_new_data_dir_has_nothing_to_rebuild(tmp_path):
    assert not D.rebuild_if_unclean(tmp_path / "fresh")


def backdate(path, when_s: float) -> None:
    for f in path.rglob("*"):
        os.utime(f, (when_s, when_s))


def test_a_partition_written_longer_ago_than_the_tombstones_are_kept_is_dropped(tmp_path):
    tables(tmp_path)
    partition = tmp_path / "v1" / "tables" / "tracker-0.db"
    backdate(partition, NOW - 6 * DAY_S)
    assert not D.rebuild_partition_if_stale(partition, NOW, WEEK_MS)
    backdate(partition, NOW - 8 * DAY_S)
    assert D.rebuild_partition_if_stale(partition, NOW, WEEK_MS) and not partition.exists()
    assert not D.rebuild_partition_if_stale(partition, NOW, WEEK_MS), "nothing to drop: Faust makes it anew"


def test_a_table_partition_given_away_and_back_after_the_tombstones_expired_is_restored(tmp_path):
    """Faust's own RocksDB store: a partition this worker gave away resumed from its old
    RocksDB when it came back (settled entries whose tombstones compaction had dropped
    stayed alive). Now one last written longer ago than the changelog keeps tombstones
    opens empty, so Faust restores it from the changelog; a recent one resumes."""
    import time

    import faust
    from faust.types import TP

    from app import consumer_tuning
    from kmq.settings import Settings

    consumer_tuning.apply(Settings())
    app = faust.App("stale-partitions", datadir=str(tmp_path), store="rocksdb://")
    table = app.Table("tracker", partitions=2)
    store = table.data
    old, recent = (TP(table.changelog_topic.get_topic_name(), p) for p in (0, 1))
    for tp in (old, recent):
        store.set_persisted_offset(tp, 41)  # opens the partition's RocksDB and writes to it
    store.revoke_partitions(table, {old, recent})  # given away: Faust keeps the files
    backdate(store.partition_path(0), time.time() - 8 * DAY_S)
    app.tombstones_kept_ms = WEEK_MS  # as TrackerApp learns it at start
    assert store.persisted_offset(old) is None, "restored from the changelog's start"
    assert store.persisted_offset(recent) == 41, "resumed where it stopped"
