"""Formatting shared by BENCHMARKS.md's sections (bench/report.py): rates, verdicts,
sources, and the runs of one benchmark."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results"
PLOT = RESULTS / "tracker_scale.png"  # bench.report --plot draws it; the scale section shows it


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


def table_head(*columns: str) -> list[str]:
    """A Markdown table's header and rule lines."""
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
