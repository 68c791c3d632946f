"""The consumer's group gate: user code sees an ordered queue's group one message at a time.

The dispatcher of a queue with ``ordering="group"`` may hand a consumer a *run*: several
consecutive messages of one group, in order, in one delivery (one
:class:`~kmq.consumer.held.HeldRange`). Before the consumer hands the next message of
the front of its ready ranges to user code, :func:`verdict` decides on what became of
the group's messages handed out before it (docs/ordering.md, "What a consumer of an
ordered queue sees"):

1. **give back** (uncounted, ``Verb.RETURN``) if one of them *failed* (released, lapsed,
   or rejected while the queue holds a dead-lettered head) and lies in the same run:
   its copy comes back and must go first, so the rest of the run must too;
2. **give back** if the message's remaining visibility is below :func:`margin_s`: it
   would time out, and its copy go elsewhere, while user code still had it;
3. **wait** while one of them is still held (a ``receive_batch`` stops there instead);
4. **hand** it out otherwise.

Messages without a group are never gated. A given-back message counts as a failed one,
so a give-back cascades through the rest of its run; a later run (another range) is
handed out normally. Pure: states and times are arguments, no I/O.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from kmq.message import ACKED, HELD, REJECTED

HAND, WAIT, GIVE_BACK = "hand", "wait", "give-back"
# What became of a message handed out earlier (see fate()).
PENDING, DONE, FAILED = "pending", "done", "failed"

MARGIN_MIN_S = 1.0      # never hand out a message with less visibility left than this ...
MARGIN_SHARE = 0.1      # ... or than this share of the visibility timeout ...
MARGIN_MAX_SHARE = 0.5  # ... but never ask for more than half of it (else nothing goes out)
TRIM_RETURNED_AT = 64   # a group's runs given back, kept while their ranges are held, past this


def fate(state: int, lapsed: bool, hold_on_reject: bool) -> str:
    """PENDING (still held by user code), DONE (acked; dead-lettered where the group goes
    on) or FAILED (released, returned, lapsed, or dead-lettered holding its group)."""
    if lapsed:
        return FAILED
    if state == HELD:
        return PENDING
    if state == ACKED or (state == REJECTED and not hold_on_reject):
        return DONE
    return FAILED


def margin_s(visibility_s: float) -> float:
    """Least remaining visibility a grouped message needs to be handed out:
    max(1 s, 10 % of the visibility timeout), at most half of it (a 1 s timeout
    would otherwise leave no message enough)."""
    return min(max(MARGIN_MIN_S, MARGIN_SHARE * visibility_s), MARGIN_MAX_SHARE * visibility_s)


def remaining_s(now: float, *, extended_at: float, visibility_s: float,
                handed_at: float | None = None, max_processing_s: float = 0.0) -> float:
    """The consumer's estimate of a message's visibility left at ``now`` (monotonic s).

    The tracker keeps it invisible ``visibility_s`` past the last EXTEND covering it
    (its range's ``extended_at``: its arrival, then each keepalive round's EXTEND once
    written). Once handed
    out, the keepalive stops extending it at ``handed_at + max_processing_s``
    (kmq.consumer.keepalive), so that bounds it too.
    """
    left = extended_at + visibility_s - now
    if handed_at is not None:
        left = min(left, handed_at + max_processing_s - now)
    return left


def verdict(previous: Iterable[tuple[str, bool]], remaining: float, margin: float) -> str:
    """HAND, WAIT or GIVE_BACK for the next message of a group (rules in the module docstring).

    ``previous``: ``(fate, same_run)`` of the group's messages handed out, and of those
    given back: its :func:`fate`, and whether it lies in the
    candidate's run (range).
    """
    pending = False
    for f, same_run in previous:
        if f == FAILED and same_run:
            return GIVE_BACK
        pending = pending or f == PENDING
    if remaining < margin:
        return GIVE_BACK
    return WAIT if pending else HAND


class _Group:
    __slots__ = ("batch", "before", "now", "returned")

    def __init__(self, batch: int) -> None:
        self.batch = batch
        self.before: list[tuple[Any, int, Any]] = []  # (range, rel, run) handed out in earlier batches
        self.now: list[tuple[Any, int, Any]] = []     # ... handed out in batch ``batch``
        self.returned: list[tuple[Any, Any]] = []     # (run, range) of the messages given back since


class GroupGate:
    """Per group, what :func:`verdict` looks at: the messages of its last hand-out (one
    ``receive``, or its part of one ``receive_batch``) and the runs it gave back since.

    A message is a ``(range, rel)`` pair (the consumer's ``HeldRange`` and a relative
    offset) and belongs to a *run*, a key compared by equality: the ``kmq.run`` header the
    dispatcher puts on an ordered queue's records (the run goes on across deliveries when
    the dispatcher hands more of the group to the same consumer), else its range.
    ``fate_of(range, rel)`` says what became of one (:func:`fate`). Batches are begun by
    :meth:`new_batch`. A message handed out in the current batch is pending like any
    other, so a batch holds at most one message of a group (user code may settle a
    batch's messages in any order).
    """

    __slots__ = ("_groups", "_batch", "_prune_at", "_trim")

    def __init__(self) -> None:
        self._groups: dict[bytes, _Group] = {}
        self._batch = 0
        self._prune_at = 1024
        self._trim: set[bytes] = set()  # groups with many runs given back (prune())

    def new_batch(self) -> None:
        """A new ``receive`` or ``receive_batch`` begins."""
        self._batch += 1

    def decide(self, group: bytes, run: Any, remaining: float, margin: float,
               fate_of: Callable[[Any, int], str]) -> str:
        """HAND, WAIT or GIVE_BACK for the message of ``group`` and ``run`` next in line."""
        g = self._groups.get(group)
        if g is None:
            return verdict((), remaining, margin)
        if any(r == run for r, _ in g.returned):
            return GIVE_BACK
        # What this batch took is in user code's hands too: one unsettled message per group.
        earlier = g.before + g.now
        return verdict(((fate_of(h, rel), r == run) for h, rel, r in earlier), remaining, margin)

    def handed(self, group: bytes, held: Any, rel: int, run: Any) -> None:
        """The message reached user code. It replaces what decide() looked at (none of that
        was pending, nor failed in this run); the runs given back stay so, for their later
        messages (hypothesis found one handed out: its run, read past while another run of
        the group waited at the front, was forgotten when that other run's next went)."""
        g = self._groups.get(group)
        if g is None:
            g = self._groups[group] = _Group(self._batch)
        elif g.batch != self._batch:
            g.batch, g.before, g.now = self._batch, [], []
        else:
            g.before = []
        g.now.append((held, rel, run))

    def given_back(self, group: bytes, held: Any, rel: int, run: Any) -> None:
        """The message was given back (a failed one): the rest of its run follows it."""
        g = self._groups.get(group)
        if g is None:
            g = self._groups[group] = _Group(self._batch)
        elif g.batch != self._batch:
            g.before, g.now, g.batch = g.before + g.now, [], self._batch
        if not any(r == run for r, _ in g.returned):
            g.returned.append((run, held))
            if len(g.returned) > TRIM_RETURNED_AT:
                self._trim.add(group)

    def prune(self, alive: Callable[[Any], bool]) -> None:
        """Forget groups none of whose messages lie in a range still ``alive``; does the work
        only when the groups doubled since the last time (amortised O(1) per hand-out), and
        a group's runs given back whose ranges are gone once they are many."""
        for group in self._trim:
            g = self._groups.get(group)
            if g is not None:
                g.returned = [(r, h) for r, h in g.returned if alive(h)]
        self._trim = {k for k in self._trim
                      if k in self._groups and len(self._groups[k].returned) > TRIM_RETURNED_AT}
        if len(self._groups) < self._prune_at:
            return
        self._groups = {k: g for k, g in self._groups.items()
                        if any(alive(h) for h, _, _ in g.before + g.now)
                        or any(alive(h) for _, h in g.returned)}
        self._prune_at = max(1024, 2 * len(self._groups))

    def __len__(self) -> int:
        return len(self._groups)
