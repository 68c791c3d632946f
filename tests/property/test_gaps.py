"""kmq.protocol.gaps: a record the consumer skipped is read from the log and applied
before anything after it; gaps that hold nothing cost one read; nothing is waited for."""

from hypothesis import given, settings
from hypothesis import strategies as st

from kmq.protocol.gaps import Gaps


def run(n, control, skipped, rebalance_at=None):
    """A consumer hands offsets 0..n-1 except ``control`` ones (commit markers, aborted
    records: never handed, and nothing in the log either) and ``skipped`` ones (in the log,
    never handed: the client's fault). The agent reads each gap from the log as the gap
    reader would (committed records only). ``rebalance_at``: the handed offset before which
    a rebalance happens (nothing is expected after it). Returns offsets applied, in order."""
    g, applied = Gaps(), []
    for o in range(n):
        if o in control or o in skipped:
            continue
        if o == rebalance_at:
            g.forget()
        gap = g.handed(7, o)
        if gap is not None:
            start, end = gap
            found = [x for x in range(start, end) if x not in control]
            g.filled(len(found))
            applied.extend(found)
        applied.append(o)
    return applied, g


@settings(max_examples=300)
@given(st.integers(1, 300), st.data())
def test_every_record_is_applied_once_in_order_and_gaps_of_nothing_are_read_once(n, data):
    control = set(data.draw(st.lists(st.integers(0, n - 1), max_size=n // 2)))
    control.discard(n - 1)  # a gap shows when a later record comes: markers keep coming
    wanted = [o for o in range(n) if o not in control]
    # A skip before the first record handed is out of reach (nothing is expected yet: after an
    # assignment the agent starts wherever Faust resumes).
    skipped = set(data.draw(st.lists(st.integers(0, n - 1), max_size=n // 2))) - control - {wanted[0], n - 1}
    applied, g = run(n, control, skipped)
    assert applied == wanted  # each once, in offset order: nothing lost, nothing after its successor
    assert g.found == len(skipped) and g.unread == 0
    # One read per run of offsets not handed, and only then.
    holes = sum(1 for o in range(1, n) if (o in control or o in skipped) and not (o - 1 in control or o - 1 in skipped)
                and any(x > o and x not in control and x not in skipped for x in range(o, n))
                and o > wanted[0])
    assert g.read == holes


def test_a_skipped_record_is_applied_before_the_record_after_it():
    applied, g = run(5, control=set(), skipped={2})
    assert applied == [0, 1, 2, 3, 4] and (g.read, g.found) == (1, 1)


def test_a_commit_marker_costs_one_read_and_nothing_is_applied_for_it():
    applied, g = run(5, control={2}, skipped=set())
    assert applied == [0, 1, 3, 4] and (g.read, g.found) == (1, 0)


def test_after_a_rebalance_the_first_offset_opens_no_gap():
    g = Gaps()
    assert g.handed(1, 10) is None
    g.forget()
    assert g.handed(1, 500) is None   # resumed at its committed offset: nothing was skipped
    assert g.handed(2, 3) is None     # partitions apart
    assert g.handed(1, 503) == (501, 503)


def test_an_offset_handed_again_below_the_expected_one_opens_no_gap_and_moves_nothing_back():
    g = Gaps()
    assert [g.handed(0, o) for o in (0, 1, 2)] == [None, None, None]
    assert g.handed(0, 1) is None      # a replay: applied or skipped by the table's own check
    assert g.handed(0, 3) is None      # still expected at 3


@settings(max_examples=300)
@given(st.integers(1, 200), st.data())
def test_after_an_assignment_what_lies_between_the_tables_mark_and_the_resume_is_read(n, data):
    """Faust resumes a reassigned partition anywhere: below the table's mark (replays, which
    the table's own check skips) or above it with the records in between never handed. With
    the table's mark expected, each record above the mark is applied once, in order."""
    mark = data.draw(st.integers(-1, n - 1))   # the table holds records up to here
    resume = data.draw(st.integers(0, n - 1))  # the first record Faust hands
    g, applied = Gaps(), []
    g.expect(3, mark + 1)
    for o in range(resume, n):
        gap = g.handed(3, o)
        if gap is not None:
            start, end = gap
            g.filled(end - start)
            applied.extend(range(start, end))
        if o > mark:  # at or below the mark: a replay, skipped by the table's check
            applied.append(o)
    assert applied == list(range(mark + 1, n))
    assert g.read == (1 if resume > mark + 1 else 0)


def test_a_partition_resumed_above_its_tables_mark_reads_the_records_in_between():
    g = Gaps()
    g.forget()                            # a rebalance
    g.expect(2, 134)                      # the table holds records up to 133
    assert g.handed(2, 268) == (134, 268)  # the chaos run's resume: 134..267 never handed
    assert g.handed(2, 269) is None
