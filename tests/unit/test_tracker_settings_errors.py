"""The tracker (`faust -A app worker`) with an invalid ``KMQ_*`` value prints our one-line
settings error and exits non-zero at import, before any broker or port: Faust wrapped the
ConfigError in "Cannot import 'app'" and a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kmq.dev.embedded import free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("env, error", [
    ({"KMQ_VISIBILITY_TIMEOUT_S": "abc"}, "error: KMQ_VISIBILITY_TIMEOUT_S='abc' is not a number"),
    ({"KMQ_MAX_DELIVERIES": "0"}, "error: KMQ_MAX_DELIVERIES=0 must be"),
    ({"KMQ_WEB_HOST": "0.0.0.0"}, "error: KMQ_WEB_HOST='0.0.0.0' listens on every interface"),
], ids=["not a number", "out of range", "open wildcard bind"])
def test_the_worker_with_a_bad_setting_prints_our_error_and_exits(tmp_path, env, error):
    # Given a broker address nobody listens on: the worker must stop before trying it.
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KMQ_")}
    run_env = {**clean, "KMQ_BOOTSTRAP_SERVERS": f"127.0.0.1:{free_port()}",
               "KMQ_DATA_DIR": str(tmp_path / "data"), "KMQ_WEB_PORT": str(free_port()), **env}
    out = subprocess.run([sys.executable, "-m", "faust", "-A", "app", "worker", "-l", "info"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT, env=run_env)
    assert out.returncode != 0, out
    assert "Traceback" not in out.stderr and "Cannot import" not in out.stderr, out.stderr
    (line,) = out.stderr.splitlines()
    assert line.startswith(error), line
    assert not (tmp_path / "data").exists()  # stopped before the worker touched anything


@pytest.mark.parametrize("data_dir, says", [("under a file", "cannot be created"),
                                            ("/proc/kmq-no-such-dir", "cannot be created"),
                                            ("/proc", "is not writable")])
def test_a_data_dir_the_worker_cannot_make_or_write_is_our_one_error_line(tmp_path, data_dir, says):
    # Before: Faust's mkdir raised NotADirectoryError in a traceback naming no setting (as
    # root, /proc passes os.access), and a second traceback from the clean-stop mark.
    if data_dir == "under a file":
        (tmp_path / "a-file").write_text("")
        data_dir = str(tmp_path / "a-file" / "data")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KMQ_")}
    run_env = {**clean, "KMQ_BOOTSTRAP_SERVERS": f"127.0.0.1:{free_port()}", "KMQ_DATA_DIR": data_dir,
               "KMQ_WEB_PORT": str(free_port())}
    out = subprocess.run([sys.executable, "-m", "faust", "-A", "app", "worker", "-l", "info"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT, env=run_env)
    assert out.returncode == 1, out
    (line,) = out.stderr.splitlines()
    assert line.startswith(f"error: KMQ_DATA_DIR={data_dir} {says} ("), line
    assert line.endswith("give a directory path this worker can write"), line
