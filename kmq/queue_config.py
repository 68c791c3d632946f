"""Per-queue settings, changeable at run time, kept in a compacted topic read as a table.

``client.configure_queue("orders", max_deliveries=3)`` writes one record
(key = queue id, value = versioned JSON) to the queues topic (compacted:
the latest record per queue is the configuration, like a Kafka Streams
KTable). The tracker and every consumer keep a
:class:`~kmq.ops.queues_topic.QueueConfigs` view that follows the topic, so new
values apply to later deliveries without a restart. A queue that was never
configured uses the global ``KMQ_*`` defaults.

This module is the :class:`QueueConfig` type: its validation, resolved values
and record codec; reading and writing the topic is :mod:`kmq.ops.queues_topic`.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from kmq.backoff import Backoff
from kmq.errors import ConfigError
from kmq.protocol.limits import MAX_TIMEOUT_MS, int_in
from kmq.protocol.ordering import DEAD_LETTER_HEAD_POLICIES, DEFAULT_DEDUP_WINDOW_S, ORDERINGS
from kmq.setting_bounds import I64_MAX
from kmq.setting_checks import MAX_PROCESSING_S
from kmq.settings import Settings
from kmq.ops.tenancy import validate_tenant_name

CONFIG_VERSION = 1
MAX_VISIBILITY_S = MAX_TIMEOUT_MS / 1000  # 12 h: the marker codec's timeout limit
MAX_DEDUP_WINDOW_S = 12 * 3600.0
DISPATCH_MODES = ("shared", "partition")
MAX_SPREAD = 1024  # and at most the queue topic's partitions (checked when a spread grows)


def _check_offsets(name: str, offsets: object) -> None:
    """A partition -> offset map of a queue: at most MAX_SPREAD partitions (a queue's own;
    200,000 entries in a config grew the tracker and every client by 130-140 MB)."""
    if not isinstance(offsets, dict) or len(offsets) > MAX_SPREAD or not all(
            int_in(p, 0, 2**31 - 1) and int_in(o, 0, I64_MAX) for p, o in offsets.items()):
        raise ConfigError(f"{name} must map at most {MAX_SPREAD} partitions (0 to 2**31-1) to "
                          "offsets (0 to 2**63-1)")


SECONDS_FIELDS = ("visibility_timeout_s", "max_processing_s", "dedup_window_s")


@dataclass(frozen=True)
class QueueConfig:
    """Settings of one logical queue; ``None`` means the global ``KMQ_*`` default."""

    visibility_timeout_s: float | None = None
    max_deliveries: int | None = None
    max_processing_s: float | None = None
    backoff: Backoff = field(default_factory=Backoff)
    dead_letter: bool = True
    spread: int = 1
    tenant: str | None = None
    tenant_sig: str = ""  # the admin's signature of (queue, tenant) (kmq.ops.control_sig)
    # Queue purges: records of this queue below these offsets are not delivered.
    purged_before: dict[int, int] = field(default_factory=dict)
    # Partitions added by growing the spread: where this queue's records begin on
    # each (a new consumer starts there, not at the partition's beginning).
    partition_starts: dict[int, int] = field(default_factory=dict)
    # "shared": the tracker dispatches to any number of consumers; "partition": the
    # consumers form a group over the queue's partitions; None: KMQ_DISPATCH.
    dispatch: str | None = None
    # Shared -> partition: the tracker records where its dispatcher stopped (handover,
    # partition -> offset) and clears handover_pending; group consumers wait for that.
    handover_pending: bool = False
    handover: dict[int, int] = field(default_factory=dict)
    dispatch_since_ms: int = 0  # when the queue's mode last changed (0: never)
    # "group": one message per kmq.group header in flight at a time, in send order
    # (docs/ordering.md); "none": no order.
    ordering: str = "none"
    # What a dead-lettered group head does: "continue" with the group's next (SQS), or
    # "hold" the group until the message is redriven.
    dead_letter_head: str = "continue"
    dedup_window_s: float = DEFAULT_DEDUP_WINDOW_S  # kmq.dedup-id: later sends within it are dropped
    updated_at_ms: int = 0

    def __post_init__(self) -> None:
        _check_number("visibility_timeout_s", self.visibility_timeout_s, 0.001, MAX_VISIBILITY_S)
        _check_number("max_processing_s", self.max_processing_s, 0.001, MAX_PROCESSING_S)
        if self.max_deliveries is not None and (
                isinstance(self.max_deliveries, bool) or not isinstance(self.max_deliveries, int)
                or not 1 <= self.max_deliveries <= 1_000_000):
            raise ConfigError(f"max_deliveries={self.max_deliveries!r} must be a whole number "
                              "from 1 to 1000000")
        if not isinstance(self.backoff, Backoff):
            raise ConfigError("backoff must be a kmq.Backoff (Backoff.fixed(...), "
                              "Backoff.exponential(...) or Backoff.none())")
        if not isinstance(self.dead_letter, bool):
            raise ConfigError(f"dead_letter={self.dead_letter!r} must be True or False")
        check_spread(self.spread)
        if self.tenant is not None:
            validate_tenant_name(self.tenant)
        if not isinstance(self.tenant_sig, str):
            raise ConfigError(f"tenant_sig={self.tenant_sig!r} must be a string")
        if self.dispatch not in (None, *DISPATCH_MODES):
            raise ConfigError(f"dispatch={self.dispatch!r}: use one of {', '.join(map(repr, DISPATCH_MODES))} "
                              "(or None for the KMQ_DISPATCH default)")
        if self.ordering not in ORDERINGS:
            raise ConfigError(f"ordering={self.ordering!r}: use one of {', '.join(map(repr, ORDERINGS))}")
        if self.ordering == "group" and self.spread != 1:
            raise ConfigError(f"ordering='group' needs spread=1 (spread={self.spread}): a group's "
                              "messages and their redeliveries must share one partition; a spread "
                              "only grows, so order a new queue (never spread) instead")
        if self.ordering == "group" and self.dispatch == "partition":
            raise ConfigError("ordering='group' needs dispatch='shared': the dispatcher keeps the order")
        if self.dead_letter_head not in DEAD_LETTER_HEAD_POLICIES:
            raise ConfigError(f"dead_letter_head={self.dead_letter_head!r}: use one of "
                              f"{', '.join(map(repr, DEAD_LETTER_HEAD_POLICIES))}")
        if self.dedup_window_s is None:
            raise ConfigError(f"dedup_window_s=None: give seconds from 1 to {MAX_DEDUP_WINDOW_S:g} "
                              f"(default {DEFAULT_DEDUP_WINDOW_S:g})")
        _check_number("dedup_window_s", self.dedup_window_s, 1.0, MAX_DEDUP_WINDOW_S)
        # The tracker's own fields: read from a topic anyone may write, so checked too (a
        # dispatch_since_ms of "soon" failed every dispatch round of the tracker).
        if not isinstance(self.handover_pending, bool):
            raise ConfigError(f"handover_pending={self.handover_pending!r} must be True or False")
        for name in ("dispatch_since_ms", "updated_at_ms"):
            if not int_in(getattr(self, name), 0, I64_MAX):
                raise ConfigError(f"{name}={getattr(self, name)!r} must be milliseconds from 0 to 2**63-1")
        for name in ("purged_before", "partition_starts", "handover"):
            _check_offsets(name, getattr(self, name))

    # -- resolved values ------------------------------------------------------

    def visibility_s(self, settings: Settings) -> float:
        return settings.visibility_timeout_s if self.visibility_timeout_s is None else self.visibility_timeout_s

    def processing_s(self, settings: Settings) -> float:
        """Longest time a consumer keeps a message alive in user code (>= visibility).

        Unset: ``KMQ_MAX_PROCESSING_S`` (5 min by default), so a slow handler is not
        redelivered while it runs; the visibility timeout only detects a dead consumer.
        """
        vis = self.visibility_s(settings)
        wanted = settings.max_processing_s if self.max_processing_s is None else self.max_processing_s
        return max(vis, wanted)

    def deliveries(self, settings: Settings) -> int:
        return settings.max_deliveries if self.max_deliveries is None else self.max_deliveries

    def dispatch_mode(self, settings: Settings) -> str:
        """"shared" or "partition": this queue's setting, else the deployment's default."""
        return self.dispatch or settings.dispatch

    def group_id(self, settings: Settings, queue: str) -> str:
        """The consumer group of the queue's partition mode.

        ``<prefix><queue>``; after a switch of mode, a group of its own per switch
        (``<prefix><queue>@<switch time ms>``): it starts where the dispatcher stopped
        (``handover``), and no member of a group from before the switch (one that hung,
        or left mid-join) can hold its partitions or its rebalances up.
        """
        base = settings.group_id(queue)
        return f"{base}@{self.dispatch_since_ms}" if self.dispatch_since_ms else base

    # -- codec ----------------------------------------------------------------

    def encode(self) -> bytes:
        d = asdict(self)
        d["backoff"] = self.backoff.to_dict()
        d["purged_before"] = {str(p): o for p, o in self.purged_before.items()}
        d["partition_starts"] = {str(p): o for p, o in self.partition_starts.items()}
        d["handover"] = {str(p): o for p, o in self.handover.items()}
        return json.dumps({"v": CONFIG_VERSION, **d}, sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes) -> "QueueConfig":
        d = json.loads(data)
        if d.pop("v", None) != CONFIG_VERSION:
            raise ValueError("unsupported queue config version")
        known = {f.name for f in fields(cls)}
        d = {k: v for k, v in d.items() if k in known}
        for k in SECONDS_FIELDS:  # 600 given is 600.0 read: one type in every view (an audit)
            if type(d.get(k)) is int:
                d[k] = float(d[k])
        d["backoff"] = Backoff.from_dict(d.get("backoff") or {})
        d["purged_before"] = {int(p): int(o) for p, o in (d.get("purged_before") or {}).items()}
        d["partition_starts"] = {int(p): int(o) for p, o in (d.get("partition_starts") or {}).items()}
        d["handover"] = {int(p): int(o) for p, o in (d.get("handover") or {}).items()}
        return cls(**d)

    def spread_to(self, spread: int, starts: dict[int, int]) -> "QueueConfig":
        """A copy spread over ``spread`` partitions; ``starts``: where the added ones begin."""
        check_spread(spread)  # a number before it is compared ("4" < 1 was a TypeError)
        if spread < self.spread:
            raise ConfigError(
                f"spread={spread} is below the current {self.spread}: a spread only grows "
                "(messages already on a partition must stay reachable)")
        return replace(self, spread=spread, partition_starts={**self.partition_starts, **starts},
                       updated_at_ms=int(time.time() * 1000))

    def purged(self, before: dict[int, int]) -> "QueueConfig":
        """A copy whose records below ``before`` (partition -> offset) are purged."""
        merged = {**self.purged_before}
        for p, off in before.items():
            merged[p] = max(off, merged.get(p, 0))
        return replace(self, purged_before=merged, updated_at_ms=int(time.time() * 1000))

    def switched(self, settings: Settings, before: "QueueConfig") -> "QueueConfig":
        """This config, marked as a mode change from ``before`` if its effective mode differs.

        To partition mode, group consumers wait for the tracker's handover (where its
        dispatcher stopped); to shared mode, the dispatcher waits a grace period for the
        group's members to see the change (agents/dispatch/modes.py SWITCH_GRACE_MS).
        """
        old, new = before.dispatch_mode(settings), self.dispatch_mode(settings)
        if old == new:
            return self
        return replace(self, dispatch_since_ms=self.updated_at_ms or int(time.time() * 1000),
                       handover_pending=new == "partition")

    def changed(self, **changes: Any) -> "QueueConfig":
        """A copy with ``changes`` applied and validated; unknown names are an error."""
        known = {f.name for f in fields(self)} - {"updated_at_ms", "purged_before", "partition_starts",
                                                   "handover_pending", "handover",
                                                   "dispatch_since_ms", "tenant_sig"}
        unknown = set(changes) - known
        if unknown:
            raise ConfigError(f"unknown queue setting(s) {', '.join(sorted(unknown))}: "
                              f"use {', '.join(sorted(known))}")
        defaults = {f.name: f.default for f in fields(self)}
        for name in ("ordering", "dead_letter_head", "dedup_window_s"):  # None: the default
            if name in changes and changes[name] is None:
                changes[name] = defaults[name]
        return replace(self, **changes, updated_at_ms=int(time.time() * 1000))


def _check_number(name: str, value: Any, low: float, high: float) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ConfigError(f"{name}={value!r} must be a number of seconds from {low:g} to {high:g}")


def check_spread(spread: Any) -> None:
    if isinstance(spread, bool) or not isinstance(spread, int) or not 1 <= spread <= MAX_SPREAD:
        raise ConfigError(f"spread={spread!r} must be a whole number from 1 to {MAX_SPREAD}")


DEFAULT_CONFIG = QueueConfig()  # shared: frozen, and never modified in place
