"""kmq.writable_dir: what stops a path from being a directory this process writes, found
without leaving anything behind (the tracker checks KMQ_DATA_DIR with it at import)."""

from __future__ import annotations

import os

from kmq.writable_dir import problem


def test_a_writable_directory_and_a_path_that_can_be_made_are_fine_and_nothing_is_made(tmp_path):
    assert problem(str(tmp_path)) is None
    assert problem(str(tmp_path / "a" / "b" / "c")) is None
    assert os.listdir(tmp_path) == []  # the probe's file is gone, no directory was made


def test_a_file_in_the_way_names_it(tmp_path):
    (tmp_path / "f").write_text("")
    assert problem(str(tmp_path / "f")) == "cannot be created (a file of that name is there)"
    assert problem(str(tmp_path / "f" / "sub" / "dir")) == f"cannot be created ({tmp_path / 'f'} is a file)"


def test_a_directory_nothing_can_be_written_in():
    # /proc: os.access says root may write it; only writing tells.
    assert problem("/proc").startswith("is not writable (")
    assert problem("/proc/kmq-no-such-dir/x").startswith("cannot be created (")


def test_a_relative_path_is_taken_from_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert problem("kmq-data") is None
    (tmp_path / "kmq-data").write_text("")
    assert problem("kmq-data").startswith("cannot be created")
