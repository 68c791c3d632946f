"""The settings view's freshness rule (kmq.protocol.view_freshness), against a model of the
queues topic, a view that applies it late, and a reader that reads queue records sent in
between, with time passed in."""

from __future__ import annotations

from hypothesis import given, strategies as st

from kmq.protocol.view_freshness import STALE_LIMIT_S, ViewFreshness

STEP = st.tuples(st.sampled_from(["write", "apply", "send", "read", "ask", "check"]), st.integers(0, 1))


@given(steps=st.lists(STEP, max_size=400))
def test_a_record_is_covered_only_once_the_view_holds_every_change_made_before_its_send(steps):
    end = applied = 0               # the queues topic's end; how far the view applied it
    sent = {0: [], 1: []}           # queue partition -> the topic's end when each record was sent
    read_to = {0: 0, 1: 0}          # queue partition -> records read (offsets below it)
    fresh = ViewFreshness()
    for now_s, (step, p) in enumerate(steps):
        if step == "write":
            end += 1
        elif step == "apply":
            applied = min(end, applied + 1)
        elif step == "send":
            sent[p].append(end)
        elif step == "read":
            read_to[p] = len(sent[p])
        elif step == "ask" and fresh.may_ask():  # as the dispatcher asks: after its reads
            fresh.asked(read_to, {0: end}, float(now_s))
        elif step == "check":
            below = fresh.covered_below(p, {0: applied})
            assert below <= read_to[p], "covered what was not read"
            assert all(applied >= at_send for at_send in sent[p][:below]), \
                "covered a record sent after a change the view has not applied"


@given(writes=st.integers(0, 20), read=st.integers(1, 50))
def test_an_ask_answered_covers_what_was_read_before_it(writes, read):
    fresh = ViewFreshness()
    assert fresh.covered_below(0, {}) == 0 and fresh.may_ask()
    fresh.asked({0: read}, {0: writes, 1: 0}, now_s=5.0)
    assert not fresh.may_ask(), "one ask at a time"
    if writes:
        assert fresh.covered_below(0, {0: writes - 1, 1: 0}) == 0
    assert fresh.covered_below(0, {0: writes, 1: 0}) == read
    assert fresh.covered_below(1, {}) == 0 and fresh.may_ask()


def test_a_view_behind_for_the_limit_is_overdue_until_it_catches_up():
    fresh = ViewFreshness()
    fresh.asked({0: 3}, {0: 10}, now_s=100.0)
    assert fresh.covered_below(0, {0: 9}) == 0
    assert not fresh.overdue(100.0 + STALE_LIMIT_S - 0.01) and fresh.overdue(100.0 + STALE_LIMIT_S)
    assert fresh.covered_below(0, {0: 10}) == 3 and not fresh.overdue(1e9)


def test_covers_only_grow():
    fresh = ViewFreshness()
    fresh.asked({0: 8}, {0: 1}, now_s=0.0)
    assert fresh.covered_below(0, {0: 1}) == 8
    fresh.asked({0: 5}, {0: 1}, now_s=1.0)  # read back from lower (a seek): what was read stays read
    assert fresh.covered_below(0, {0: 1}) == 8
