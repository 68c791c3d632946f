"""The tracker's runtime: the objects a worker builds once and every agent and view shares.

One :class:`TrackerRuntime` per worker process, built here and nowhere else, and
registered on the app as a mode Service (``app.service``): what this worker owns of
each markers partition (:class:`~agents.partitions.OwnedPartitions`), the
:class:`~agents.redeliver.Redeliverer` (and through it the queue settings view),
the :class:`~agents.dispatch.dispatcher.Dispatcher` of shared queues, and the markers agent's
:class:`~agents.gap_reader.GapReader`. Agents, timers and web
views reach it through :func:`runtime`, never through another module's globals
(tests/unit/test_import_boundaries.py). It lives in ``agents/`` because it builds
agents' classes; ``app/`` comes before ``agents/`` in the import order.

Its lifecycle is the worker's:

- **start** (after table recovery, with the app's other services): connect the
  redeliverer's clients and read the queue settings, then start the dispatcher thread.
- **revocation** (``app.on_partitions_revoked``): suspend the tick timer's view and
  wait for :meth:`Dispatcher.quiesce` in an executor before returning, so a successor's
  BEGIN lands after every ACQUIRE of ours (docs/shared-queues.md, "Dispatcher handover").
- **assignment** (``app.on_partitions_assigned``): resume the dispatcher; owned
  partitions rebuild their gauges and re-read their applied offsets from the recovered
  table (another worker may have changed a partition while it was not ours).
- **shutdown** (``app.on_before_shutdown``, before the consumer leaves the group): the
  service stops, and stopping quiesces and stops the dispatcher.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from mode import Service

from agents.dispatch.dispatcher import Dispatcher
from agents.gap_reader import GapReader
from agents.partitions import OwnedPartitions
from agents.redeliver import Redeliverer
from app import app, membership, settings
from kmq.queue_config import QueueConfig
from kmq.ops.queues_topic import QueueConfigs

log = logging.getLogger("kmq.tracker.runtime")


class TrackerRuntime(Service):
    """A worker's owned partitions, redeliverer and dispatcher, and their start and stop."""

    def __init__(self, owned: OwnedPartitions, redeliverer: Redeliverer, dispatcher: Dispatcher,
                 gap_reader: GapReader | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.owned = owned
        self.redeliverer = redeliverer
        self.dispatcher = dispatcher
        self.gap_reader = gap_reader  # offsets the markers agent was not handed, read from the log

    def connect(self, faust_app: Any) -> TrackerRuntime:
        """Register with ``faust_app``: started with it, told of rebalances and shutdown."""
        faust_app.on_partitions_revoked.connect(self.on_partitions_revoked)
        faust_app.on_partitions_assigned.connect(self.on_partitions_assigned)
        faust_app.on_before_shutdown.connect(self.on_before_shutdown)
        faust_app.service(self)
        return self

    # -- queue settings ---------------------------------------------------------------------

    def configs(self) -> QueueConfigs:
        """The queue settings view, started on first use (blocking: not on the event loop)."""
        return self.redeliverer.configs()

    def configs_if_started(self) -> QueueConfigs | None:
        """The queue settings view if something started it already, else None (never blocks)."""
        return self.redeliverer.configs_if_started()

    def config(self, queue: str) -> QueueConfig:
        """One queue's settings (starts the view on first use)."""
        return self.redeliverer.config(queue)

    # -- lifecycle ----------------------------------------------------------------------------

    async def on_start(self) -> None:
        # In the background, as an app task would: the worker need not wait for it to be ready.
        self.add_future(self._warm_up())

    async def _warm_up(self) -> None:
        """Connect the redeliverer's clients at start, not at the first deadline (~1.5 s)."""
        await self.redeliverer.warm_up()
        self.dispatcher.start()

    async def on_stop(self) -> None:
        # Every ACQUIRE in the log and nothing more written (stop() runs once: at shutdown).
        await asyncio.get_running_loop().run_in_executor(None, self.dispatcher.quiesce)
        self.dispatcher.stop()

    async def on_partitions_revoked(self, sender: Any, *args: Any, **kwargs: Any) -> None:
        """Before this worker rejoins the group, so before another worker can take a partition
        over and begin there: every ACQUIRE of ours is in the log by then (agents/dispatch/dispatcher.py)."""
        self.dispatcher.suspend()
        if not await asyncio.get_running_loop().run_in_executor(None, self.dispatcher.quiesce):
            log.warning("the dispatcher did not stop in time; its membership lease holds back its deliveries")

    async def on_partitions_assigned(self, sender: Any, *args: Any, **kwargs: Any) -> None:
        """The group assigned partitions anew."""
        self.dispatcher.resume()  # the tick timer's assignment is the new one now
        self.owned.assigned_anew()

    async def on_before_shutdown(self, sender: Any, *args: Any, **kwargs: Any) -> None:
        """Faust stops the consumer, and so leaves the group, only after this signal."""
        await self.stop()


def _build() -> TrackerRuntime:
    """The one place the tracker's runtime objects are constructed."""
    # With auth on, tenant records and queues' tenants count only when the admin signed them.
    control_token = settings.admin_token if settings.auth_on else None
    redeliverer = Redeliverer(settings, configs=lambda: QueueConfigs(settings, follow=True,
                                                                     control_token=control_token))
    dispatcher = Dispatcher(settings, configs=redeliverer.configs,
                            membership=membership.of_group(app.conf.id).valid_until)
    return TrackerRuntime(OwnedPartitions(settings.markers_partitions), redeliverer, dispatcher,
                          GapReader(settings)).connect(app)


_runtime = _build()


def runtime() -> TrackerRuntime:
    """This worker's runtime (agents, timers and web views ask here; nothing else builds one)."""
    return _runtime
