"""The throughput benchmark before and after a change: every run, as ratios against the baseline.

A change that should cost nothing (a refactoring) is measured by running
``bench.throughput`` alternately on the baseline tree and on the changed one, in one
session on one machine; this gathers those runs' result files into
``bench/results/change-<name>.json``, which ``bench.report`` renders with every run and
each one's ratios against the baseline's medians. Neighbours on a shared machine move
absolute rates a lot: the in-run kmq/plain ratio is the steadier figure.

    python -m bench.before_after --name runtime --baseline "main 37dd632" --change "runtime-13" \\
        --baseline-files base1.json base2.json --change-files mine1.json mine2.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

# (column, result key) of each run; ratios against the baseline's median of the same key
FIGURES = [("kmq msgs/s", "kmq_msgs_s"), ("kmq/plain", "ratio"), ("batch-ack/plain", "ratio_batch_ack"),
           ("tracker CPU s/100k", "kmq_tracker_cpu_s_per_100k")]


def gather(baseline: list[Path], change: list[Path]) -> list[dict]:
    """Every invocation's results, in the order they ran (by their ``when``)."""
    runs = []
    for tree, files in (("baseline", baseline), ("change", change)):
        for f in files:
            r = json.loads(Path(f).read_text())
            runs.append({"tree": tree, "when": r["when"], "command": r["command"], "results": r["results"]})
    return sorted(runs, key=lambda r: r["when"])


def _values(runs: list[dict], tree: str, size: str, key: str) -> list[float]:
    return [x for r in runs if r["tree"] == tree for x in r["results"][size][key]["runs"]]


def section(results: dict[str, dict]) -> list[str]:
    """BENCHMARKS.md lines for every ``change-*`` result file."""
    out = []
    for name, v in sorted(results.items()):
        if not name.startswith("change-"):
            continue
        runs = v["runs"]
        out += [f"## Throughput before and after: {v['change']} against {v['baseline']}", "",
                f"`{v['command']}`, run alternately on both trees ({len(runs)} invocations in all, "
                f"{sum(len(next(iter(r['results'].values()))['ratio']['runs']) for r in runs)} runs) "
                "on a shared 2-core machine while other work ran: noisy, every run shown. Each figure "
                "is followed by its ratio against the baseline's median of it (CPU: lower is better).", ""]
        for size in runs[0]["results"]:
            medians = {key: statistics.median(_values(runs, "baseline", size, key)) for _, key in FIGURES}
            out += [f"{size} B:", "", "| # | tree | invocation ended | plain msgs/s | " + " | ".join(c for c, _ in FIGURES) + " |",
                    "|---|---|---|---|" + "---|" * len(FIGURES)]
            i = 0
            for r in runs:
                res = r["results"][size]
                for j in range(len(res["ratio"]["runs"])):
                    i += 1
                    cells = [f"{res[key]['runs'][j]:,.2f} ({res[key]['runs'][j] / medians[key]:.2f})"
                             if key != "kmq_msgs_s" else
                             f"{res[key]['runs'][j]:,.0f} ({res[key]['runs'][j] / medians[key]:.2f})"
                             for _, key in FIGURES]
                    out.append(f"| {i} | {r['tree']} | {r['when']} | {res['plain_msgs_s']['runs'][j]:,.0f} | "
                               + " | ".join(cells) + " |")
            summary = [f"{c} {statistics.median(_values(runs, 'change', size, key)) / medians[key]:.2f}"
                       for c, key in FIGURES]
            out += ["", f"{size} B, median of the change's runs over the baseline's: " + ", ".join(summary)
                    + ".", ""]
        if v.get("note"):
            out += [v["note"], ""]
        out += [f"Source: `{v['gathered_by']}` ({v['machine']}; {v['when']}).", ""]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True, help="the result file is bench/results/change-NAME.json")
    ap.add_argument("--baseline", required=True, help="what the baseline tree is (branch, commit)")
    ap.add_argument("--change", required=True, help="what the changed tree is")
    ap.add_argument("--baseline-files", nargs="+", type=Path, required=True)
    ap.add_argument("--change-files", nargs="+", type=Path, required=True)
    ap.add_argument("--note", default="", help="a sentence the report prints under the tables")
    args = ap.parse_args()
    from bench.common import save  # the broker tooling: not needed to render the report

    runs = gather(args.baseline_files, args.change_files)
    path = save(f"change-{args.name}", {
        "command": runs[0]["command"], "baseline": args.baseline, "change": args.change, "note": args.note,
        "gathered_by": f"python -m bench.before_after --name {args.name}", "runs": runs})
    print(f"saved {path}")


if __name__ == "__main__":
    main()
