"""Concurrent writers of one queue's configuration: which fields a rewrite must put back.

A record of the queues topic replaces the queue's whole configuration (the latest one
per key is the configuration: the tracker, the SDK and Spark jobs read it so), and each
writer builds its record from its own view: a view a moment behind wrote away a change
another writer had just made (an audit: two clients' ``configure_queue`` lost one of
the two changes in 4 of 4 tries). The writer reads back the queue's records written
since its base and, by the rule here, writes again on top of the latest:

1. a record of another writer *after* ours in which a field we changed still has our
   base's value was built from a view without ours: our value goes back on top of it. A
   field another writer changed to a third value is theirs (the last writer wins). (A
   writer that saw ours and set it back to the base value within the moment ours is read
   back, some 20-50 ms, would be undone: indistinguishable, and far rarer than the race.)
2. a record of another writer *before* ours, that our base had not seen: the fields it
   changed and we did not go back, unless a later record changed them again.

Fields that mean one thing together are compared and put back together (a mode switch is
its mode, handover state and switch time; a spread its partition starts; a tenant its
signature). ``updated_at_ms`` is no change of anyone's. Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from kmq.queue_config import QueueConfig

_TOGETHER = (("dispatch", "handover_pending", "handover", "dispatch_since_ms"),
             ("spread", "partition_starts"), ("tenant", "tenant_sig"))
_ALONE = tuple((f.name,) for f in fields(QueueConfig)
               if f.name != "updated_at_ms" and not any(f.name in g for g in _TOGETHER))
GROUPS: tuple[tuple[str, ...], ...] = _TOGETHER + _ALONE


def _values(cfg: QueueConfig, group: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(getattr(cfg, name) for name in group)


def changed_groups(base: QueueConfig, new: QueueConfig) -> list[tuple[str, ...]]:
    """The groups of fields whose values differ between ``base`` and ``new``."""
    return [g for g in GROUPS if _values(base, g) != _values(new, g)]


def fields_to_restore(base: QueueConfig, mine: QueueConfig, before: QueueConfig | None,
                      after: QueueConfig | None) -> dict[str, Any]:
    """Fields to set on the queue's latest record so it keeps ``mine``'s changes and what
    ``mine`` wrote away; empty when nothing is lost.

    ``base``: the configuration ``mine`` was built from; ``before``: the latest record of
    another writer between ``base`` and ``mine`` (None: none); ``after``: the latest record
    of another writer after ``mine`` (None: ``mine`` is the latest).
    """
    top = mine if after is None else after
    ours = changed_groups(base, mine)
    fix: dict[str, Any] = {}
    for g in ours if after is not None else ():
        if _values(after, g) == _values(base, g):  # rule 1: built without ours
            fix.update(zip(g, _values(mine, g)))
    if before is not None:
        for g in changed_groups(base, before):  # rule 2: theirs, which ours wrote away
            if g not in ours and _values(top, g) == _values(base, g):
                fix.update(zip(g, _values(before, g)))
    return {name: value for name, value in fix.items() if getattr(top, name) != value}
