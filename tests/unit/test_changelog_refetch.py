"""Which changelog records Faust fetched and dropped, and where to read again (app.changelog_refetch)."""

from app.changelog_refetch import dropped

P2, P3 = ("t-changelog", 2), ("t-changelog", 3)


def test_a_fetch_handed_on_whole_drops_nothing():
    assert dropped({P2: [0, 1, 2]}, {P2: 2}) == {}


def test_a_fetch_handed_on_to_nobody_is_read_again_from_its_first_record():
    # The standby's first fetch came back while recovery had the flow paused.
    assert dropped({P2: [0, 1, 2, 3], P3: [0, 1]}, {}) == {P2: (0, 4), P3: (0, 2)}


def test_a_fetch_cut_short_is_read_again_after_the_last_record_handed_on():
    # The flow stopped, or the generation changed, in the middle of the batch.
    assert dropped({P2: [10, 11, 15, 16]}, {P2: 11}) == {P2: (15, 17)}


def test_partitions_without_records_are_left_alone():
    assert dropped({P2: [], P3: [5]}, {P3: 5}) == {}


def test_a_record_whose_hand_over_was_given_up_is_read_again_from_there():
    # Yielded by the fetch (so "handed"), then cut short while its buffer was full
    # (app.drain_fast_path): the rest of the batch went on past it.
    assert dropped({P2: [10, 11, 12, 13]}, {P2: 13}, {P2: 11}) == {P2: (11, 14)}
    assert dropped({P2: [10, 11, 12, 13]}, {P2: 11}, {P2: 11}) == {P2: (11, 14)}
    assert dropped({P2: [10, 11]}, {P2: 11}, {P3: 4}) == {}
