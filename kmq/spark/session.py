"""Getting a SparkSession that can read Kafka, and choosing the Kafka format.

:func:`kafka_reader` is the one place jobs get a ``DataFrameReader`` for
Kafka: the official ``kafka`` format when its connector jar is on the
classpath, else kmq's Python source. Both take the same source options and
produce the same schema, so a job runs unchanged on either. The ``kafka.*``
client options are the exception: kmq's source passes them to librdkafka,
the official one to the Java client, and the security settings' names differ
(:data:`LIBRDKAFKA_ONLY`); a read that carries one uses kmq's source.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from pyspark.sql import DataFrameReader, SparkSession

from kmq.settings import Settings
from kmq.spark.source import FORMAT, KafkaSource

OFFICIAL_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
# Client options of kmq's security settings (kmq.kafka.security) that only librdkafka
# knows: the Java client ignores them (it wants sasl.jaas.config and key/trust stores),
# so the official source would connect without credentials or the CA.
LIBRDKAFKA_ONLY = frozenset({"sasl.username", "sasl.password", "ssl.ca.location",
                             "ssl.certificate.location", "ssl.key.location"})
_LIBRDKAFKA_ONLY_OPTIONS = frozenset(f"kafka.{name}" for name in LIBRDKAFKA_ONLY)


def local_session(master: str = "local[2]", app_name: str = "kmq-spark",
                  conf: dict[str, str] | None = None) -> SparkSession:
    """A SparkSession for local runs (tests, the CLI), bound to 127.0.0.1, with kmq's source.

    Python workers run this interpreter, so they import the same kmq and pyarrow.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "8")
               .config("spark.sql.session.timeZone", "UTC")
               # A Python worker that dies (one planning a kmq read did, once in CI: "exited
               # unexpectedly (crashed)", no traceback) then says where, in the error.
               .config("spark.python.worker.faulthandler.enabled", "true")
               .config("spark.sql.execution.pyspark.udf.faulthandler.enabled", "true"))
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def register(spark: SparkSession) -> None:
    """Make ``spark.read.format("kmq_kafka")`` available in this session."""
    spark.dataSource.register(KafkaSource)


def official_kafka_available(spark: SparkSession) -> bool:
    """Whether Spark's own Kafka connector is on the driver's classpath."""
    jvm = getattr(spark, "_jvm", None) or getattr(spark.sparkContext, "_jvm", None)
    if jvm is None:  # Spark Connect: no JVM handle here; the server decides
        return False
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(OFFICIAL_PROVIDER, False, loader)
        return True
    except Exception:  # py4j wraps ClassNotFoundException
        return False


def kafka_format(spark: SparkSession) -> str:
    """``kafka`` when the official connector is present, else ``kmq_kafka``."""
    if official_kafka_available(spark):
        return "kafka"
    register(spark)
    return FORMAT


def kafka_reader(spark: SparkSession, bootstrap_servers: str | None = None,
                 settings: Settings | None = None, **options: Any) -> DataFrameReader:
    """``spark.read`` for Kafka in the best available format, with ``options`` set.

    ``settings`` (or ``bootstrap_servers``) fill in ``kafka.bootstrap.servers``
    and the security settings; other options are the Kafka source's. A client
    option in :data:`LIBRDKAFKA_ONLY` (SASL credentials, TLS files) makes it
    kmq's source even when the official one is present.
    """
    client = {f"kafka.{k}": str(v) for k, v in
              (settings.client_config() if settings is not None else {}).items()}
    if any(k.lower() in _LIBRDKAFKA_ONLY_OPTIONS for k in [*client, *options]):
        register(spark)
        reader = spark.read.format(FORMAT)
    else:
        reader = spark.read.format(kafka_format(spark))
    for k, v in client.items():
        reader = reader.option(k, v)
    if bootstrap_servers:
        reader = reader.option("kafka.bootstrap.servers", bootstrap_servers)
    for k, v in options.items():
        reader = reader.option(k, v if isinstance(v, str) else _option_text(k, v))
    return reader


def _option_text(name: str, value: Any) -> str:
    if name.lower() == "subscribe" and isinstance(value, (list, tuple)):
        return ",".join(value)  # the source's list form; JSON would name topics '["a"' and ' "b"]'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        import json
        return json.dumps(value)
    return str(value)
