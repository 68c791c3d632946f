"""A tracker data dir that slept longer than the changelog keeps tombstones is rebuilt.

Faust resumes a table partition from the changelog offset its RocksDB saved. Compaction
drops a tombstone ``delete.retention.ms`` after it was written; a worker stopped longer
than that may never read the tombstones of entries settled meanwhile, and its RocksDB
would keep them alive: settled messages redelivered. So a worker stamps its data dir
every minute, and at start one whose stamp is older than (most of) the changelog's
``delete.retention.ms`` drops its tables: Faust restores them from the changelog.
Only Faust's table folders (``<KMQ_DATA_DIR>/v*/tables``) are removed.

The same holds for one table partition while the worker runs: a partition this worker
gave away (neither active nor standby here any more) keeps its RocksDB, and Faust
resumes from it when the partition comes back, days later perhaps (three or more
workers, a rolling restart). So before Faust opens a partition's RocksDB
(``app.consumer_tuning``), one whose newest file is older than most of the changelog's
``delete.retention.ms`` is dropped and restored from the changelog. (A partition held
all along but idle that long is restored too: slower, never wrong.)

The same holds after a worker was killed: RocksDB takes each table write at once, the
changelog a moment later (Faust's producer buffer), and the markers agent skips records
whose changes its table already holds. A worker restarted on the data dir of a killed one
would keep writes the changelog never got (an ACK's delete, an ACQUIRE's entry) and never
write them again: the next worker to restore that partition from the changelog would
redeliver the acked message, or lose track of the acquired one. So a worker that stops
cleanly (Faust flushed its producer and closed its tables) leaves a mark, and at start a
data dir with tables and no mark drops them too (Kafka Streams does the same after an
unclean shutdown under exactly-once).
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

log = logging.getLogger("kmq.tracker")

STAMP = "kmq-last-seen"
CLEAN_STOP = "kmq-clean-stop"  # present only between a clean stop and the next start
STAMP_INTERVAL_S = 60.0
# Offline for more than this share of delete.retention.ms counts as stale (clock skew, the
# stamp's interval, compaction timing).
STALE_SHARE = 0.9


def table_dirs(data_dir: str | os.PathLike) -> list[Path]:
    """Faust's RocksDB table folders under the data dir (``v<version>/tables``)."""
    return sorted(p for p in Path(data_dir).glob("v*/tables") if p.is_dir())


def last_seen_s(data_dir: str | os.PathLike) -> float | None:
    """When a worker last ran on this data dir: its stamp, else its tables' newest file (None: no tables)."""
    dirs = table_dirs(data_dir)
    if not dirs:
        return None
    stamp = Path(data_dir) / STAMP
    if stamp.is_file():
        return stamp.stat().st_mtime
    times = [f.stat().st_mtime for d in dirs for f in d.rglob("*") if f.is_file()]
    return max(times, default=max(d.stat().st_mtime for d in dirs))


def is_stale(last_seen: float | None, now_s: float, tombstones_kept_ms: int) -> bool:
    """Whether tables last written at ``last_seen`` may miss tombstones compaction has dropped."""
    return last_seen is not None and now_s - last_seen > STALE_SHARE * tombstones_kept_ms / 1000


def rebuild_if_stale(data_dir: str | os.PathLike, now_s: float, tombstones_kept_ms: int) -> bool:
    """Remove the tables of a stale data dir (Faust restores them); True if it did."""
    seen = last_seen_s(data_dir)
    if not is_stale(seen, now_s, tombstones_kept_ms):
        return False
    assert seen is not None
    for d in table_dirs(data_dir):
        shutil.rmtree(d)
    log.warning("data dir %s was last used %.1f days ago, past %.0f%% of the %.1f days the changelog "
                "keeps tombstones (delete.retention.ms): its tables are rebuilt from the changelog",
                data_dir, (now_s - seen) / 86400, STALE_SHARE * 100, tombstones_kept_ms / 86_400_000)
    return True


def newest_file_s(path: str | os.PathLike) -> float | None:
    """When anything under ``path`` was last written (None: no files)."""
    times = [f.stat().st_mtime for f in Path(path).rglob("*") if f.is_file()]
    return max(times, default=None)


def rebuild_partition_if_stale(path: str | os.PathLike, now_s: float, tombstones_kept_ms: int) -> bool:
    """Before a table partition's RocksDB at ``path`` opens: remove it if it was last written
    too long ago to resume from (Faust then restores the partition); True if it did."""
    seen = newest_file_s(path)
    if not is_stale(seen, now_s, tombstones_kept_ms):
        return False
    assert seen is not None
    shutil.rmtree(path)
    log.warning("table partition %s was last written %.1f days ago, past %.0f%% of the %.1f days the "
                "changelog keeps tombstones (delete.retention.ms): it is rebuilt from the changelog",
                Path(path).name, (now_s - seen) / 86400, STALE_SHARE * 100, tombstones_kept_ms / 86_400_000)
    return True


def stamp(data_dir: str | os.PathLike, now_s: float | None = None) -> None:
    """Record that a worker runs on this data dir now."""
    path = Path(data_dir)
    path.mkdir(parents=True, exist_ok=True)
    (path / STAMP).touch()
    if now_s is not None:
        os.utime(path / STAMP, (now_s, now_s))


def mark_clean_stop(data_dir: str | os.PathLike) -> None:
    """Record that the worker on this data dir stopped cleanly (every table write is in the changelog)."""
    path = Path(data_dir)
    path.mkdir(parents=True, exist_ok=True)
    (path / CLEAN_STOP).touch()


def rebuild_if_unclean(data_dir: str | os.PathLike) -> bool:
    """At start: drop the tables of a data dir whose last worker did not stop cleanly (Faust
    restores them from the changelog); True if it did. Either way the mark is taken away,
    so that a worker killed from now on leaves none."""
    mark = Path(data_dir) / CLEAN_STOP
    clean = mark.is_file()
    mark.unlink(missing_ok=True)
    dirs = [d for d in table_dirs(data_dir) if any(f.is_file() for f in d.rglob("*"))]
    if clean or not dirs:  # (Faust makes the folders of a new data dir empty)
        return False
    for d in dirs:
        shutil.rmtree(d)
    log.warning("data dir %s: the last worker on it did not stop cleanly (killed?); its tables may "
                "hold writes the changelog never got, so they are rebuilt from the changelog", data_dir)
    return True
