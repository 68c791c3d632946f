"""BENCHMARKS.md from the measured results in ``bench/results/*.json``.

Every figure in BENCHMARKS.md comes from a result file written by a
benchmark run (with its command, machine and time), so the page cannot drift
from what was measured: a unit test renders it again and compares.

    python -m bench.report [--plot]     # --plot also draws the scale curves (matplotlib)
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from bench import (before_after, broker_split_read, dedup_replay, garbage_flood, lateness_ab, send_codecs,
                   worker_report)

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results"
PAGE = ROOT / "BENCHMARKS.md"
PLOT = RESULTS / "tracker_scale.png"


def load(results: Path = RESULTS) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(results.glob("*.json"))}


def _k(x: float) -> str:
    return f"{x / 1000:,.0f}k" if x >= 10_000 else f"{x:,.0f}"


def _met(ok: bool) -> str:
    return "met" if ok else "**not met**"


def runs_of(results: dict[str, dict], prefix: str) -> list[dict]:
    """The results named ``prefix`` or ``prefix-NAME`` (every run of one benchmark), oldest first."""
    return sorted((r for name, r in results.items() if name == prefix or name.startswith(prefix + "-")),
                  key=lambda r: r["when"])


def _source(r: dict) -> str:
    return f"`{r['command']}` ({r['machine']}; {r['when']})"


def _runs(v: dict, fmt: str = "{:.2f}") -> str:
    return ", ".join(fmt.format(x) for x in v["runs"])


def throughput(r: dict) -> list[str]:
    out = ["## Throughput: send -> receive -> ack, tracker running", "",
           "Both loops read the same records of one queue's partition on the same broker, in the",
           "same process, alternating which goes first: the plain loop is a consumer group that",
           "commits every batch (the baseline); the kmq loop receives, acks every message and",
           "waits until its acks are durable, with the tracker worker running. Each queue has a",
           "partition of its own (results before 2026-11-25 20:00 read queues sharing partitions).",
           f"Medians of {len(r['results']['100']['ratio']['runs'])} runs; kmq CPU x plain is each run's "
           "kmq consumer CPU per message over the plain loop's.", "",
           "| size | plain msgs/s | kmq msgs/s | ratio (runs) | goal | kmq batch-ack ratio | "
           "CPU s / 100k msgs: plain, kmq consumer, tracker | kmq CPU x plain (goal <= 2) |",
           "|---|---|---|---|---|---|---|---|"]
    goals = {"100": 0.8, "1024": 0.8}  # issue 14: >= 0.8 at both sizes
    for size, v in r["results"].items():
        ratio = v["ratio"]["median"]
        cpu = statistics.median(k / p for k, p in zip(v["kmq_consumer_cpu_s_per_100k"]["runs"],
                                                      v["plain_cpu_s_per_100k"]["runs"]))
        out.append(
            f"| {size} B | {_k(v['plain_msgs_s']['median'])} | {_k(v['kmq_msgs_s']['median'])} | "
            f"**{ratio:.2f}** ({_runs(v['ratio'])}) | >= {goals[size]} {_met(ratio >= goals[size])} | "
            f"{v['ratio_batch_ack']['median']:.2f} | {v['plain_cpu_s_per_100k']['median']:.2f}, "
            f"{v['kmq_consumer_cpu_s_per_100k']['median']:.2f}, "
            f"{v['kmq_tracker_cpu_s_per_100k']['median']:.2f} | **{cpu:.2f}** {_met(cpu <= 2)} |")
    best = max(v["kmq_msgs_s"]["median"] for v in r["results"].values())
    out += ["", "One invocation: every run of each code, pooled, is in the tables below (steadier on this "
            "shared machine).", "",
            f"Absolute goal >= 400k msgs/s at 100 B: {_met(r['results']['100']['kmq_msgs_s']['median'] >= 4e5)}"
            f" ({_k(r['results']['100']['kmq_msgs_s']['median'])}; best size {_k(best)}).", "",
            f"Source: {_source(r)}.", ""]
    return out


def throughput_runs(results: dict[str, dict]) -> list[str]:
    """Every invocation of the throughput benchmark, oldest first: ``throughput`` (the
    latest, above) and ``throughput-*`` (each with a ``note`` naming the code it measured).
    Goal of issue 14: the kmq consumer's CPU per message within 2x of the plain loop's."""
    runs = runs_of(results, "throughput")
    if len(runs) < 2:
        return []
    out = ["### Every run, oldest first", "",
           "Medians of each invocation's runs; kmq CPU x plain is the kmq consumer's CPU per message over "
           "the plain loop's, each run's own (goal <= 2).", "",
           "| invocation ended | code | size | plain msgs/s | kmq msgs/s | ratio (runs) | "
           "CPU s / 100k: plain, kmq consumer, tracker | kmq CPU x plain (runs) |",
           "|---|---|---|---|---|---|---|---|"]
    for r in runs:
        for size, v in r["results"].items():
            cpu = [k / p for k, p in zip(v["kmq_consumer_cpu_s_per_100k"]["runs"], v["plain_cpu_s_per_100k"]["runs"])]
            out.append(f"| {r['when']} | {r.get('note', 'latest')} | {size} B | {_k(v['plain_msgs_s']['median'])} | "
                       f"{_k(v['kmq_msgs_s']['median'])} | {v['ratio']['median']:.2f} ({_runs(v['ratio'])}) | "
                       f"{v['plain_cpu_s_per_100k']['median']:.2f}, {v['kmq_consumer_cpu_s_per_100k']['median']:.2f}, "
                       f"{v['kmq_tracker_cpu_s_per_100k']['median']:.2f} | "
                       f"**{statistics.median(cpu):.2f}** ({', '.join(f'{x:.2f}' for x in cpu)}) |")
    out += ["", "Each code's runs pooled (every invocation of it above), medians:", "",
            "| code | size | runs | kmq/plain msgs/s (goal >= 0.8) | kmq CPU x plain (goal <= 2) |",
            "|---|---|---|---|---|"]
    pooled: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for r in runs:
        for size, v in r["results"].items():
            pooled.setdefault((r.get("note", "latest"), size), []).extend(
                (t, k / p) for t, k, p in zip(v["ratio"]["runs"], v["kmq_consumer_cpu_s_per_100k"]["runs"],
                                              v["plain_cpu_s_per_100k"]["runs"]))
    for (note, size), xs in pooled.items():
        ratio, cpu = statistics.median(t for t, _ in xs), statistics.median(c for _, c in xs)
        out.append(f"| {note} | {size} B | {len(xs)} | **{ratio:.2f}** {_met(ratio >= 0.8)} | "
                   f"**{cpu:.2f}** {_met(cpu <= 2)} |")
    out.append("")
    out += [f"Source ({r.get('note', 'latest')}): {_source(r)}" for r in runs if r is not results.get("throughput")]
    return out + [""]


def lateness(results: dict[str, dict]) -> list[str]:
    rows = [(k, v) for k, v in results.items() if k in ("lateness", "lateness-load")]
    if not rows:
        return []
    out = ["## Redelivery and delayed-delivery lateness", "",
           "Republished record timestamp minus its deadline (redelivery) or due time (delayed",
           "send), both on the tracker's clock; `--load` adds a send/receive/ack workload on",
           "another queue meanwhile. Medians over runs where the result holds several (each run's",
           "p99 in brackets).", "",
           "| what | load | samples | p50 ms | p99 ms (runs) | max ms | goal p99 <= 250 ms |",
           "|---|---|---|---|---|---|---|"]
    for key, r in rows:
        for what in ("redelivery", "delayed"):
            v = r[what]
            runs = " (" + ", ".join(f"{x['p99_ms']:.0f}" for x in v["runs"]) + ")" if "runs" in v else ""
            out.append(f"| {what} | {'yes' if key.endswith('load') else 'no'} | {v['samples']} | "
                       f"{v['p50_ms']:.0f} | {v['p99_ms']:.0f}{runs} | {v['max_ms']:.0f} | "
                       f"{_met(v['p99_ms'] <= 250)} |")
    return out + [""] + [f"Source: {_source(r)}." for _, r in rows] + [""]


def chaos(r: dict) -> list[str]:
    c, a, d = r["chaos"], r["accounting"], r["drain"]
    shared = r.get("config", {}).get("dispatch") == "shared"
    ordered = bool(r.get("config", {}).get("ordered_queues"))
    title = ("## Chaos on ordered queues: order per group under kills and restarts" if ordered
             else "## Chaos on shared queues: kills at any moment, restarts, consumers joining and leaving"
             if shared else "## Chaos: kills, restarts, rebalances, exact accounting")
    out = [title, "",
           "Consumers SIGKILLed and restarted, tracker workers SIGKILLed and restarted on their data",
           "dir (keep) or an empty one (wipe), extra consumers started and stopped (rebalances), while",
           "messages are sent, acked, released and rejected; then every message id is accounted for",
           "(rules: docs/reliability.md).", "",
           "| consumer kills | tracker kills | rebalances | sent | acked | dead-lettered | lost | "
           "duplicates (after kills) | delivered after a durable ack (all explained by kills) | violations |",
           "|---|---|---|---|---|---|---|---|---|---|",
           f"| {c['consumer_kills']} | {c['tracker_kills']} ({', '.join(c['tracker_modes'])}) | "
           f"{c['rebalances']} | {a['sent']:,} | {a['acked']:,} | {sum(a['dead_lettered'].values()):,} | "
           f"**{a['lost']}** | {a['duplicates']} ({a['duplicates_after_kill']}) | "
           f"{a['redelivered_after_durable_ack']} | {len(a['violations'])} |", ""]
    for mode, m in sorted(r.get("by_mode", {}).items()):
        kind = f"{mode} queues" if mode in ("shared", "ordered") else f"{mode} STARTs"
        reordered = f", {m['reordered']} reordered (rule 4)" if mode == "ordered" else ""
        out.append(f"- {kind}: {m['sent']:,} sent, {m['lost']} lost, {m['duplicates']} duplicates, "
                   f"{m['redelivered_after_durable_ack']} delivered after a durable ack{reordered}.")
    if ordered and r.get("by_mode", {}).get("ordered", {}).get("reordered", 0):
        out.append("- with tracker kills, an ordered queue shows the known dispatcher-failover windows "
                   "(docs/ordering.md, \"Failover\"): reorders and returns after an ack, nothing lost.")
    elif ordered:
        out.append("- with tracker kills, each successor dispatcher resumed from the handed-out bitmap "
                   "(docs/ordering.md, \"Failover\"): nothing reordered, nothing acked handed out again.")
    out.append(f"- acks in transit at a kill (sent, unconfirmed, never came back): {a['ack_in_transit']}; "
               f"redeliveries asked for by releases: {a['requested_redeliveries']}.")
    out += ["", f"Chaos phase {c['seconds']:.0f} s, drained in {d['drain_s']:.0f} s; whole run "
            f"{r['elapsed_s']:.0f} s.", "", f"Source: {_source(r)}.", ""]
    return out


def tracker_scale(r: dict) -> list[str]:
    out = ["## Tracker scale", "",
           "Messages in flight held by START markers (ranges of `range_size` offsets), then 1,000",
           "of them come due; RSS of the worker, the cost of the tick that redelivers the 1,000,",
           "and a fresh worker's recovery (empty data dir) until all are in flight again.", "",
           "| in flight | range size | table entries | RSS MB | tick s (1k due) | recovery s | "
           "RSS after recovery MB |", "|---|---|---|---|---|---|---|"]
    for row in r["rows"]:
        head = (f"| {row['in_flight']:,} | {row['range_size']} | {row['entries']:,} | {row['rss_mb']:.0f} | "
                f"{row['tick_s_for_1000_due']:.3f} | ")
        if row["recovery_s"] is None:
            out.append(head + f"not done: {row.get('failure', '')} | - |")
        else:
            out.append(head + f"{row['recovery_s']:.1f} | {row['rss_mb_after_recovery']:.0f} |")
    big = [row for row in r["rows"] if row["in_flight"] >= 1_000_000]
    if big:
        rss = max(row["rss_mb"] for row in big)
        # A recovery that did not finish counts as missing the goal.
        rec = max(float("inf") if row["recovery_s"] is None else row["recovery_s"] for row in big)
        out += ["", f"Goals at 1M in flight: RSS <= 512 MB {_met(rss <= 512)} ({rss:.0f} MB); "
                f"recovery <= 30 s {_met(rec <= 30)} ({rec:.1f} s)."]
    else:
        out += ["", "Goals at 1M in flight: not measured in this result file."]
    out += ["", "Reading the curve: state is one table entry per in-flight *range*, so RSS and",
            "recovery follow entries, not messages (RocksDB holds the entries; the worker's RSS",
            "stays near its ~80 MB baseline up to 1k entries and ~95 MB at 10k). Recovery includes",
            "a fixed ~7-15 s of worker start and group join after the old worker's session expires.",
            "Each table write costs the Faust worker ~0.3-0.5 ms (the per-key changelog path), so",
            "ranges of few messages cost load time and changelog size; consumers that fetch in",
            "batches keep ranges large (the SDK writes one START per fetched partition run), which",
            "is the 100-message row."]
    for note in r.get("notes", []):
        out += ["", f"Note: {note}"]
    if PLOT.exists():
        out += ["", f"![tracker scale]({PLOT.relative_to(ROOT).as_posix()})"]
    return out + ["", f"Source: {_source(r)}.", ""]


def queues(r: dict) -> list[str]:
    out = ["## Many logical queues", "",
           "| queues | send msgs/s | tracker RSS MB (all in flight) | list view ms | "
           "idle tracker CPU share | records fetched per delivered (median) |",
           "|---|---|---|---|---|---|"]
    for row in r["rows"]:
        out.append(f"| {row['queues']:,} | {_k(row['send_msgs_s'])} | {row['tracker_rss_mb_with_all_in_flight']:.0f} | "
                   f"{row['list_view_ms_median']:.0f} | {row['idle_tracker_cpu_share']:.2f} | "
                   f"{row['amplification_median']:.0f} |")
    return out + ["", f"Source: {_source(r)}.", ""]


def amplification(results: dict[str, dict]) -> list[str]:
    rows = [v for k, v in results.items() if k.startswith("amplification-")]
    if not rows:
        return []
    out = ["## Read amplification", "",
           "Bytes fetched (librdkafka rxbytes) per byte delivered for one queue's consumer, Q",
           "equally busy queues on a P-partition queue topic; kafka-mq-go's design (every queue's",
           "group reads the whole topic and filters) measured the same way.", "",
           "| queues | partitions | kmq median | Q/P (queues per partition) | "
           "kafka-mq-go | goal <= 2 |", "|---|---|---|---|---|---|"]
    for v in sorted(rows, key=lambda v: v["partitions"]):
        out.append(f"| {v['queues']} | {v['partitions']} | **{v['kmq_median']:.2f}** | "
                   f"{v['kmq_expected_mean']:.2f} | {v['kafka_mq_go']['amplification']:.0f} | "
                   f"{_met(v['kmq_median'] <= 2)} |")
    out += ["", "A queue's consumer fetches whole partitions and Kafka cannot filter by key on the",
            "broker, so amplification is the number of equally busy queues sharing the partition:",
            "at least Q/P by pigeonhole (6.25 for 100 queues on 16 partitions) however queues are",
            "placed. Partitions >= 2 x queues keeps it near 1 (128 above).", ""]
    return out + [f"Source: {_source(v)}." for v in rows] + [""]


def shared_bytes(results: dict[str, dict]) -> list[str]:
    rows = [v for k, v in results.items() if k.startswith("shared_amplification-")]
    if not rows:
        return []
    out = ["## Shared queues: read amplification and bytes written", "",
           "Q equally busy shared queues on a P-partition queue topic, a tracker dispatching. Read",
           "amplification: bytes a consumer's readers (lane and references) fetched, librdkafka's",
           "per-partition rxbytes (key + value) as in partition mode's table, over the bytes of its",
           "own messages delivered (value + queue key + headers); in brackets the socket bytes it",
           "received from the broker (batch and fetch framing, idle fetches). First `--sample`",
           "queues drained one at a time, then all the others at once (one consumer each, sharing",
           "the deliveries topic's lanes).", "",
           "| reference rule | queues | partitions | payload B | one at a time (runs) | "
           "all at once: median, max | partition mode (Q/P) | goal <= 1.5 (medians): alone, at once |",
           "|---|---|---|---|---|---|---|---|"]
    rows = sorted(rows, key=lambda v: (not v["reference_rule"].startswith("before"), v["size"],
                                       v["deliveries_partitions"], _payload(v), v.get("lane_topics", 1)))
    for v in rows:
        alone = [r["amplification"] for r in v["one_at_a_time"]]
        t = v["together"]
        out.append(f"| {v['reference_rule']} | {v['queues']} | {v['partitions']} | {v['size']}{_payload(v)} | "
                   f"**{statistics.median(alone):.2f}** "
                   f"({', '.join(f'{x:.2f}' for x in alone)}; socket "
                   f"{statistics.median(r['amplification_socket'] for r in v['one_at_a_time']):.2f}) | "
                   f"**{t['median']:.2f}**, {t['max']:.2f} ({t['consumers']} consumers on "
                   f"{v['deliveries_partitions']} lanes{_lane_topics(v)}, {sum(r['amplification'] > 1.5 for r in t['runs'])} "
                   f"above 1.5; socket {t['median_socket']:.2f}) | "
                   f"{v['queues'] / v['partitions']:.2f} | "
                   f"{_met(statistics.median(alone) <= 1.5)}, {_met(t['median'] <= 1.5)} |")
    out += ["", "Bytes the broker was given per message sent, every topic read back after the run",
            "(queue records, markers, lane headers and copies, the tracker's changelog; TICKs and",
            "BEGINs are per second, not per message): record bytes (key + value + headers) and, for",
            "the totals, the bytes the read-back consumer received (batch framing included).", ""]
    for v in rows:
        sent, pay = v["sent"], v["size"]
        out += [f"Reference rule {v['reference_rule']}; {v['queues']} queues, {v['partitions']} partitions, "
                f"{v['deliveries_partitions']} lanes{_lane_topics(v)}, {sent:,} messages of {pay} B{_payload(v)}:", "",
                "| topic | record kind | records | bytes / message | x payload |", "|---|---|---|---|---|"]
        for topic, t in sorted(v["written"].items()):
            for kind, k in sorted(t["kinds"].items()):
                out.append(f"| {topic} | {kind} | {k['records']:,} | {k['bytes'] / sent:.1f} | "
                           f"{k['bytes'] / sent / pay:.3f} |")
        ratio, sock = v["written_per_payload_byte"], v["written_socket_per_payload_byte"]
        out += [f"| **all** | | {sum(t['records'] for t in v['written'].values()):,} | "
                f"{v['written_bytes'] / sent:.1f} (socket {v['written_socket_bytes'] / sent:.1f}) | "
                f"**{ratio:.2f}** (socket {sock:.2f}) |", "",
                f"Goal <= 2.2 x payload: {_met(sock <= 2.2)} ({sock:.2f} counting framing, {ratio:.2f} "
                "record bytes only).", ""]
    return out + [f"Source ({v['reference_rule'].split(':')[0]}): {_source(v)}." for v in rows] + [""]


def fairness(r: dict) -> list[str]:
    out = ["## Fairness: one tenant's flood, another tenant's latency", "",
           "Tenant B sends a message every 20 ms and times send -> receive while tenant A floods",
           "its own queue.", "", "| condition | samples | p50 ms | p99 ms | max ms |", "|---|---|---|---|---|"]
    for k, v in r.items():
        if isinstance(v, dict) and "p50_ms" in v:
            out.append(f"| {k} | {v['samples']} | {v['p50_ms']:.0f} | {v['p99_ms']:.0f} | {v['max_ms']:.0f} |")
    return out + ["", f"Source: {_source(r)}.", ""]


def spark(r: dict) -> list[str]:
    res = r["results"]
    out = ["## Spark batch read", "",
           f"{r['records']:,} records of {r['size_bytes']} B in {r['partitions']} partitions, {r['master']};",
           "kmq's Spark source against a plain single-process confluent-kafka read of the same",
           f"data. Medians of {len(res['spark_rows_s']['runs'])} runs.", "",
           "| read | rows/s |", "|---|---|",
           f"| plain confluent-kafka | {_k(res['plain_rows_s']['median'])} |",
           f"| Spark source | {_k(res['spark_rows_s']['median'])} |", "",
           f"Spark / plain: **{res['spark_vs_plain']['median']:.2f}** (runs {_runs(res['spark_vs_plain'])}); "
           f"goal within 2x {_met(res['spark_vs_plain']['median'] >= 0.5)}. "
           f"Goal >= 500k rows/s {_met(res['spark_rows_s']['median'] >= 5e5)}.", ""]
    return out + [f"Source: {_source(r)}.", ""]


def shared_scaling(r: dict) -> list[str]:
    res = r["results"]
    out = ["## Shared queues: N consumer processes of one queue", "",
           f"Each consumer handles one message at a time with {r['work_ms']:g} ms of work; the backlog is sent",
           "once every consumer is ready; msgs/s from the send to the last ack. Efficiency = rate /",
           "(N x the one-consumer rate of the same mode). Partition mode: the queue's one partition",
           "(`spread` 1) goes to one member of the group, whatever N. " + _source(r), "",
           "| mode | N | msgs/s | efficiency | consumers that got work | CPU cores: tracker, broker, consumers |",
           "|---|---|---|---|---|---|"]
    for mode in ("shared", "partition"):
        for row in res.get(mode, []):
            eff = row.get("efficiency")
            cpu = row["cpu_cores"]
            out.append(f"| {mode} | {row['n']} | {row['msgs_s']:,.0f} | {'' if eff is None else f'{eff:.2f}'} | "
                       f"{row['consumers_with_work']} of {row['n']} | {cpu['tracker']}, {cpu['broker']}, "
                       f"{cpu['consumers']} |")
    return out + [""]


def _payload(v: dict) -> str:
    """" (random, lz4)" for a run of random payloads or compressed producers; "" for the
    repeated byte uncompressed (every run before these options)."""
    parts = [x for x in (v.get("payload", "repeated"), v.get("compression", "none"))
             if x not in ("repeated", "none", "")]
    return f" ({', '.join(parts)})" if parts else ""


def _options(run: dict) -> dict:
    """The payload and compression options of a run's command."""
    words = run.get("command", "").split()
    return {k: words[words.index(f"--{k}") + 1] for k in ("payload", "compression")
            if f"--{k}" in words[:-1]}


def shared_throughput(results: dict[str, dict]) -> list[str]:
    """Every run: ``shared_throughput`` (the latest) and ``shared_throughput-*`` (each with
    a ``note`` naming the code it measured)."""
    runs = runs_of(results, "shared_throughput")
    if not runs:
        return []
    out = ["## Shared queues: raw throughput without work", "",
           "4 shared consumer processes against one partition-mode consumer on the same number of",
           "records (batch receive, batch ack, no work), alternating which goes first. Goal 0.7:",
           "see docs/shared-queues.md for why it is not met on this machine. Every run, oldest first.", "",
           "| run | size | partition x1 msgs/s | shared x4 msgs/s | ratio (runs) |", "|---|---|---|---|---|"]
    for r in runs:
        for size, v in r["results"].items():
            out.append(f"| {r['when']}: {r.get('note', 'latest')} | {size} B{_payload(_options(r))} | "
                       f"{_k(v['partition_1_msgs_s']['median'])} | {_k(v['shared_4_msgs_s']['median'])} | "
                       f"**{v['ratio']['median']:.2f}** ({_runs(v['ratio'])}) |")
    out.append("")
    out += [f"Source ({r.get('note', 'latest')}): {_source(r)}" for r in runs]
    return out + [""]


def shared_dispatch_cost(results: dict[str, dict]) -> list[str]:
    """Every ``shared_dispatch_cost-*`` run: the dispatcher's CPU per record, in isolation."""
    runs = runs_of(results, "shared_dispatch_cost")
    if not runs:
        return []
    out = ["## Shared queues: the dispatcher's CPU per record", "",
           "The dispatcher thread's CPU (`time.thread_time`) per record of one queue partition: reading",
           "it (librdkafka's messages) and deciding what to hand out (read-ahead, selection, shares,",
           "the reference rule), of which looking for duplicates (every record's headers). Every run.", "",
           "| run | records | queues on the partition | read us | decide us | of which duplicates us |",
           "|---|---|---|---|---|---|"]
    for r in runs:
        v = r["results"]
        out.append(f"| {r['when']}: {r.get('note', '')} | {v['records']:,} x {v['size']} B | {v['queues']} | "
                   f"{v['read_us_per_record']} | {v['decide_us_per_record']} | "
                   f"{v.get('of_which_duplicates_us_per_record', '')} |")
    out.append("")
    out += [f"Source ({r.get('note', '')}): {_source(r)}" for r in runs]
    return out + [""]


def shared_latency(results: dict[str, dict]) -> list[str]:
    """Every latency run: ``shared_latency`` (the latest) and ``shared_latency-*`` (earlier
    code, each with a ``note`` naming it)."""
    runs = [r for name, r in sorted(results.items())
            if name == "shared_latency" or name.startswith("shared_latency-")]
    if not runs:
        return []
    out = ["## Shared queues: send -> receive latency", "",
           "A message every 20 ms to an idle consumer; then again while another queue on the same",
           "queue-topic partition is flooded (and drained). Partition mode's p99 includes its first",
           "group join. Every run, oldest first.", "",
           "| run | mode | idle p50 / p99 ms | flooded neighbour p50 / p99 ms |", "|---|---|---|---|"]
    for r in sorted(runs, key=lambda r: r["when"]):
        for mode, v in r["results"].items():
            out.append(f"| {r['when']}: {r.get('note', 'latest')} | {mode} | "
                       f"{v['idle']['p50_ms']} / {v['idle']['p99_ms']} | "
                       f"{v['flood_same_partition']['p50_ms']} / {v['flood_same_partition']['p99_ms']} |")
    out.append("")
    out += [f"Source ({r.get('note', 'latest')}): {_source(r)}" for r in sorted(runs, key=lambda r: r["when"])]
    return out + [""]


def every_run(prefix: str, fn):
    """A section per result file named ``prefix`` or ``prefix-NAME``, oldest first, each
    heading naming the code it measured (its ``note``)."""
    def section(results: dict[str, dict]) -> list[str]:
        out: list[str] = []
        for r in runs_of(results, prefix):
            part = fn(r)
            if part and r.get("note"):
                part[0] += f" ({r['when'][:10]}: {r['note']})"
            out += part
        return out
    return section


def shared_idle(r: dict) -> list[str]:
    after = r["results"][0].get("after", 0)
    out = ["## Shared queues: what idle consumers cost" + (f", after {after} messages each" if after else ""), "",
           "CPU cores used while N shared consumer processes wait on an empty queue (lane reads on",
           "the embedded broker, credits, the tracker)" + (f"; lanes: {r['lanes']}" if r.get("lanes") else "")
           + ". " + _source(r), "",
           "| consumers | broker | tracker | consumers | total of 2 cores |", "|---|---|---|---|---|"]
    for v in r["results"]:
        c = v["cpu_cores"]
        out.append(f"| {v['consumers']} | {c['broker']:.2f} | {c['tracker']:.2f} | {c['consumers']:.2f} | "
                   f"{v['total_cores']:.2f} |")
    return out + [""]


def shared_ref_idle(r: dict) -> list[str]:
    v = r["results"]
    out = ["## Shared queues: an idle consumer after references", "",
           "Broker CPU cores while one shared consumer waits on an empty queue, before and after it",
           "drained a backlog whose ranges came by reference (read from the queue topic by a reader",
           f"of its own); median added: **{v['added_cores_median']:.3f}** cores. " + _source(r), "",
           "| round | idle before | idle after | by reference | reader still assigned |", "|---|---|---|---|---|"]
    for row in v["rounds"]:
        out.append(f"| {row['round']} | {row['idle_before_cores']:.3f} | {row['idle_after_cores']:.3f} | "
                   f"{row['by_reference']} | {row['reader_assigned_after']} |")
    return out + [""]


def broker_fetch(r: dict) -> list[str]:
    out = ["## The embedded broker: how fast one reader gets a partition", "",
           f"{r['records']:,} records of {r['size']} B (queue key, `kmq.id` header) on one partition, read",
           "from the start by one librdkafka consumer as the dispatcher reads (no tracker; 5 ms",
           "`fetch.queue.backoff.ms` as its reader, since 2026-11-28: runs before kept librdkafka's 1 s",
           "and measured its pauses, 143k-156k records/s; docs/shared-queues.md). " + _source(r), "",
           "| run | fetch bytes | records/s | reader CPU us/record |", "|---|---|---|---|"]
    for v in r["runs"]:
        out.append(f"| {v['run']} | {v['fetch_bytes'] >> 20} MiB | {v['records_s']:,} | "
                   f"{v['reader_cpu_us_per_record']:.2f} |")
    return out + [""]


def _lane_topics(v: dict) -> str:
    """Lanes in several deliveries topics (their bytes are one row, under the first's name)."""
    n = v.get("lane_topics", 1)
    return f" in {n} topics" if n > 1 else ""


def broker_lane_topics(r: dict) -> list[str]:
    out = ["## The embedded broker: what idle lane readers cost, one topic or several", "",
           f"{r['readers']} librdkafka readers, each assigned one random lane of {r['lanes']} at its end",
           f"({r['fetch_wait_ms']} ms fetch wait, as a shared consumer's), wait on empty lanes; broker CPU",
           "cores, layouts alternating (no tracker, no kmq code; docs/shared-queues.md, \"Lanes in",
           "several topics\"). " + _source(r), "",
           "| round | layout | topics x partitions | broker cores |", "|---|---|---|---|"]
    for v in r["runs"]:
        out.append(f"| {v['round']} | {v['layout']} | {v['topics']} x {v['partitions_per_topic']} | "
                   f"{v['broker_cores']:.2f} |")
    return out + [""]


def lane_moves(r: dict) -> list[str]:
    out = ["## Shared queues: two busy consumers on one lane, with and without moves", "",
           f"Two queues on one partition, sends interleaved ({r['rate']:,} messages a second each for",
           f"{r['seconds']:g} s, {r['size']} B), one consumer each, both starting on the same lane;",
           "lane bytes (key + value, its own and the other's) per byte delivered, arms alternating",
           "(docs/shared-queues.md, step 2). " + _source(r), "",
           "| arm | consumer | lane bytes: own / other's | per byte delivered | moves | drain s |",
           "|---|---|---|---|---|---|"]
    for arm, rounds in r["runs"].items():
        for i, pair in enumerate(rounds):
            for x in pair:
                out.append(f"| {arm.replace('_', ' ')} (round {i + 1}) | {x['queue'][-1]} | {x['lane_own']:,} / "
                           f"{x['lane_others']:,} | {x['lane_per_delivered']:.2f} | {x['lane_moves']} | {x['drain_s']} |")
    return out + [""]


def broker_batches(r: dict) -> list[str]:
    waits = sorted({row["fetch_wait_ms"] for row in r["rows"]})
    out = ["## The embedded broker: partitions of many small batches", "",
           "One record read from the middle of a partition of N single-record batches (a producer",
           "flushed after every record), by one librdkafka consumer per fetch wait, three reads per",
           "cell, no tracker; why a trickle of one-record batches can stall the dispatcher and the",
           "payload reader on this broker (docs/shared-queues.md). " + _source(r), "",
           "| batches | " + " | ".join(f"{w} ms wait" for w in waits) + " |",
           "|---|" + "---|" * len(waits)]
    for n in sorted({row["batches"] for row in r["rows"]}):
        cells = {row["fetch_wait_ms"]: row["read_ms"] for row in r["rows"] if row["batches"] == n}
        out.append(f"| {n:,} | " + " | ".join(
            ", ".join(f"none in {r['timeout_s']:g} s" if ms is None else f"{ms:,} ms" for ms in cells[w])
            for w in waits) + " |")
    return out + [""]


def shared_first(r: dict) -> list[str]:
    out = ["## Shared queues: first message of a new consumer", "",
           "From calling `client.consumer()` (construction included) to the first message, one",
           "message waiting. " + _source(r), "",
           "| mode | tries | p50 s | p99 s | max s |", "|---|---|---|---|---|"]
    for mode, v in r["results"].items():
        out.append(f"| {mode} | {v['tries']} | {v['p50_s']} | {v['p99_s']} | {v['max_s']} |")
    return out + [""]


def ordering(results: dict[str, dict]) -> list[str]:
    runs = [r for name, r in sorted(results.items())
            if name.startswith("ordering") and not name.startswith("ordering_rss")]
    if not runs:
        return []
    out = ["## Ordered message groups against unordered (Parallel Consumer's figure)", "",
           "One queue on one partition, N consumer processes each handling one message at a time",
           "with `work_ms` of work (a sleep; 2.5 ms is the mean of Parallel Consumer's 0-5 ms); the",
           "backlog is sent once every consumer has asked for work; seconds from the first send to",
           "the last ack. `serial` is one consumer of an unordered queue. Per-message ratios, since",
           "the 1-group run may use fewer messages. Goals (issue 15): 100 groups within 1.3x of",
           "unordered; 1 group within 1.2x of serial. Parallel Consumer (10,000 msgs): 22.2 s in",
           "partition order, 2.2 s in key order with 100 keys, 2.8 s unordered.", ""]
    for r in runs:
        by = {row["run"]: row for row in r["results"]}
        out += [_source(r) + (f" {r['note']}" if r.get("note") else ""), "",
                "| run | consumers | messages | seconds | msgs/s | per msg x unordered | per msg x serial |",
                "|---|---|---|---|---|---|---|"]
        for row in r["results"]:
            out.append(f"| {row['run']} | {row['consumers']} | {row['messages']:,} | {row['seconds']} | "
                       f"{row['msgs_s']} | {row['vs_unordered']} | {row['vs_serial']} |")
        goals = []
        if "groups-100" in by:
            v = by["groups-100"]["vs_unordered"]
            goals.append(f"100 groups x{v} of unordered (goal <= 1.3: {_met(v <= 1.3)})")
        if "groups-1" in by:
            v = by["groups-1"]["vs_serial"]
            goals.append(f"1 group x{v} of serial (goal <= 1.2: {_met(v <= 1.2)})")
        out += ["", "; ".join(goals) + ".", ""]
    for name in sorted(n for n in results if n.startswith("ordering_rss")):
        r = results[name]
        v = r["results"]
        out += [f"Tracker RSS while {v['groups']:,} messages, each of its own group, passed through an "
                f"ordered queue ({v['consumers']} consumers, no work, {v['seconds']} s): "
                f"{v['rss_before_mb']} MB before, {v['rss_peak_mb']} MB at most, {v['rss_after_mb']} MB "
                f"after (goal for 1M groups: under 512 MB). " + _source(r)
                + (f" {r['note']}" if r.get("note") else ""), ""]
    return out


def render(results: dict[str, dict]) -> str:
    out = ["# Benchmarks", "",
           "Generated by `python -m bench.report` from `bench/results/*.json`; each section names the",
           "command that measured it, the machine and the time. All runs use the embedded broker",
           "(Tansu) on loopback, on a shared 2-core machine: ratios against a baseline measured in the",
           "same run are the figures to trust, absolute rates move with the neighbours. The sections",
           "before the shared-queue ones measure partition-mode queues (`dispatch=\"partition\"`).", ""]
    # A named section renders its result file; an unnamed one gathers several files.
    sections = [("throughput", throughput), (None, throughput_runs), (None, lateness), (None, lateness_ab.section), ("chaos", chaos), ("chaos_shared", chaos),
                ("chaos_ordered", chaos),
                ("tracker_scale", tracker_scale), ("queues", queues), (None, amplification),
                ("fairness", fairness), ("spark_read", spark), (None, every_run("shared_scaling", shared_scaling)),
                (None, shared_throughput), (None, shared_dispatch_cost), (None, shared_latency),
                (None, every_run("shared_first_message", shared_first)), (None, every_run("shared_idle", shared_idle)),
                (None, every_run("shared_ref_idle", shared_ref_idle)), ("broker_fetch", broker_fetch),
                (None, broker_split_read.section),
                ("broker_lane_topics", broker_lane_topics),
                ("broker_batches", broker_batches), (None, shared_bytes), (None, every_run("lane_moves", lane_moves)), (None, send_codecs.section), (None, worker_report.section),
                (None, ordering), (None, dedup_replay.section), (None, garbage_flood.section),
                (None, before_after.section)]
    for name, fn in sections:
        if name is None:
            out += fn(results)
        elif name in results:
            out += fn(results[name])
    return "\n".join(out).rstrip() + "\n"


def plot(r: dict, path: Path = PLOT) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for size in sorted({row["range_size"] for row in r["rows"]}):
        rows = sorted((row for row in r["rows"] if row["range_size"] == size), key=lambda x: x["in_flight"])
        xs = [row["in_flight"] for row in rows]
        for ax, key, label in zip(axes, ("rss_mb", "tick_s_for_1000_due", "recovery_s"),
                                  ("RSS (MB)", "tick with 1k due (s)", "fresh recovery (s)")):
            ax.plot(xs, [row[key] for row in rows], marker="o", label=f"range size {size}")
            ax.set_xscale("log")
            ax.set_xlabel("messages in flight")
            ax.set_title(label)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--plot", action="store_true", help="draw bench/results/tracker_scale.png (matplotlib)")
    args = ap.parse_args()
    results = load()
    if args.plot and "tracker_scale" in results:
        plot(results["tracker_scale"])
    PAGE.write_text(render(results))
    print(f"wrote {PAGE}")


if __name__ == "__main__":
    main()
