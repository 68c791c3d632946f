"""The Workers section of BENCHMARKS.md: every bench/worker.py invocation and probe."""

from __future__ import annotations

import statistics

from bench.report_format import _k, _met, _runs, _source

# What each recorded invocation measured, where its result file cannot say (older files
# carry no commit). Keyed by result name; rendered under its table.
WORKER_NOTES = {
    "worker": "An earlier session's invocation: one run per worker row (--runs applied to the sends only).",
    "worker-issue17-1": "Code of d6d7fde: sends compared in two separate halves; runners received one message "
                        "per free slot. Other sessions' chaos runs loaded the machine (see the load): the "
                        "shared-queue rows at 32 spread (sync 585 to 1,249 msgs/s) while the partition rows "
                        "held, and so did the send comparison (0.28 to 0.88).",
    "worker-issue17-2-probe": "As -1, at concurrency 32 only, with the tracker's CPU per message added.",
    "worker-issue17-3": "Code of c8dfe52: sends compared in 10 alternating chunks in one process, the aio "
                        "send's common case inline. (The next invocation hung at the aio client's close, "
                        "a race in kmq/kafka/delivery_reports.py fixed in c61fcb2, and left no result.)",
    "worker-issue17-5": "Code of c61fcb2: runners receive for every free slot at once (async: one hop to the "
                        "helper thread per batch): the async worker's CPU per message halves (0.15-0.19 "
                        "-> 0.06-0.08 ms at 32).",
    "worker-stop54": "Code of 67a9661 (kmq.aio's send tries without waiting for room and yields every "
                     "256 sends; receives in 0.25 s slices): shared queues at concurrency 32 only, on a "
                     "quiet machine.",
}
PROBE_NOTES = {
    "worker_probe": "Before the runners received for every free slot at once (c8dfe52): the async "
                    "runner's slots idle with messages ready (partition: 38-49% idle, 1-4% of it "
                    "with nothing ready).",
    "worker_probe-batched": "After (9375d23): async idle 6-13%. Of a shared queue's idle samples "
                            "37-58% have nothing ready (the dispatcher's round trip), of a partition "
                            "queue's 6-21%.",
}
LOAD_NOTE = ("Why the shared rows move with the machine's load and the partition ones do not: a "
             "shared queue's messages come through the tracker (the consumer's CREDIT, the "
             "dispatcher's delivery, the consumer's fetch: three processes to be scheduled per "
             "round trip), a partition queue's straight from the broker. The tracker needs about "
             "0.1 ms of CPU per message (the column above), so at 1,600 msgs/s it is not short of "
             "CPU on a quiet machine; on a busy one its turns come late. A first probe during the "
             "loaded invocation -1 (load ~8, printed only: /tmp script, the later "
             "bench/worker_probe.py's method) saw a shared sync worker at 486 msgs/s with 73% of "
             "samples idle, 93% of those with nothing ready, and only 36 of the 288 messages it "
             "may hold in flight: the dispatcher had not delivered what it was credited. That is "
             "the tracker's side (agents/), not the worker's.")


def section(results: dict[str, dict]) -> list[str]:
    """Every bench/worker.py invocation (worker*.json), oldest first: each run is kept."""
    named = sorted(((name, r) for name, r in results.items() if name == "worker" or name.startswith("worker-")),
                   key=lambda nr: nr[1]["when"])
    invocations = [r for _, r in named]
    notes = {id(r): WORKER_NOTES.get(name) for name, r in named}
    if not invocations:
        return []
    work = invocations[-1]["work_ms"]
    out = ["## Workers: `kmq worker` with an I/O-bound handler", "",
           f"One `kmq worker` process, one handler doing {work:g} ms of I/O (a sleep) per message, a",
           "backlog enqueued first; the rate from 10% to 100% acked, read from the worker's",
           f"`--metrics-port`. Goal: >= 0.8 x concurrency x {1000 / work:g}/s (issue 17: >= 1,280 msgs/s",
           "at 32). Every invocation is listed, oldest first; in those with several runs per row",
           "(interleaved), msgs/s is the median and every run is shown.", ""]
    for r in invocations:
        out += [_source(r), "",
                "| mode | handler | concurrency | messages | msgs/s | runs | ideal | of ideal | goal | CPU ms/msg worker, tracker |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        for row in r["rows"]:
            runs = ", ".join(f"{x:,}" for x in row.get("runs", [row["msgs_s"]]))
            cpu = row.get("cpu_ms_per_msg")
            tracker_cpu = row.get("tracker_cpu_ms_per_msg")
            out.append(f"| {row['mode']} | {row['kind']} | {row['concurrency']} | {row['messages']:,} | "
                       f"{row['msgs_s']:,} | {runs} | {row['ideal_msgs_s']:,} | "
                       f"**{row['efficiency']:.2f}** | {_met(row['efficiency'] >= 0.8)} | "
                       f"{'-' if cpu is None else f'{cpu:.2f}'}, {'-' if tracker_cpu is None else f'{tracker_cpu:.2f}'} |")
        send = r["send"]
        out += ["", f"Sends of 100 B, then a flush: `kmq.Client.send` {_k(send['sync']['median'])} msgs/s, "
                f"`await kmq.aio.Client.send` {_k(send['aio']['median'])} msgs/s: ratio "
                f"**{send['ratio']['median']:.2f}** ({_runs(send['ratio'])}), goal >= 0.8 "
                f"{_met(send['ratio']['median'] >= 0.8)}."
                + (f" `await send_and_wait` from 100 concurrent tasks (each its own delivery report): "
                   f"{_k(send['aio_send_and_wait']['median'])} msgs/s "
                   f"({_runs(send['aio_send_and_wait'], '{:,.0f}')})." if "aio_send_and_wait" in send else ""),
                ""]
        loads = [x for row in r["rows"] for x in row.get("load_1m", [])]
        if loads:
            out += [f"Load average (1 min) of the 2-core machine at the rows' starts: {min(loads):.1f} to "
                    f"{max(loads):.1f} (median {statistics.median(loads):.1f}).", ""]
        if notes[id(r)]:
            out += [notes[id(r)], ""]
    if len(invocations) > 1:
        out += [LOAD_NOTE, ""]
    return out + worker_probes(results)


def worker_probes(results: dict[str, dict]) -> list[str]:
    """bench/worker_probe.py: where a busy worker's idle slots come from."""
    named = sorted(((name, r) for name, r in results.items() if name.startswith("worker_probe")),
                   key=lambda nr: nr[1]["when"])
    if not named:
        return []
    out = ["Where the time goes (`bench/worker_probe.py`: one runner in-process, sampled every 10 ms "
           "from 10% to 100% handled). *Idle* = samples with 2+ slots free; *nothing ready* = of "
           "those, the share with no message held ready (the supply lags: for a shared queue, the "
           "credit -> dispatcher -> delivery round trip through the tracker), the rest the worker's "
           "own hand-out.", ""]
    for name, r in named:
        out += [_source(r), "",
                "| mode | handler | concurrency | msgs/s | mean running | idle | nothing ready | "
                "mean ready | mean in flight (of max) | load |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        for row in r["rows"]:
            out.append(f"| {row['mode']} | {row['kind']} | {row['concurrency']} | {row['msgs_s']:,} | "
                       f"{row['mean_running']} | {row['idle_share']:.0%} | "
                       f"{row['idle_nothing_ready_share']:.0%} | {row['mean_ready']} | "
                       f"{row['mean_in_flight']} ({row['max_in_flight']}) | {row['load_1m']:.1f} |")
        out.append("")
        if PROBE_NOTES.get(name):
            out += [PROBE_NOTES[name], ""]
    return out
