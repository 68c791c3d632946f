"""The one dead-letter fold (kmq.ops.dead_letter_log.LetterLog): letters, redrives, purges."""

from kmq.ops.dead_letter_log import CONTROL, CONTROL_OFFSET, LetterLog


def test_letters_leave_when_redriven_or_purged_and_control_events_without_an_offset_change_nothing():
    log = LetterLog()
    for off in (3, 5, 8, 9):
        log.fold(off, [("kmq.id", b"x")], lambda off=off: f"letter {off}")
    log.fold(10, [(CONTROL, b"redriven"), (CONTROL_OFFSET, b"5")])
    log.fold(11, [(CONTROL, b"purged"), (CONTROL_OFFSET, b"8")])
    log.fold(12, [(CONTROL, b"purged")])  # no offset: ignored
    log.fold(13, [(CONTROL, b"redriven"), (CONTROL_OFFSET, b"junk")])
    log.fold(14, None, lambda: "letter 14")
    assert log.pending() == ["letter 8", "letter 9", "letter 14"]
    assert sorted(log.live) == [8, 9, 14]
