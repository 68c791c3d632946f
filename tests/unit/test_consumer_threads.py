"""A consumer's threads: the receiving thread's hand-out against the flusher's give-back,
and verbs of another thread against close()'s give-back (an audit, 2026-11-29).

Forced interleavings on a broker-less consumer (tests/gate_harness.py): one thread is
paused at the point the audit found, the other runs, then the first goes on. Each test
failed on the code before (messages handed out already released, IndexError into user
code, an offset settled twice and in_flight at -1).
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from types import SimpleNamespace

from hypothesis import given, settings, strategies as st

from kmq.consumer import held as held_module
from kmq.consumer.held import HeldRange
from kmq.consumer.settlement import SettlementLog
from kmq.errors import ConsumerClosedError, MessageSettledError
from kmq.message import ACKED, RELEASED, REJECTED, Message, Verb
from kmq.protocol import markers as M
from tests import gate_harness

WAIT_S = 10.0  # a paused thread's longest wait: only a broken test waits it out


class _Source:
    mode = "shared"

    def __init__(self) -> None:
        self.settled = 0

    def on_settled(self, n: int) -> None:
        self.settled += n


def consumer():
    c = gate_harness.consumer(ordering="none")
    c._source = _Source()
    c.max_in_flight, c.batch_size = 1 << 30, 1000
    c.stats = {"received": 0, "acked": 0, "released": 0, "rejected": 0, "markers": 0}
    return c


def give_back_on_flusher(c) -> threading.Thread:
    """The flusher finding user code away: what is not handed out goes back (lock held)."""
    def run():
        with c._lock:
            c._return_unhanded()
    t = threading.Thread(target=run, name="flusher")
    t.start()
    return t


def paused_in(target, name: str, pause_when) -> tuple[threading.Thread, dict, threading.Event, threading.Event]:
    """Run ``target`` on a thread that pauses where ``pause_when()`` is called from it."""
    out: dict = {}
    inside, go = threading.Event(), threading.Event()

    def hook():
        if threading.current_thread().name == name and not inside.is_set():
            inside.set()
            go.wait(WAIT_S)

    pause_when(hook)

    def run():
        try:
            out["value"] = target()
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            out["error"] = exc
    t = threading.Thread(target=run, name=name)
    t.start()
    assert inside.wait(WAIT_S)
    return t, out, inside, go


def test_a_message_being_handed_out_is_not_given_back_under_it(monkeypatch):
    c = consumer()
    held = gate_harness.deliver(c, [None, None, None])
    real_message = held_module.Message

    def pause_when(hook):
        def message(args):
            hook()
            return real_message(args)
        monkeypatch.setattr(held_module, "Message", message)

    t, out, _, go = paused_in(lambda: c.receive(0), "receiving", pause_when)
    flusher = give_back_on_flusher(c)
    flusher.join(0.3)  # the code before: done by now, under the hand-out
    go.set()
    t.join(WAIT_S)
    flusher.join(WAIT_S)
    m = out["value"]
    assert m is not None and m[2] == 0 and m.settled is None  # before: "released"
    m.ack()                                                     # before: MessageSettledError
    with c._lock:
        markers = c._drain_settlements()
    kinds = sorted((type(x).__name__, x.mask) for x in markers)
    assert kinds == [("Ack", 0b1), ("Release", 0b110)]
    assert c._in_flight == 0 and held.ref not in c._held


def test_a_range_held_while_a_receive_hands_out_is_neither_popped_nor_lost(monkeypatch):
    c = consumer()
    gate_harness.deliver(c, [None])
    real_time = held_module.time

    def pause_when(hook):
        class Clock:
            @staticmethod
            def monotonic():
                hook()
                return real_time.monotonic()
        monkeypatch.setattr(held_module, "time", Clock)

    t, out, _, go = paused_in(lambda: c.receive(0), "receiving", pause_when)

    def flusher_then_read():  # give back (nothing left), then a background read holds more
        with c._lock:
            c._return_unhanded()
            gate_harness.deliver(c, [None] * 5)
    flusher = threading.Thread(target=flusher_then_read)
    flusher.start()
    flusher.join(0.3)
    go.set()
    t.join(WAIT_S)
    flusher.join(WAIT_S)
    monkeypatch.setattr(held_module, "time", real_time)
    assert "error" not in out, out  # before: IndexError('pop from an empty deque')
    assert out["value"][2] == 0
    rest = [c.receive(0) for _ in range(5)]
    assert [m[2] for m in rest] == [0, 1, 2, 3, 4]  # before: the new range was popped unhanded
    assert c._in_flight == 6


def test_hand_outs_and_give_backs_of_two_threads_never_overlap():
    c = consumer()
    rounds = 3000
    seen = Counter()
    flusher_done = threading.Event()

    def flusher():
        for _ in range(rounds):
            with c._lock:
                gate_harness.deliver(c, [None] * 3)
                c._return_unhanded()
        flusher_done.set()

    def receiving():
        while not flusher_done.is_set() or c._ready:
            try:
                m = c.receive(0)
            except Exception as exc:  # noqa: BLE001 - counted: the code before raised into user code
                seen["error " + type(exc).__name__] += 1
                continue
            if m is None:
                continue
            seen["handed"] += 1
            if m.settled is not None:
                seen["handed already " + m.settled] += 1
            m.ack()

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=flusher), threading.Thread(target=receiving)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        sys.setswitchinterval(switch)
    with c._lock:
        c._drain_settlements()
    assert set(seen) <= {"handed"}, seen
    assert c._in_flight == 0 and not c._held


def test_an_ack_racing_closes_give_back_settles_its_message_once():
    c = consumer()
    held = gate_harness.deliver(c, [None])
    (m,) = held.hand_out(1)

    class PausingState(bytearray):
        hook = None

        def __getitem__(self, i):
            value = bytearray.__getitem__(self, i)
            if self.hook is not None:
                hook, self.hook = self.hook, None
                hook()
            return value

    held.state = PausingState(held.state)

    def pause_when(hook):
        held.state.hook = hook

    t, out, _, go = paused_in(m.ack, "user", pause_when)  # paused after its check
    with c._lock:
        c._give_back_held()  # close() on another thread: the message looks held
    go.set()
    t.join(WAIT_S)
    assert "error" not in out
    with c._lock:
        markers = c._drain_settlements()
    assert [type(x).__name__ for x in markers] == ["Ack"]  # before: Ack and Release
    assert c._in_flight == 0                                 # before: -1
    assert (c.stats["acked"], c.stats["released"]) == (1, 0)


VERBS = st.sampled_from([Verb.RELEASE, Verb.RETURN, Verb.REJECT, "ack", "ack-run"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.tuples(VERBS, st.integers(0, 7)), max_size=12), min_size=1, max_size=4))
def test_every_offset_is_settled_by_one_marker_at_most_whatever_verbs_raced(drains):
    """Verbs of racing threads may each pass their check: the drains still settle an offset
    once, and count it once."""
    log = SettlementLog()
    held = HeldRange(M.RangeRef("q", 0, 100, 108), SimpleNamespace(), log)
    held.recs, held.rels, held.outstanding = [object()] * 8, range(8), 8
    settled_total, settled_offsets = 0, []

    def settled(h, mask):
        return mask.bit_count()

    for verbs in drains:
        for verb, rel in verbs:
            if verb == "ack":
                held.state[rel] = ACKED
                log.acks.append(held)
            elif verb == "ack-run":
                held.state[rel] = ACKED
                log.add_run(held)
            else:
                held.state[rel] = REJECTED if verb is Verb.REJECT else RELEASED
                log.add(Message((None, held, rel)), verb, 0 if verb is not Verb.REJECT else "r")
        markers, counts = log.drain(settled)
        settled_total += counts["settled"]
        for x in markers:
            settled_offsets += [r for r in range(8) if x.mask >> r & 1]
    assert len(settled_offsets) == len(set(settled_offsets)) == settled_total


def test_a_receive_after_close_on_another_thread_raises_closed_and_hands_nothing_out():
    c = consumer()
    gate_harness.deliver(c, [None, None])
    c._closed = True  # close() began on another thread; its give-back has not run yet
    try:
        c.receive(0)
    except ConsumerClosedError:
        pass
    else:
        raise AssertionError("a receive after close() began handed a message out")
    assert c._ready[0].handed == 0


def test_a_message_given_back_by_close_says_so_when_settled_after(monkeypatch):
    c = consumer()
    held = gate_harness.deliver(c, [None])
    (m,) = held.hand_out(1)
    with c._lock:
        c._give_back_held()
    c._closed = True
    try:
        m.ack()
    except MessageSettledError as exc:
        assert "close()" in str(exc)
    else:
        raise AssertionError("an ack after close() took effect")
