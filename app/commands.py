"""Worker-side commands: ``faust -A app create-topics``."""

from __future__ import annotations

from app import app, settings
from kmq.errors import KmqError
from kmq.kafka.admin import ensure_topics


@app.command()
async def create_topics(self) -> None:
    """Create kmq's topics: queue, markers, dead letters, queue settings, deliveries (idempotent)."""
    try:
        created = ensure_topics(settings)
    except KmqError as exc:  # a settings mismatch or no broker: one line, exit status 1
        raise SystemExit(f"error: {exc}") from None
    t = settings.topics
    for name, parts in ((t.queue, settings.queue_partitions), (t.markers, settings.markers_partitions),
                        (t.dlq, settings.dlq_partitions), (t.queues, settings.queues_partitions)):
        state = "created" if name in created else "exists"
        self.say(f"{name}: {parts} partitions ({state})")
    lanes = settings.lane_layout
    state = "created" if set(lanes.names()) <= set(created) else "exists"
    self.say(f"{', '.join(lanes.names()[:2])}{', ...' if lanes.topics > 2 else ''}: {lanes.topics} "
             f"deliveries topics of {lanes.per_topic} partitions, {lanes.count} lanes ({state})")
