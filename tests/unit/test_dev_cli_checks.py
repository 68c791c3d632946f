"""`kmq dev` checks its --data-dir and KMQ_SERVICE_ROOT before it starts anything: each is
one `error:` line naming the option or variable and the fix, exit status 1. They failed in
the tracker, after the broker started: "tracker worker exited (1); log: ..." with the
traceback in the log, or (KMQ_SERVICE_ROOT) the checkout kmq runs from was used instead."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

DEV = [sys.executable, "-m", "kmq.cli", "dev", "--no-demo", "--exit-after-demo", "--web-port", "0"]


def kmq_dev(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([*DEV, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "a-file"
    path.write_text("")
    return path


@pytest.mark.parametrize("path, problem", [("under a file", "cannot be created"),
                                           ("/proc/kmq-no-such-dir", "cannot be created"),
                                           ("/proc", "is not writable")])
def test_a_data_dir_that_cannot_be_made_or_written_is_one_error_line_before_anything_starts(a_file, path, problem):
    # /proc exists and os.access says root may write it (an audit: the tracker died on it).
    path = str(a_file / "data") if path == "under a file" else path
    out = kmq_dev("--data-dir", path)
    assert out.returncode == 1, out
    assert "broker" not in out.stdout, out.stdout  # nothing was started
    (line,) = out.stderr.splitlines()
    assert line.startswith(f"error: --data-dir {path} {problem} ("), line
    assert "leave --data-dir out for a fresh temporary one" in line


def test_a_service_root_without_the_service_is_one_error_line(tmp_path):
    out = kmq_dev(KMQ_SERVICE_ROOT=str(tmp_path))
    assert out.returncode == 1, out
    assert "broker" not in out.stdout, out.stdout
    (line,) = out.stderr.splitlines()
    assert line.startswith(f"error: KMQ_SERVICE_ROOT={tmp_path} does not hold the tracker service"), line
