"""The physical topics as Faust sees them (bytes in, bytes out: kmq has its own codecs)."""

from __future__ import annotations

from app import app, settings

markers_topic = app.topic(
    settings.markers_topic,
    key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw",
    partitions=settings.markers_partitions, internal=False,
)
