"""The dashboard in a real headless Chromium (Debian's package): a page's dumped DOM or a
screenshot, and the queues' cells read from the DOM."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None and os.geteuid() == 0:  # a fresh CI machine: Debian's package
        subprocess.run(["apt-get", "install", "-y", "-q", "chromium"], check=False, timeout=900,
                       capture_output=True)
        path = shutil.which("chromium")
    assert path, "Debian's chromium is needed for the dashboard test: apt-get install -y chromium"
    return path


def browse(url: str, *, screenshot: Path | None = None, budget_ms: int = 8000) -> str:
    with tempfile.TemporaryDirectory(prefix="kmq-chromium-") as profile:
        args = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}", "--window-size=1400,1000"]
        args += [f"--screenshot={screenshot}"] if screenshot else ["--dump-dom"]
        out = subprocess.run([*args, url], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


class Cells(HTMLParser):
    """``tr[data-queue]`` -> {data-field: text} and card values, from a dumped DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, dict[str, str]] = {}
        self.fields: dict[str, str] = {}
        self._row: str | None = None
        self._field: str | None = None
        self.status = ""
        self._in_status = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and "data-queue" in a:
            self._row = a["data-queue"]
            self.rows[self._row] = {}
        if "data-field" in a:
            self._field = a["data-field"]
        if a.get("id") == "status":
            self._in_status = True

    def handle_data(self, data):
        if self._field is not None:
            target = self.rows[self._row] if self._row is not None else self.fields
            target[self._field] = target.get(self._field, "") + data
        if self._in_status:
            self.status += data

    def handle_endtag(self, tag):
        if tag in ("td", "b"):
            self._field = None
        if tag == "tr":
            self._row = None
        if tag == "div":
            self._in_status = False


def parse(dom: str) -> Cells:
    p = Cells()
    p.feed(dom)
    return p
