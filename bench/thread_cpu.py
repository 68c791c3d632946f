"""CPU seconds of each thread of a process (Linux ``/proc``), named as Python names them.

Python does not give its threads OS names (they are all ``python`` in ``/proc``), so the
names come from ``py-spy dump`` (``Thread <tid> (<state>): "<name>"``); librdkafka's
threads keep their own (``rdk:broker1`` ...). bench.shared_profile reports the tracker's
threads with it: which of them a drain's CPU goes to.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

_DUMP_THREAD = re.compile(r'^Thread (\d+) \([^)]*\): "([^"]*)"', re.M)


def stat_cpu_s(stat: str, ticks_per_s: int) -> float:
    """User + system CPU seconds from a ``/proc/<pid>/task/<tid>/stat`` line."""
    fields = stat.rsplit(")", 1)[1].split()  # the name, in parentheses, may hold spaces
    return (int(fields[11]) + int(fields[12])) / ticks_per_s


def thread_cpu_s(pid: int) -> dict[int, tuple[str, float]]:
    """tid -> (OS thread name, CPU seconds so far) of every thread of ``pid``."""
    ticks = os.sysconf("SC_CLK_TCK")
    out = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            name = (task / "comm").read_text().strip()
            out[int(task.name)] = (name, stat_cpu_s((task / "stat").read_text(), ticks))
        except (OSError, ValueError, IndexError):  # a thread that ended meanwhile
            continue
    return out


def python_names(dump: str) -> dict[int, str]:
    """tid -> Python thread name, from ``py-spy dump``'s output."""
    return {int(tid): name for tid, name in _DUMP_THREAD.findall(dump)}


def py_spy_names(py_spy: str, pid: int) -> dict[int, str]:
    """Python's names of ``pid``'s threads (empty if py-spy cannot attach)."""
    try:
        done = subprocess.run([py_spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return python_names(done.stdout)


def by_name(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]],
            names: dict[int, str]) -> dict[str, float]:
    """CPU seconds each thread spent from ``before`` to ``after``, summed per name (Python's
    where known); a thread started in between counts from 0."""
    out: dict[str, float] = {}
    for tid, (os_name, cpu) in after.items():
        name = names.get(tid, os_name)
        out[name] = out.get(name, 0.0) + cpu - before.get(tid, (os_name, 0.0))[1]
    return out
