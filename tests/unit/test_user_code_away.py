"""Whether a shared queue's user code is away (kmq.consumer.user_code; pure: time passed in),
what its consumer's CREDIT says then, and how often its CREDITs go out (kmq.consumer.credits)."""

from types import SimpleNamespace

from hypothesis import given, settings, strategies as st

from kmq.consumer.credits import CreditAsking
from kmq.consumer.held import HeldRange
from kmq.consumer.settlement import SettlementLog
from kmq.consumer.user_code import give_up_s, user_code_away
from kmq.protocol.markers import RangeRef

VIS, MAX_PROCESSING, ROUND = 2.0, 4.0, 0.5   # a message in user code is last extended 2.5 s in


def held(handed_at: list[float], n: int = 3, start: int = 10) -> HeldRange:
    h = HeldRange(RangeRef("q", 0, start, start + n), SimpleNamespace(), SettlementLog())
    h.recs, h.rels, h.outstanding = [object()] * n, range(n), n
    h.handed = len(handed_at)
    h.handouts = [(i + 1, t) for i, t in enumerate(handed_at)]
    return h


def away(ranges, now, active_at, max_processing=MAX_PROCESSING):
    return user_code_away(ranges, now=now, active_at=active_at, visibility_s=VIS,
                          max_processing_s=max_processing, interval_s=ROUND)


def test_user_code_holding_a_message_past_its_last_extension_without_asking_since_is_away():
    # The hung handler: received at 0, never back. The tracker takes the message back a
    # visibility timeout after its last extension; the consumer stops asking before that.
    h = held([0.0])
    assert give_up_s(VIS, MAX_PROCESSING, ROUND) == 2.5
    assert not away([h], now=2.4, active_at=0.0)
    assert away([h], now=2.5, active_at=0.0)
    assert away([h], now=1e6, active_at=0.0)


def test_a_receive_or_a_settlement_after_the_give_up_says_user_code_is_there():
    # One busy thread of several: the others' receives and verbs keep the consumer asking.
    h = held([0.0])
    assert not away([h], now=3.0, active_at=2.6)
    assert away([held([0.0, 2.7])], now=5.3, active_at=2.7)  # the second one's give-up passed too


def test_settled_messages_and_read_ahead_do_not_count_but_lapsed_ones_do():
    h = held([0.0])
    h.state[0] = 1  # acked
    assert not away([h], now=10.0, active_at=0.0)
    assert not away([held([])], now=10.0, active_at=0.0)  # read-ahead only: nothing in user code
    h = held([0.0])
    h.lapsed.add(0)  # the tracker took it back; user code still holds it
    assert away([h], now=10.0, active_at=0.0)


def test_an_explicit_extend_moves_the_give_up():
    h = held([0.0])
    h.holds[0] = 30.0  # extend(30) at about 0
    assert not away([h], now=29.0, active_at=0.0)
    assert away([h], now=30.5, active_at=0.0)


def test_without_keepalive_in_user_code_a_message_is_given_up_after_one_round():
    # max_processing_s 0: never extended in user code; one round, not at once (a consumer
    # would say "away" and "back" for every message it receives).
    assert give_up_s(VIS, 0.0, ROUND) == ROUND
    assert not away([held([0.0])], now=0.4, active_at=0.0, max_processing=0.0)
    assert away([held([0.0])], now=0.5, active_at=0.0, max_processing=0.0)


def test_nothing_is_away_before_user_codes_last_sign():
    assert not away([held([0.0])], now=5.0, active_at=5.0)


messages = st.lists(st.tuples(st.floats(0, 100), st.booleans(), st.floats(0, 150) | st.none()),
                     min_size=0, max_size=40)


@settings(max_examples=300, deadline=None)
@given(messages, st.integers(1, 5), st.floats(0, 200), st.floats(0, 200))
def test_away_is_exactly_a_give_up_between_the_last_sign_and_now(msgs, per_range, now, active_at):
    # Against the model: user code is away iff a message it holds (handed out, not settled)
    # was last extended after its last receive or verb, and the tracker has been told
    # nothing since; in any number of ranges, in hand-out order.
    msgs.sort(key=lambda m: m[0])
    ranges, expected = [], False
    for k in range(0, len(msgs), per_range):
        part = msgs[k:k + per_range]
        h = held([t for t, _, _ in part], n=per_range, start=k)
        for rel, (t, settled, hold) in enumerate(part):
            if settled:
                h.state[rel] = 1
            if hold is not None:
                h.holds[rel] = hold
            give_up = max(t, (hold or 0.0) - VIS) + give_up_s(VIS, MAX_PROCESSING, ROUND)
            expected |= not settled and active_at < give_up <= now
        ranges.append(h)
    assert away(ranges, now=now, active_at=active_at) == expected


class _Credits(CreditAsking):
    def __init__(self):
        self._c = SimpleNamespace(_ready=[], _gate=None, max_in_flight=100, _in_flight=1, queue="q",
                                  _timeout_ms=2000, _user_code_away=False)
        self.consumer_id, self.lane, self.prefetch = "c1", 0, 10
        self.lanes = SimpleNamespace(unsaid=False)
        self._receipts = SimpleNamespace(claim=lambda: (1, 1))
        self._leaving, self._freed, self._last_free, self._last_credit_s = False, 0, 10, -10.0
        self._said_away = False


def test_a_consumer_whose_user_code_is_away_asks_for_nothing_and_says_so_at_once_both_ways():
    c = _Credits()
    assert c.credit(0.0)[0].free == 10  # the heartbeat
    assert c.credit(0.1) == []           # nothing new to say
    c._c._user_code_away = True
    (said,) = c.credit(0.2)              # at once, not at the next heartbeat
    assert said.free == 0 and said.lease_ms > 0  # still a member: its lease is renewed
    assert c.credit(0.3) == []
    assert c.credit(1.3)[0].free == 0  # heartbeats say nothing is free
    c._c._user_code_away = False
    assert c.credit(1.4)[0].free == 10  # back: at once


def test_a_consumer_asks_every_quarter_visibility_timeout_within_a_quarter_and_one_second():
    # Its dispatcher hands it work for half a visibility timeout after a CREDIT (two
    # heartbeats; kmq.protocol.liveness): a live consumer must ask within it.
    c = _Credits()                    # a 2 s visibility timeout: every 0.5 s
    assert c.credit(0.0) and c.credit(0.49) == [] and c.credit(0.5)
    c._c._timeout_ms = 30_000         # every second
    assert c.credit(1.49) == [] and c.credit(1.5)
    c._c._timeout_ms = 100            # every 0.25 s at most
    assert c.credit(1.74) == [] and c.credit(1.75)


def test_a_credit_counts_the_read_ahead_while_the_receiving_thread_takes_from_it():
    # The flusher thread counted _ready while the receiving thread popped from it (no lock
    # on that path): "deque mutated during iteration" reached user code (a CI run).
    from collections import deque

    c = _Credits()
    ready = c._c._ready = deque()

    class Popping:
        recs = [1, 2, 3]

        @property
        def handed(self):
            if ready:
                ready.popleft()  # what the receiving thread does meanwhile
            return 1

    ready.extend([Popping(), Popping(), Popping()])
    (credit,) = c.credit(0.0)
    assert credit.free == 10 - 6  # the three ranges as they were: two unhanded messages each
