"""bench.thread_cpu: a process's threads' CPU from /proc, named as Python names them."""

from __future__ import annotations

import os
import threading

from bench.thread_cpu import by_name, python_names, stat_cpu_s, thread_cpu_s

DUMP = '''Process 1100: /usr/bin/python -m faust -A app worker
Python v3.11.7 (/usr/bin/python3.11)

Thread 1100 (idle): "MainThread"
    EpollSelector.select (selectors.py:468)
Thread 1275 (active): "kmq-dispatcher"
    QueueReader.read (agents/dispatch/reader.py:97)
Thread 1290 (idle): "a name: with (parentheses)"
'''


def test_a_stat_line_gives_user_plus_system_seconds_whatever_the_thread_is_called():
    # utime (field 14) and stime (field 15), counted after the name in parentheses
    line = "1275 (rdk:broker (1) x) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 9 0 100 0 0"
    assert stat_cpu_s(line, 100) == 3.0


def test_py_spy_dump_names_each_thread_by_its_native_id():
    assert python_names(DUMP) == {1100: "MainThread", 1275: "kmq-dispatcher", 1290: "a name: with (parentheses)"}


def test_cpu_per_name_counts_what_each_thread_spent_in_between_and_new_threads_from_zero():
    before = {1: ("python", 1.0), 2: ("python", 5.0), 3: ("rdk:broker1", 0.5)}
    after = {1: ("python", 1.5), 2: ("python", 6.0), 3: ("rdk:broker1", 0.75), 4: ("python", 0.25)}
    got = by_name(before, after, {1: "MainThread", 2: "kmq-dispatcher", 4: "kmq-dispatcher"})
    assert got == {"MainThread": 0.5, "kmq-dispatcher": 1.25, "rdk:broker1": 0.25}


def test_this_process_threads_are_read_from_proc():
    done = threading.Event()
    t = threading.Thread(target=done.wait, name="waiting")
    t.start()
    try:
        threads = thread_cpu_s(os.getpid())
        assert os.getpid() in threads and t.native_id in threads
        assert all(cpu >= 0 for _name, cpu in threads.values())
    finally:
        done.set()
        t.join()
