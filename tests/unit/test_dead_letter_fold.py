"""The views' dead-letter fold: counts and newest letters, bounded summaries, redrives and purges."""

from __future__ import annotations

from kmq.ops.deadletters import CONTROL, CONTROL_OFFSET
from kmq.protocol import envelope
from kmq.settings import Settings
from web import dead_letter_fold
from web.dead_letter_fold import DeadLetterFold


class Record:
    """The parts of a confluent-kafka message the fold reads."""

    def __init__(self, queue: str, offset: int, headers: list, value: bytes = b"") -> None:
        self._q, self._o, self._h, self._v = queue, offset, headers, value

    def key(self): return self._q.encode()
    def offset(self): return self._o
    def headers(self): return self._h
    def value(self): return self._v
    def timestamp(self): return (1, 1_000)


def letter(queue: str, offset: int) -> Record:
    return Record(queue, offset, [(envelope.ID, f"id-{offset}".encode())]
                  + envelope.dead_letter_headers("rejected", "", 0, 0, 0, offset), b"v" * 500)


def control(queue: str, offset: int, event: bytes, arg: int) -> Record:
    return Record(queue, offset, [(CONTROL, event), (CONTROL_OFFSET, str(arg).encode())])


def folded(*records: Record) -> DeadLetterFold:
    fold = DeadLetterFold(Settings(), new_reader=lambda: None)
    for r in records:
        fold._fold(r)
    fold.passes = 1
    return fold


def test_nothing_before_the_first_pass():
    assert DeadLetterFold(Settings(), new_reader=lambda: None).of("q", 20) is None


def test_newest_first_with_previews_and_other_queues_apart():
    fold = folded(*(letter("q", o) for o in range(5)), letter("other", 5))
    d = fold.of("q", 3)
    assert d["count"] == 5 and [r["id"] for r in d["recent"]] == ["id-4", "id-3", "id-2"]
    assert d["recent"][0]["value_bytes"] == 500 and len(d["recent"][0]["value_preview"]) == 200
    assert fold.counts(lambda q: q == "q") == {"q": 5}
    assert fold.of("never", 20) == {"count": 0, "recent": []}


def test_redrives_and_purges_remove_letters_and_their_summaries():
    fold = folded(*(letter("q", o) for o in range(6)), control("q", 6, b"redriven", 5),
                  control("q", 7, b"purged", 3))
    d = fold.of("q", 20)
    assert d["count"] == 2 and [r["id"] for r in d["recent"]] == ["id-4", "id-3"]
    assert set(fold._recent["q"]) == {3, 4}


def test_summaries_are_bounded_and_an_older_letter_without_one_shows_its_offset():
    n = dead_letter_fold.RECENT_KEPT + 5
    records = [letter("q", o) for o in range(n)]
    records += [control("q", n + i, b"redriven", o) for i, o in enumerate(range(n - 3, n))]
    fold = folded(*records)
    assert len(fold._recent["q"]) <= dead_letter_fold.RECENT_KEPT
    d = fold.of("q", 20)
    assert d["count"] == n - 3 and d["recent"][0]["id"] == f"id-{n - 4}"
    assert fold.of("q", n)["recent"][-1] == {"offset": 0}  # its summary was dropped long ago
