"""Spark batch reads of kmq's topics (optional extra: ``pip install 'kmq[spark]'``).

- :mod:`kmq.spark.source`: a Kafka data source (``format("kmq_kafka")``) with
  the official Kafka source's schema and options, needing no jars.
- :mod:`kmq.spark.session`: a local session and :func:`kafka_reader`, which
  uses the official ``kafka`` format instead when its jar is present.
- :mod:`kmq.spark.changelog`: decode changelogs, latest value per key,
  table snapshots to Parquet, the tracker's in-flight state.
- :mod:`kmq.spark.events`: markers as per-offset events; queue and
  dead-letter headers as columns.
- :mod:`kmq.spark.deliveries`: deliveries and their outcomes, decided as the tracker does.
- :mod:`kmq.spark.jobs`: the report jobs (also ``kmq spark <job> --out DIR``).

Importing :mod:`kmq` never imports this package. This package imports
pyspark only when one of the names below is used, so ``kmq --help`` (which
lists ``kmq spark``) stays fast and works without the extra.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "FORMAT": "kmq.spark.source", "KafkaSource": "kmq.spark.source",
    "kafka_schema": "kmq.spark.source", "kafka_format": "kmq.spark.session",
    "kafka_reader": "kmq.spark.session", "local_session": "kmq.spark.session",
    "register": "kmq.spark.session",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'kmq.spark' has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)
