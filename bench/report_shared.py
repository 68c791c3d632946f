"""BENCHMARKS.md's sections on shared and ordered queues (bench/report.py): scaling, raw
throughput, the dispatcher's cost, latency, first messages, idle costs, the broker's
fetches and lanes, bytes, lane moves, ordering."""

from __future__ import annotations

import statistics

from bench.report_format import _k, _met, _options, _payload, _runs, _source, runs_of, table_head


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
                *table_head("topic", "record kind", "records", "bytes / message", "x payload")]
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
           *table_head("run", "size", "partition x1 msgs/s", "shared x4 msgs/s", "ratio (runs)")]
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
           *table_head("run", "mode", "idle p50 / p99 ms", "flooded neighbour p50 / p99 ms")]
    for r in sorted(runs, key=lambda r: r["when"]):
        for mode, v in r["results"].items():
            out.append(f"| {r['when']}: {r.get('note', 'latest')} | {mode} | "
                       f"{v['idle']['p50_ms']} / {v['idle']['p99_ms']} | "
                       f"{v['flood_same_partition']['p50_ms']} / {v['flood_same_partition']['p99_ms']} |")
    out.append("")
    out += [f"Source ({r.get('note', 'latest')}): {_source(r)}" for r in sorted(runs, key=lambda r: r["when"])]
    return out + [""]


def shared_idle(r: dict) -> list[str]:
    after = r["results"][0].get("after", 0)
    out = ["## Shared queues: what idle consumers cost" + (f", after {after} messages each" if after else ""), "",
           "CPU cores used while N shared consumer processes wait on an empty queue (lane reads on",
           "the embedded broker, credits, the tracker)" + (f"; lanes: {r['lanes']}" if r.get("lanes") else "")
           + ". " + _source(r), "",
           *table_head("consumers", "broker", "tracker", "consumers", "total of 2 cores")]
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
           *table_head("round", "idle before", "idle after", "by reference", "reader still assigned")]
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
           *table_head("run", "fetch bytes", "records/s", "reader CPU us/record")]
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
           *table_head("round", "layout", "topics x partitions", "broker cores")]
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
           *table_head("mode", "tries", "p50 s", "p99 s", "max s")]
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
