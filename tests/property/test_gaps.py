"""kmq.protocol.gaps: a record the consumer skipped is fetched again and applied before
anything after it; gaps that hold nothing for the agent are accepted, never looped on."""

from hypothesis import given, settings
from hypothesis import strategies as st

from kmq.protocol.gaps import Rewinds, Step


def run(n, control, flaky, in_flight):
    """A consumer over offsets 0..n-1: ``control`` offsets are never handed (commit markers,
    aborted records), ``flaky`` ones are skipped the first time they are fetched. After a
    REWIND, ``in_flight`` records already on their way from the old position arrive first.
    Returns the offsets applied, in order, and the Rewinds."""
    r, applied = Rewinds(), []
    skipped_once: set[int] = set()

    def fetch(start):
        for o in range(start, n):
            if o in control:
                continue
            if o in flaky and o not in skipped_once:
                skipped_once.add(o)
                continue
            yield o

    stream = fetch(0)
    backlog: list[int] = []
    steps = 0
    while True:
        steps += 1
        assert steps < 20 * (n + 1), "no progress"
        if backlog:
            o = backlog.pop(0)
        else:
            o = next(stream, None)
            if o is None:
                return applied, r
        step = r.handed(3, o)
        if step is Step.APPLY:
            applied.append(o)
        elif step is Step.REWIND:
            old = stream
            backlog = [x for _, x in zip(range(in_flight), old)]  # already fetched: they come first
            stream = fetch(r.rewind_to)


@settings(max_examples=300)
@given(st.integers(1, 200), st.data(), st.integers(0, 5))
def test_every_record_is_applied_in_order_and_gaps_of_nothing_are_accepted(n, data, in_flight):
    control = set(data.draw(st.lists(st.integers(0, n - 1), max_size=n // 3)))
    control.discard(n - 1)  # a skip shows when a later record comes: markers keep coming
    wanted = [o for o in range(n) if o not in control]
    # A skip before the first record handed is out of reach (nothing is expected yet: after an
    # assignment the agent starts wherever Faust resumes).
    flaky = set(data.draw(st.lists(st.integers(0, n - 1), max_size=n // 3))) - control - {wanted[0], n - 1}
    applied, r = run(n, control, flaky, in_flight)
    assert applied == wanted  # each once, in offset order: nothing skipped, nothing after its successor
    # One rewind per run of skipped offsets: bounded by what was not handed the first time.
    assert r.accepted <= r.rewinds <= len(flaky) + len(control)
    assert r.rewinds - r.accepted <= len(flaky) and r.found <= len(flaky)


def test_a_flaky_skip_is_fetched_again_before_the_record_after_it():
    applied, r = run(5, control=set(), flaky={2}, in_flight=2)
    assert applied == [0, 1, 2, 3, 4] and (r.rewinds, r.accepted, r.found) == (1, 0, 1)


def test_a_commit_marker_costs_one_rewind_and_is_accepted():
    applied, r = run(5, control={2}, flaky=set(), in_flight=1)
    assert applied == [0, 1, 3, 4] and (r.rewinds, r.accepted, r.found) == (1, 1, 0)


def test_after_a_rebalance_the_first_offset_opens_no_gap():
    r = Rewinds()
    assert r.handed(1, 10) is Step.APPLY
    r.forget()
    assert r.handed(1, 500) is Step.APPLY  # resumed at its committed offset: nothing was skipped
    assert r.handed(2, 3) is Step.APPLY    # partitions apart


def test_a_failed_rewind_accepts_the_gap_instead_of_dropping_records_forever():
    r = Rewinds()
    assert [r.handed(0, o) for o in (0, 1)] == [Step.APPLY, Step.APPLY]
    assert r.handed(0, 4) is Step.REWIND and r.rewind_to == 2
    r.cancel(0)
    assert r.handed(0, 4) is Step.APPLY and r.handed(0, 5) is Step.APPLY
