"""A Spark data source over Kafka topics, with the official Kafka source's schema and options.

Spark's own Kafka source needs a jar these machines often cannot fetch; this
one is a Python data source (PySpark 4, no jars) registered as ``kmq_kafka``
(Spark refuses to register a Python source named ``kafka``, and a JVM source
of that name would win anyway). :func:`kmq.spark.session.kafka_reader` picks
the official ``kafka`` format when its jar is on the classpath (unless the
read needs librdkafka-only client settings), so jobs switch with no change.

Flow of a read: the driver parses the options (:mod:`kmq.spark.options`),
plans one offset range per partition with true end offsets and splits big
ones (:mod:`kmq.spark.offsets`); each Spark task reads its range into Arrow
batches (:mod:`kmq.spark.fetch`). The reader is pickled before
``partitions()`` runs, so everything a task needs travels in its partition.
"""

from __future__ import annotations

from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType,
                               StructField, StructType, TimestampType)

from kmq.spark.offsets import OffsetRange

FORMAT = "kmq_kafka"

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()),
                                     StructField("value", BinaryType())]))


def kafka_schema(include_headers: bool = False) -> StructType:
    """The columns of Spark's official Kafka source (batch and streaming reads)."""
    fields = [StructField("key", BinaryType()), StructField("value", BinaryType()),
              StructField("topic", StringType()), StructField("partition", IntegerType()),
              StructField("offset", LongType()), StructField("timestamp", TimestampType()),
              StructField("timestampType", IntegerType())]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


class RangePartition(InputPartition):
    """One Spark task: offsets ``[start, end)`` of one topic partition."""

    def __init__(self, r: OffsetRange) -> None:
        super().__init__(r)
        self.range = r


class KafkaReader(DataSourceReader):
    """Plans offset ranges on the driver; reads one range per task."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        from kmq.spark.options import parse

        self.options = parse(options)
        # Spark checks returned batches against its own Arrow conversion of the schema.
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")

    def partitions(self) -> list[RangePartition]:
        from kmq.spark.offsets import plan, split

        ranges = split(plan(self.options), self.options.min_partitions,
                       self.options.max_records_per_partition)
        return [RangePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator:
        from kmq.spark.fetch import read_range
        from kmq.spark.offsets import consumer_config

        r = getattr(partition, "range", None)
        if r is None:  # nothing to read: Spark passes a placeholder partition
            return
        o = self.options
        yield from read_range(consumer_config(o), r, self.arrow_schema,
                              include_headers=o.include_headers,
                              fail_on_data_loss=o.fail_on_data_loss,
                              poll_timeout_ms=o.poll_timeout_ms)


class KafkaSource(DataSource):
    """``spark.read.format("kmq_kafka")``: batch reads of Kafka topics."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        from kmq.spark.options import parse

        return kafka_schema(parse(self.options).include_headers)

    def reader(self, schema: StructType) -> KafkaReader:
        return KafkaReader(dict(self.options.items()), schema)

    def streamReader(self, schema: StructType):
        # Spark's default is a NOT_IMPLEMENTED error naming neither the source nor the fix.
        from kmq.errors import ConfigError

        raise ConfigError(f"format {FORMAT!r} does not offer streaming reads: use spark.read "
                          "(batch reads with startingOffsets/endingOffsets)")

    simpleStreamReader = streamReader
