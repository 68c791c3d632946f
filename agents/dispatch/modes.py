"""A shared queue's mode switches, as the dispatcher sees them (docs/shared-queues.md,
"Changing the mode at run time"): when a queue switched to shared mode may be dispatched,
and where a queue switched back to partition mode hands over to its consumer group.

Decisions only, time passed in: the dispatcher carries them out (agents/dispatch/dispatcher.py).
"""

from __future__ import annotations

from kmq.queue_config import QueueConfig
from kmq.settings import Settings

# A queue switched to shared mode is dispatched only this long after the switch, so every
# live member of its consumer group has seen the change and stopped fetching (consumers
# look at their queue's settings every 0.5 s and act on the next fetch, within 0.5 s).
SWITCH_GRACE_MS = 3000


def dispatchable(cfg: QueueConfig, settings: Settings, now_ms: float) -> bool:
    """The queue is shared, and any switch to shared mode is older than the grace."""
    if cfg.dispatch_mode(settings) != "shared":
        return False
    return not (cfg.dispatch_since_ms and now_ms - cfg.dispatch_since_ms < SWITCH_GRACE_MS)


def awaits_handover(cfg: QueueConfig, settings: Settings) -> bool:
    """Switched to partition mode, and where dispatching stopped is not recorded yet."""
    return cfg.handover_pending and cfg.dispatch_mode(settings) == "partition"


def handed_over(cfg: QueueConfig, cursors: dict[tuple[str, int], int], queue: str,
                partitions: list[int], now_ms: int) -> QueueConfig:
    """The queue's settings with ``handover``: per partition, the cursor where its group starts."""
    handover = {p: cursors[(queue, p)] for p in partitions if (queue, p) in cursors}
    return QueueConfig(**{**cfg.__dict__, "handover": {**cfg.handover, **handover},
                          "handover_pending": False, "updated_at_ms": now_ms})
