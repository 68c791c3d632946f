"""Hostile marker records: the tracker's time and memory per record, for the worst the codec accepts.

Decodes each record and applies it to a state machine over an in-memory store
(the tracker's decisions without Kafka or RocksDB), measuring per record:
wall time, tracemalloc's peak and the bytes of table entries read and written
(``PartitionState.work_bytes``, bounded by ``MAX_RECORD_WORK_BYTES``).

Cases:
- ``issue-12``: the record of issue 12 (1,200 full-mask STARTs of 4M offsets),
  refused whole now (it was 534 MiB of masks);
- ``widest-starts``: the most offsets one record may carry (4 full STARTs of
  MAX_RANGE_LEN = MAX_RECORD_OFFSETS offsets);
- ``most-markers``: MAX_MARKERS_PER_RECORD one-offset STARTs;
- ``heavy-entry``: EXTENDs, as many as fit one record, on an entry first
  grown to its limit (MAX_GROUPS_PER_RANGE groups, each a top-bit mask and
  the longest reason): every marker rewrites a ~3 MiB entry;
- ``budget-stop``: the same on a range of 4,096 offsets, 64 EXTENDs a record:
  the record's work budget (MAX_RECORD_WORK_BYTES) refuses the markers past it.

    python -m bench.hostile_markers [--records 3]
"""

from __future__ import annotations

import argparse
import struct
import time
import tracemalloc

from bench.common import save
from kmq.errors import MarkerDecodeError
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.protocol.limits import MAX_GROUPS_PER_RANGE, MAX_RECORD_WORK_BYTES
from kmq.protocol.state import PartitionState
from kmq.protocol.store import MemoryStore


def raw_start(queue: str, start: int, end: int) -> bytes:
    q = queue.encode()
    return (struct.pack(">BH", marker_codec.MarkerType.START, len(q)) + q + struct.pack(">Iqq", 0, start, end)
            + struct.pack(">II", 30_000, 0))


def record(bodies: list[bytes]) -> bytes:
    return struct.pack(">BH", marker_codec.VERSION, len(bodies)) + b"".join(bodies)


def cases(n_records: int) -> dict[str, tuple[PartitionState, list[bytes]]]:
    out = {}
    out["issue-12"] = (PartitionState(MemoryStore()), [
        record([raw_start("q", (k * 1200 + i) << 22, ((k * 1200 + i) << 22) + (1 << 22)) for i in range(1200)])
        for k in range(n_records)])
    L = M.MAX_RANGE_LEN
    per = M.MAX_RECORD_OFFSETS // L
    out["widest-starts"] = (PartitionState(MemoryStore()), [
        marker_codec.encode([M.Start(M.RangeRef("q", 0, (k * per + i) * L, (k * per + i + 1) * L), 30_000,
                          (1 << L) - 1) for i in range(per)]) for k in range(n_records)])
    out["u16-markers"] = (PartitionState(MemoryStore()), [  # 65,535 (the u16 count): refused whole
        record([raw_start("q", k * 70_000 + i, k * 70_000 + i + 1) for i in range(0xFFFF)])
        for k in range(n_records)])
    out["most-markers"] = (PartitionState(MemoryStore()), [
        marker_codec.encode([M.Start(M.RangeRef("q", 0, k * 70_000 + i, k * 70_000 + i + 1), 30_000, 1)
                  for i in range(M.MAX_MARKERS_PER_RECORD)]) for k in range(n_records)])
    for name, width in (("heavy-entry", L), ("budget-stop", 4096)):
        # One entry grown to its limit: every group a top-bit mask and the longest reason;
        # then records of as many EXTENDs of it as fit one record.
        state = PartitionState(MemoryStore())
        r = M.RangeRef("q", 0, 0, width)
        state.apply(M.Start(r, 30_000, r.full_mask), 0)
        for g in range(MAX_GROUPS_PER_RANGE + 10):
            state.begin_record()
            state.apply(M.Reject(r, 1 << (width - 1 - g), "r" * (M.MAX_REASON_BYTES - 8) + f"{g:08d}"), 0)
        n = min(M.MAX_RECORD_OFFSETS // width, M.MAX_MARKERS_PER_RECORD)
        out[name] = (state, [marker_codec.encode([M.Extend(r, 1 << (width - 1 - k), 1000 + k * 100 + i) for i in range(n)])
                             for k in range(n_records)])
    return out


def measure(state: PartitionState, data: bytes) -> dict:
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        markers = marker_codec.decode_lenient(data).markers
    except MarkerDecodeError:
        markers = []
    state.begin_record()
    refused = 0
    for m in markers:
        a = state.apply(m, 1_000_000)
        refused += a is not None and a.what == "malformed-marker"
    took = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"record_bytes": len(data), "markers": len(markers), "refused": refused, "seconds": round(took, 4),
            "peak_mib": round(peak / 2**20, 2), "work_mib": round(state.work_bytes / 2**20, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=3)
    ap.add_argument("--save", action="store_true", help="write bench/results/hostile_markers.json")
    args = ap.parse_args()
    results = {}
    for name, (state, records) in cases(args.records).items():
        runs = [measure(state, data) for data in records]
        results[name] = runs
        worst = max(runs, key=lambda r: r["seconds"])
        print(f"{name:14s} {worst['record_bytes']:>9,} B record, {worst['markers']:>6} markers "
              f"({worst['refused']} refused): worst {worst['seconds'] * 1000:8.1f} ms, "
              f"peak {worst['peak_mib']:7.2f} MiB, entries read+written {worst['work_mib']:7.2f} MiB "
              f"(budget {MAX_RECORD_WORK_BYTES / 2**20:.0f} MiB)", flush=True)
    if args.save:
        path = save("hostile_markers", {"command": f"python -m bench.hostile_markers --records {args.records}",
                                        "results": results})
        print(f"saved {path} (bench/report.py has no section for it yet)")


if __name__ == "__main__":
    main()
