"""Redelivery lateness before and after a change: ``bench.lateness`` alternating between two trees.

Each round runs ``python -m bench.lateness --runs 1`` in the baseline tree, then in the
changed one (each a checkout of its own, with this interpreter), and keeps both runs'
figures; the result is every run plus the change's medians as ratios of the baseline's.
One session on one machine, alternating, so neighbours weigh on both alike.

    python -m bench.lateness_ab --name tick-own-time --baseline-tree /tmp/old --change-tree /tmp/new \\
        [--rounds 3] [--load]      # writes bench/results/lateness_ab-<name>[-load].json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.common import save

FIGURES = [(what, q) for what in ("redelivery", "delayed") for q in ("p50_ms", "p99_ms")]


def one_run(tree: Path, load: bool) -> dict:
    """One ``bench.lateness --runs 1`` in ``tree``; its figures (from the tree's own result file)."""
    cmd = [sys.executable, "-m", "bench.lateness", "--runs", "1", *(["--load"] if load else [])]
    subprocess.run(cmd, cwd=tree, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=600)
    r = json.loads((tree / "bench" / "results" / f"lateness{'-load' if load else ''}.json").read_text())
    return {what: {q: r[what][q] for q in ("p50_ms", "p99_ms", "max_ms")} for what in ("redelivery", "delayed")}


def section(results: dict[str, dict]) -> list[str]:
    """BENCHMARKS.md lines for every ``lateness_ab-*`` result."""
    out: list[str] = []
    for key, r in sorted(results.items()):
        if not key.startswith("lateness_ab-"):
            continue
        out += [f"## Lateness before and after{' (under load)' if r['load'] else ''}: {r['change']}", "",
                f"Baseline: {r['baseline']}. Rounds alternate baseline, change; each run is "
                "`bench.lateness --runs 1`" + (" --load" if r["load"] else "") + ". Milliseconds; "
                "the ratio is the change's median over the baseline's.", "",
                "| figure | baseline (runs) | change (runs) | ratio |", "|---|---|---|---|"]
        for what, q in FIGURES:
            base = [run[what][q] for run in r["runs"] if run["tree"] == "baseline"]
            mine = [run[what][q] for run in r["runs"] if run["tree"] == "change"]
            out.append(f"| {what} {q[:3]} | {statistics.median(base):.0f} ({', '.join(f'{x:.0f}' for x in base)}) | "
                       f"{statistics.median(mine):.0f} ({', '.join(f'{x:.0f}' for x in mine)}) | "
                       f"**{statistics.median(mine) / statistics.median(base):.2f}** |")
        out += ["", f"Source: `{r['command']}` ({r['machine']}; {r['when']})", ""]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--name", required=True)
    ap.add_argument("--baseline-tree", type=Path, required=True)
    ap.add_argument("--change-tree", type=Path, required=True)
    ap.add_argument("--baseline", default="", help="what the baseline is (e.g. 'main b6b4a90')")
    ap.add_argument("--change", default="", help="what the change is")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--load", action="store_true")
    args = ap.parse_args()
    runs = []
    for n in range(args.rounds):
        for tree, path in (("baseline", args.baseline_tree), ("change", args.change_tree)):
            runs.append({"tree": tree, "round": n + 1, "when": time.strftime("%Y-%m-%d %H:%M:%S"),
                         **one_run(path.resolve(), args.load)})
            print(json.dumps(runs[-1]), flush=True)
    name = f"lateness_ab-{args.name}{'-load' if args.load else ''}"
    path = save(name, {"command": f"python -m bench.lateness_ab --name {args.name} --rounds {args.rounds}"
                                  f"{' --load' if args.load else ''} --baseline-tree ... --change-tree ...",
                       "baseline": args.baseline or str(args.baseline_tree),
                       "change": args.change or str(args.change_tree), "load": args.load, "runs": runs})
    print(f"saved {path}")


if __name__ == "__main__":
    main()
