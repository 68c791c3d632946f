"""bench.markers_diagnosis: each cause of "delivered after a durable ack" is told apart."""

from bench.markers_diagnosis import diagnose


def begin(off, epoch=7, p=1):
    return {"p": p, "off": off, "k": "Begin", "epoch": epoch}


def acquire(off, start, end, epoch=7, p=1):
    return {"p": p, "off": off, "k": "Acquire", "q": "q", "qp": 0, "s": start, "e": end,
            "o": list(range(start, end)), "epoch": epoch}


def ack(off, start, end, p=1):
    return {"p": p, "off": off, "k": "Ack", "q": "q", "qp": 0, "s": start, "e": end, "o": list(range(start, end))}


def tick(off, p=1):
    return {"p": p, "off": off, "k": "Tick", "now_ms": 1}


def resume(p, at, applied):
    return f"[2026-11-24 21:13:21,000] [1] [INFO] markers partition {p}: resuming at offset {at}; " \
           f"the table holds records up to {applied}"


def test_a_clean_log_has_no_findings():
    lines = [begin(0), acquire(1, 10, 12), ack(2, 10, 12), tick(3), begin(4, epoch=8), acquire(5, 12, 13, epoch=8)]
    got = diagnose(lines, [resume(1, 3, 2)])  # records after the last applied one are TICKs only
    assert (got["acquired_twice"], got["stray_acks"], got["fenced_acquires"]) == (0, 0, 0)
    assert got["resumes_above_unapplied"] == []


def test_a_second_hand_out_of_an_offset_is_found():
    got = diagnose([begin(0), acquire(1, 10, 12), ack(2, 10, 12), begin(3, epoch=8), acquire(4, 11, 13, epoch=8)])
    assert got["acquired_twice"] == 1
    assert got["acquired_twice_examples"] == [{"queue": "q", "qp": 0, "offset": 11, "at": [(1, 1), (1, 4)]}]


def test_an_ack_no_acquire_held_is_found_and_a_fenced_acquire_holds_nothing():
    got = diagnose([begin(0), ack(1, 10, 11), begin(2, epoch=8), acquire(3, 20, 21, epoch=7), ack(4, 20, 21)])
    assert got["stray_acks"] == 2 and got["fenced_acquires"] == 1
    assert [a["off"] for a in got["stray_ack_examples"]] == [1, 4]


def test_a_resume_above_records_that_change_state_is_found():
    lines = [begin(0), acquire(1, 10, 12), tick(2), ack(3, 10, 12), tick(4)]
    got = diagnose(lines, [resume(1, 5, 2), resume(2, 5, 2)])  # partition 2 has no such records
    assert got["resumes_above_unapplied"] == [
        {"p": 1, "resumed": 5, "applied": 2, "markers": [(3, "Ack")], "count": 1}]
