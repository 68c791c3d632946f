"""Deduplication of the dispatcher's queues by ``kmq.dedup-id`` (docs/ordering.md, section 3):
an unordered queue's repeated sends dropped, the ids of sends read back after a BEGIN
remembered. Part of :class:`agents.dispatch.ordered.OrderedQueues` (a mixin; runs in the
dispatcher's thread only); the decisions are ``kmq.protocol.dedup.Dedup``'s."""

from __future__ import annotations

from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Iterator

from kmq.protocol import envelope
from kmq.protocol.dedup import valid_dedup_id

if TYPE_CHECKING:  # pragma: no cover
    from agents.dispatch.ordered import Key, OrderedQueues, _Queue

_FIRST = itemgetter(0)
_ID_ONLY = {envelope.ID}
_ABSENT = object()  # no kmq.dedup-id header (one without a value is None)


def header_names(records: list) -> set:
    """Every header name the records carry, asked of all of them at once (in C)."""
    if not records:
        return set()
    return set(map(_FIRST, chain.from_iterable(filter(None, map(type(records[0]).headers, records)))))


def _with_dedup_ids(records: list, names: set | None = None) -> Iterator[tuple[Any, bytes, list]]:
    """(record, its ``kmq.dedup-id``, its headers) of the records that carry one, in order.
    ``names``: :func:`header_names` of the records, if known."""
    if not records:
        return
    # Most records carry only kmq.id: their header names say there is nothing to look
    # into. (A plain producer's record may carry kmq.dedup-id alone.)
    if (header_names(records) if names is None else names) <= _ID_ONLY:
        return
    for rec in records:
        hs = rec.headers()
        if hs and (len(hs) > 1 or hs[0][0] != envelope.ID):
            raw = next((v for k, v in hs if k == envelope.DEDUP_ID), _ABSENT)
            if raw is not _ABSENT:  # a header without a value too: counted as bad-dedup-id
                yield rec, raw, hs


class Deduplicating:
    """:meth:`drop_duplicates` and :meth:`remember_sends` of
    :class:`~agents.dispatch.ordered.OrderedQueues`."""

    def drop_duplicates(self: "OrderedQueues", key: "Key", records: list, dedup_window_ms: int,
                        names: set | None = None) -> list:
        """An unordered queue's records without the duplicates of a send inside the window.
        Records with no header but ``kmq.id`` (an SDK send without headers) are not looked into.
        ``names``: :func:`header_names` of the records, if known."""
        dropped = set()
        q = None
        for rec, raw, hs in _with_dedup_ids(records, names):
            q = q or self._get(key, dedup_window_ms)
            if self._duplicate(q, key[2], rec, raw, hs):
                dropped.add(rec.offset())
        return [rec for rec in records if rec.offset() not in dropped] if dropped else records

    def remember_sends(self: "OrderedQueues", key: "Key", records: list, dedup_window_ms: int) -> int:
        """Records handed out before this dispatcher began, read back (agents.dispatch.
        dedup_replay): their dedup ids are remembered, nothing else; returns how many."""
        n = 0
        q = None
        for rec, raw, hs in _with_dedup_ids(records):
            dedup_id = valid_dedup_id(raw)
            if dedup_id is not None:
                q = q or self._get(key, dedup_window_ms)
                self._check(q, key[2], rec, dedup_id, hs)
                n += 1
        return n

    def _duplicate(self: "OrderedQueues", q: "_Queue", p: int, rec: Any, raw_dedup: bytes, headers: list) -> bool:
        dedup_id = valid_dedup_id(raw_dedup)
        if dedup_id is None:
            self.stats["bad-dedup-id"] += 1
            return False
        if self._check(q, p, rec, dedup_id, headers) is None:
            return False
        self.stats["deduplicated"] += 1
        return True

    def _check(self: "OrderedQueues", q: "_Queue", p: int, rec: Any, dedup_id: bytes, headers: list) -> str | None:
        """``Dedup.check`` of one record: None if it is the first of its id in the window."""
        raw_id = next((v for k, v in headers if k == envelope.ID), None)
        msg_id = envelope.kept_id(raw_id, p, rec.offset())
        return q.dedup.check(dedup_id, msg_id, rec.offset(), rec.timestamp()[1], self._wall_ms())
