"""Spark batch reads of kmq's topics (optional extra: ``pip install 'kmq[spark]'``).

- :mod:`kmq.spark.source`: a Kafka data source (``format("kmq_kafka")``) with
  the official Kafka source's schema and options, needing no jars.
- :mod:`kmq.spark.session`: a local session and :func:`kafka_reader`, which
  uses the official ``kafka`` format instead when its jar is present.
- :mod:`kmq.spark.changelog`: decode changelogs, latest value per key,
  table snapshots to Parquet, the tracker's in-flight state.
- :mod:`kmq.spark.jobs`: report jobs over markers, queue and dead-letter topics
  (also ``kmq spark <job> --out DIR``).

Importing :mod:`kmq` never imports this package (nor pyspark).
"""

from kmq.spark.session import kafka_format, kafka_reader, local_session, register
from kmq.spark.source import FORMAT, KafkaSource, kafka_schema

__all__ = ["FORMAT", "KafkaSource", "kafka_schema", "kafka_format", "kafka_reader",
           "local_session", "register"]
