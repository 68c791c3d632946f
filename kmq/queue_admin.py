"""Queue administration: what a :class:`kmq.Client` does to queues rather than send to them.

Queue settings (``configure_queue``, spreading a queue over more partitions),
tenants and their tokens, dead letters (list, redrive, purge) and queue purges,
each checked against the caller's token first. It stands apart from the send
path because it is a different job with different callers (operators and the
``kmq`` command, not producers): :class:`QueueAdmin` is mixed into
:class:`kmq.Client`, and uses its ``settings``, its live queue-settings view
(``queue_configs()``), ``partition_count()`` and, for a purge, its producer.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import replace
from typing import Any

from kmq.backoff import Backoff
from kmq.ops import deadletters
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.ops.deadletters import DeadLetter
from kmq.kafka.offsets import true_end_offsets
from kmq.errors import BrokerUnavailableError, ConfigError
from kmq.protocol.placement import markers_partition, queue_partitions, validate_queue_name
from kmq.queue_config import QueueConfig, check_spread
from kmq.ops.control_sig import sign_queue_tenant, sign_tenant
from kmq.ops.queues_topic import QueueConfigs
from kmq.ops.config_update import latest_config, write_reconciled
from kmq.ops.queues_writes import delete_tenant, write_tenant
from kmq.ops.tenancy import (Tenant, hash_token, new_token, require_admin, require_queue_access,
                             validate_tenant_name)

log = logging.getLogger("kmq.queue_config")

# A change to a queue switched to partition mode waits for the tracker's handover, at most
# this long: each record replaces the queue's whole configuration, and the handover, built
# from the switch's record, wrote away a change made in between (docs/shared-queues.md).
HANDOVER_WAIT_S = 10.0


class QueueAdmin:
    """Queue settings, tenants, dead letters and purges; part of :class:`kmq.Client`."""

    # -- queue settings ------------------------------------------------------------

    def _authorize(self, queue: str, cfg: QueueConfig | None = None) -> QueueConfig:
        """The queue's config (``cfg``, else as this client's view has it), if this client's
        token may administer it (auth on)."""
        cfg = self.queue_configs().get(queue) if cfg is None else cfg
        require_queue_access(self.queue_configs().caller(self.settings.token or None), queue, cfg.tenant)
        return cfg

    def _spread(self, queue: str, cfg: QueueConfig, spread: int) -> QueueConfig:
        """Grow the queue onto more partitions, recording where it begins on the new ones.

        Producers write to a new partition only after they see this config,
        which is written after the ends are measured: no message of the queue
        sits below its start there, and consumers need not read that partition
        from its beginning.
        """
        probe = cfg.spread_to(spread, {})  # validates before anything is measured
        n = self.partition_count(self.settings.queue_topic)
        if probe.spread > n:  # it would be read as n: a queue lives on distinct partitions
            raise ConfigError(
                f"spread={spread} is above the {n} partitions of topic {self.settings.queue_topic} "
                f"(KMQ_QUEUE_PARTITIONS): give at most {n}; more partitions need new topics "
                "(docs/scaling.md, When one machine is not enough)")
        added = sorted(set(queue_partitions(queue, n, probe.spread))
                       - set(queue_partitions(queue, n, cfg.spread)))
        starts = true_end_offsets(self.settings, self.settings.queue_topic, added) if added else {}
        return cfg.spread_to(spread, starts)

    def create_tenant(self, name: str) -> str:
        """Register tenant ``name``; returns its new token (shown once). Admin only.

        An existing name is an error (its token would be replaced silently): use
        :meth:`rotate_tenant_token` for a new token, :meth:`revoke_tenant` to remove it.
        """
        name = validate_tenant_name(name)
        configs = self.queue_configs()
        require_admin(configs.caller(self.settings.token or None), "creating a tenant")
        if name in configs.tenants():
            raise ConfigError(f"tenant {name!r} exists: use rotate_tenant_token({name!r}) for a new token "
                              f"or revoke_tenant({name!r}) to remove it")
        return self._issue_token(configs, name)

    def rotate_tenant_token(self, name: str) -> str:
        """A new token for existing tenant ``name`` (the old one stops working). Admin only."""
        name = validate_tenant_name(name)
        configs = self.queue_configs()
        require_admin(configs.caller(self.settings.token or None), "rotating a tenant's token")
        if name not in configs.tenants():
            raise ConfigError(f"no tenant {name!r}: create it with create_tenant({name!r})")
        return self._issue_token(configs, name)

    def revoke_tenant(self, name: str) -> None:
        """Remove tenant ``name``: its token stops working (its queues stay assigned to the
        name, reachable by the admin). Admin only."""
        name = validate_tenant_name(name)
        configs = self.queue_configs()
        require_admin(configs.caller(self.settings.token or None), "revoking a tenant")
        if name not in configs.tenants():
            raise ConfigError(f"no tenant {name!r} to revoke")
        delete_tenant(self.settings, name)
        configs.drop_tenant(name)

    def _issue_token(self, configs: QueueConfigs, name: str) -> str:
        token = new_token()
        digest = hash_token(token)
        # Signed with the admin token this call was allowed with: trackers count nothing else.
        tenant = Tenant(name, digest, sign_tenant(self.settings.token, name, digest) if self.settings.token else "")
        write_tenant(self.settings, tenant)
        configs.put_tenant(tenant)
        return token

    def configure_queue(self, queue: str, **changes: Any) -> QueueConfig:
        """Change settings of ``queue``; they apply to later deliveries, without restarts.

        Settings: ``visibility_timeout_s``, ``max_deliveries``, ``max_processing_s``,
        ``backoff`` (a :class:`kmq.Backoff`), ``dead_letter`` (bool), ``spread``,
        ``dispatch`` ("shared" or "partition"), ``tenant`` (admin only), ``ordering``
        ("none" or "group"), ``dead_letter_head`` ("continue" or "hold"),
        ``dedup_window_s`` (docs/ordering.md). ``None`` restores the global default (not for
        ``spread``, which only grows: refused). Validated
        before anything is written. A change to a queue whose switch to partition mode the
        tracker has not handed over yet waits for that first (at most ``HANDOVER_WAIT_S``).

        Made on the queue's latest settings, and kept when another client or the tracker
        writes the queue's settings at the same time (written again on top of theirs:
        :mod:`kmq.ops.config_update`); a setting both change is the last writer's. Returns
        the settings the queue has after it, as far as this call read them back.
        """
        queue = validate_queue_name(queue)
        configs = self.queue_configs()
        # On the latest record, not on what this view had read (it wrote away a change
        # another client made a moment before: an audit, 4 of 4 tries).
        cfg, since = latest_config(self.settings, configs, queue)
        self._authorize(queue, cfg)
        if cfg.handover_pending:
            self._await_handover(queue, cfg)
            cfg, since = latest_config(self.settings, configs, queue)
        caller = configs.caller(self.settings.token or None)
        if "tenant" in changes and changes["tenant"] != cfg.tenant:
            require_admin(caller, "changing a queue's tenant")
            self._require_tenant(configs, changes["tenant"])
        if "spread" in changes and changes["spread"] is None:
            # A spread only grows: no default to go back to (it was ignored, silently).
            raise ConfigError(f"spread=None cannot restore a default: {queue!r} is spread over {cfg.spread} "
                              f"partition(s) and a spread only grows; leave spread out to keep it, or give "
                              f"a number >= {cfg.spread}")
        spread = changes.pop("spread", None)
        if spread is not None:
            check_spread(spread)  # also when it equals the current one: True and 1.0 == 1 passed
        # None restores a setting's default, also of those without a KMQ_* one.
        for name, default in (("dead_letter", True), ("backoff", Backoff())):
            if name in changes and changes[name] is None:
                changes[name] = default
        new = cfg.changed(**changes).switched(self.settings, cfg)
        if "tenant" in changes and caller.admin:
            # The admin signs the assignment (kept as is by later changes of other settings):
            # trackers grant a tenant only queues the admin gave it.
            new = replace(new, tenant_sig=sign_queue_tenant(self.settings.token, queue, new.tenant)
                          if new.tenant and self.settings.token else "")
        if new.ordering == "group" and new.dispatch_mode(self.settings) != "shared":
            raise ConfigError(f"ordering='group' on {queue!r} needs the shared dispatch mode "
                              f"(KMQ_DISPATCH={self.settings.dispatch!r}): also pass dispatch='shared'")
        vis_s = new.visibility_s(self.settings)
        if ({"max_processing_s", "visibility_timeout_s"} & set(changes)
                and new.max_processing_s is not None and new.max_processing_s < vis_s):
            # As a consumer refuses the pair: extend() is bounded by max_processing_s.
            raise ConfigError(f"max_processing_s={new.max_processing_s:g} is below visibility_timeout_s="
                              f"{vis_s:g} of {queue!r}: give max_processing_s >= visibility_timeout_s")
        if spread is not None and spread != cfg.spread:
            new = self._spread(queue, new, spread)
        return write_reconciled(self.settings, configs, queue, cfg, new, since)

    @staticmethod
    def _require_tenant(configs: QueueConfigs, name: Any) -> None:
        """A queue goes only to a tenant that exists (a misspelt name left it reachable by
        nobody's token but the admin's, silently)."""
        if name is None:
            return
        name = validate_tenant_name(name)  # what is wrong with a name, before looking for it
        if name in configs.tenants():
            return
        configs.catch_up()  # created a moment ago by another process?
        if name not in configs.tenants():
            known = ", ".join(sorted(configs.tenants())) or "none"
            raise ConfigError(f"tenant={name!r} is no tenant (tenants: {known}): create it first with "
                              f"create_tenant({name!r})")

    def _await_handover(self, queue: str, pending: QueueConfig) -> QueueConfig:
        """The queue's config once the tracker recorded the handover ``pending`` waits for (or
        anything newer), else as it is after ``HANDOVER_WAIT_S``."""
        configs = self.queue_configs()
        deadline = time.monotonic() + HANDOVER_WAIT_S
        while time.monotonic() < deadline:
            cfg = configs.get(queue)
            if not cfg.handover_pending or cfg.dispatch_since_ms != pending.dispatch_since_ms:
                return cfg
            time.sleep(0.02)
        log.warning("queue %s: no handover from a tracker within %g s (is a tracker worker "
                    "running?); changing its settings anyway", queue, HANDOVER_WAIT_S)
        return configs.get(queue)

    # -- dead letters and purges --------------------------------------------------

    def dead_letters(self, queue: str, **filters: Any) -> list[DeadLetter]:
        """The queue's dead letters, oldest first; see :func:`kmq.ops.deadletters.list_dead_letters`."""
        deadletters.check_options(f"client.dead_letters({queue!r})", filters, deadletters.list_dead_letters)
        self._authorize(validate_queue_name(queue))
        return deadletters.list_dead_letters(self.settings, queue, **filters)

    def redrive(self, queue: str, **options: Any) -> deadletters.RedriveResult:
        """Move dead letters back to ``queue`` exactly once; see :func:`kmq.ops.deadletters.redrive`."""
        deadletters.check_options(f"client.redrive({queue!r})", options, deadletters.redrive)
        self._authorize(validate_queue_name(queue))
        return deadletters.redrive(self.settings, queue, **options)

    def purge_dead_letters(self, queue: str) -> int:
        """Drop the queue's dead letters; returns how many."""
        self._authorize(validate_queue_name(queue))
        return deadletters.purge_dead_letters(self.settings, queue)

    def purge(self, queue: str, timeout_s: float = 30.0) -> dict[int, int]:
        """Drop every message of ``queue``: enqueued, in flight and scheduled (SQS PurgeQueue).

        The tracker handles the purge in marker order: it forgets the queue's
        in-flight and scheduled messages, then records the queue topic's end
        offsets as the purge point (so nothing it republished before is
        missed); consumers skip the queue's records below it. Returns the
        purge point (partition -> offset) once this client sees it, and raises if it does not
        within ``timeout_s``.
        """
        queue = validate_queue_name(queue)
        # Checked before the purge is sent: a bad timeout was a TypeError after it.
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) \
                or not (math.isfinite(timeout_s) and timeout_s > 0):
            raise ConfigError(f"timeout_s={timeout_s!r} must be a finite number of seconds above 0 "
                              "(how long to wait for the tracker's confirmation)")
        configs = self.queue_configs()
        before = self._authorize(queue).updated_at_ms
        mp = markers_partition(queue, self.partition_count(self.settings.markers_topic))
        producer = self._get_producer()
        self._produce(producer, self.settings.markers_topic, marker_codec.encode([M.Purge(queue)]), queue, mp, None)
        self.flush()
        deadline = time.monotonic() + timeout_s
        while configs.get(queue).updated_at_ms == before:
            if time.monotonic() > deadline:
                raise BrokerUnavailableError(
                    f"the tracker did not confirm the purge of {queue!r} within {timeout_s:g}s: "
                    "is a tracker worker running (faust -A app worker)?")
            time.sleep(0.05)
        # This client's consumers take the purge point now, not at their next settings check
        # (every 0.5 s): an audit saw messages read ahead below it handed out after purge()
        # returned (4 of 6 runs, shared; 1 of 7, partition).
        for consumer in list(getattr(self, "_consumers", ())):
            if consumer.queue == queue:
                consumer.follow_config_now()
        return dict(configs.get(queue).purged_before)
