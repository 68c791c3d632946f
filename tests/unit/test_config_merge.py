"""Two writers of one queue's configuration, each from its own view (kmq.ops.config_merge):
whichever lands last, and whichever reads back first, the queue keeps both changes; a
setting both change is the last writer's. And a view keeps the newest of its own writes
and what it reads (the follower thread applied older records over a write: an audit)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from kmq.ops.config_merge import changed_groups, fields_to_restore
from kmq.ops.queues_topic import QueueConfigs
from kmq.queue_config import QueueConfig
from kmq.settings import Settings
from tests.fake_records import ConfigRec

# Settings a client changes, each valid whatever the others are.
VALUES = {
    "visibility_timeout_s": st.sampled_from([1.0, 7.0, 30.0, None]),
    "max_deliveries": st.sampled_from([1, 3, 9, None]),
    "dead_letter": st.booleans(),
    "dead_letter_head": st.sampled_from(["continue", "hold"]),
    "dedup_window_s": st.sampled_from([60.0, 300.0]),
    "dispatch": st.sampled_from(["shared", "partition", None]),
}


@st.composite
def changes(draw) -> dict:
    names = draw(st.sets(st.sampled_from(sorted(VALUES)), min_size=1, max_size=3))
    return {n: draw(VALUES[n]) for n in names}


def applied(cfg: QueueConfig, fix: dict) -> QueueConfig:
    return replace(cfg, **fix) if fix else cfg


def same(a: QueueConfig, b: QueueConfig) -> bool:
    return not changed_groups(a, b)


@settings(max_examples=300, deadline=None)
@given(base=changes(), ours=changes(), theirs=changes(), ours_reads_back_first=st.booleans())
def test_a_stale_writer_after_ours_loses_neither_change(base, ours, theirs, ours_reads_back_first):
    # Given both built from one base, ours landing first and theirs (stale) after it
    b = QueueConfig(**base)
    mine, stale = replace(b, **ours), replace(b, **theirs)
    # When each writer reads the other's record back (in either order) and writes again
    fix_mine = fields_to_restore(b, mine, None, stale)  # theirs is after ours
    fix_theirs = fields_to_restore(b, stale, mine, None)  # ours is before theirs
    rewrites = [applied(stale, fix) for fix in (fix_mine, fix_theirs) if fix]
    if not ours_reads_back_first:
        rewrites.reverse()
    log = [mine, stale] + rewrites
    final = log[-1]
    # Then the final record holds their changes (the last writer's) and ours they left alone
    for name in theirs:
        if getattr(stale, name) != getattr(b, name):
            assert getattr(final, name) == getattr(stale, name), name
    for name in ours:
        if name not in theirs or getattr(stale, name) == getattr(b, name):
            assert getattr(final, name) == getattr(mine, name), name


@given(base=changes(), ours=changes())
def test_nothing_is_written_again_when_no_other_writer_came(base, ours):
    b = QueueConfig(**base)
    assert fields_to_restore(b, replace(b, **ours), None, None) == {}


@given(base=changes(), ours=changes(), theirs=changes())
def test_a_later_record_built_on_ours_is_left_as_it_is(base, ours, theirs):
    # Given a writer that saw ours and changed settings of its own, third values included
    b = QueueConfig(**base)
    mine = replace(b, **ours)
    later = replace(mine, **theirs)
    # Then none of our settings goes back over it but one it shows at our base's value
    fix = fields_to_restore(b, mine, None, later)
    assert all(getattr(later, n) == getattr(b, n) for n in fix)
    if not set(theirs) & {n for g in changed_groups(b, mine) for n in g}:
        assert fix == {}  # it left ours alone: it has them


def test_the_trackers_handover_after_a_switch_is_not_undone():
    # Given a switch to partition mode, then the tracker's handover (pending cleared)
    base = QueueConfig(dispatch="shared", visibility_timeout_s=3.0)
    switch = replace(base, dispatch="partition", handover_pending=True, dispatch_since_ms=5)
    handover = replace(switch, handover_pending=False, handover={0: 12})
    # Then the switch's writer puts nothing back (handover_pending=False is its base's
    # value, but the mode's fields compare together)
    assert fields_to_restore(base, switch, None, handover) == {}


def test_a_change_the_tracker_wrote_away_goes_back_on_its_handover():
    # Given a switch, a client's change, and a handover built from the switch's record
    switch = QueueConfig(dispatch="partition", handover_pending=True, dispatch_since_ms=5)
    client = replace(switch, visibility_timeout_s=7.0)
    handover = replace(switch, handover_pending=False, handover={0: 12})
    # Then the tracker's read-back puts the client's change on top of its handover
    fix = fields_to_restore(switch, handover, client, None)
    assert fix == {"visibility_timeout_s": 7.0}
    # and the client's read-back (the handover after it, showing none of its change) too
    assert fields_to_restore(switch, client, None, handover) == {"visibility_timeout_s": 7.0}


def _view() -> QueueConfigs:
    view = QueueConfigs.__new__(QueueConfigs)
    view._init_state(Settings(), None)
    return view


def test_a_view_does_not_apply_a_record_older_than_its_own_write():
    # Given a view that wrote visibility 5 at offset 10, and records 8 and 9 not read yet
    view = _view()
    view.put_local("q", QueueConfig(visibility_timeout_s=5.0), (0, 10))
    # When its follower reads them, then its own write and a later record
    view._read(ConfigRec(b"q", QueueConfig(visibility_timeout_s=3.0).encode(), 8))
    view._read(ConfigRec(b"q", None, 9))  # an older tombstone neither
    assert view.get("q").visibility_timeout_s == 5.0
    view._read(ConfigRec(b"q", QueueConfig(visibility_timeout_s=5.0).encode(), 10))
    view._read(ConfigRec(b"q", QueueConfig(visibility_timeout_s=9.0).encode(), 11))
    # Then it went only forwards
    assert view.get("q").visibility_timeout_s == 9.0


def test_a_write_is_not_applied_over_a_newer_record_read_first():
    view = _view()
    view._read(ConfigRec(b"q", QueueConfig(max_deliveries=4).encode(), 12))
    view.put_local("q", QueueConfig(max_deliveries=2), (0, 11))
    assert view.get("q").max_deliveries == 4
    view.put_local("q", QueueConfig(max_deliveries=6))  # where unknown (the purge points'): as before
    assert view.get("q").max_deliveries == 6
