"""``kmq bench NAME [ARGS]...``: run a benchmark of the checkout's ``bench/`` harness.

A thin wrapper: ``kmq bench throughput --messages 100000`` runs
``python -m bench.throughput --messages 100000`` from the service checkout
(``bench/`` is not in the wheel, like the tracker). Arguments go to the
harness unchanged; ``kmq bench NAME --help`` shows its own options. It runs the
harness as a child process in the checkout: the package never imports ``bench``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click

from kmq.errors import KmqError


def bench_root() -> Path:
    """The checkout holding ``bench/`` (the same one as the tracker service)."""
    from kmq.dev.devstack import service_root

    root = service_root()
    if not (root / "bench" / "__init__.py").is_file() and not (root / "bench").is_dir():
        raise KmqError(f"no bench/ in {root}: run from a kmq checkout or set KMQ_SERVICE_ROOT")
    return root


def benchmarks(root: Path) -> list[str]:
    """Names of the harness's runnable benchmarks (modules of bench/ with a main())."""
    names = []
    for path in sorted((root / "bench").glob("*.py")):
        if path.stem not in ("__init__", "common") and "def main(" in path.read_text():
            names.append(path.stem)
    return names


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                 "help_option_names": []})
@click.argument("name", required=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def bench(name: str | None, args: tuple[str, ...]) -> None:
    """Run benchmark NAME of the checkout's bench/ harness with ARGS (e.g. throughput --messages 100000)."""
    try:
        root = bench_root()
        names = benchmarks(root)
    except KmqError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    if name in (None, "--help", "-h"):
        click.echo("usage: kmq bench NAME [ARGS]...   (kmq bench NAME --help: its options)\n"
                   f"benchmarks: {', '.join(names)}")
        return
    if name not in names:
        click.echo(f"error: no benchmark {name!r}: use one of {', '.join(names)}", err=True)
        sys.exit(2)
    # The checkout's bench/ is a sibling of the service, found by path, never imported here.
    # Its output is passed on line by line (as it comes: a run takes minutes).
    with subprocess.Popen([sys.executable, "-m", f"bench.{name}", *args], cwd=root, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as child:
        for line in child.stdout:
            click.echo(line, nl=False)
    sys.exit(child.returncode)
