"""`kmq spark` without a Spark session: the help lists the jobs without importing pyspark
(the extra is optional), a dead broker address fails fast, errors are one line."""

import os
import socket
import subprocess
import sys


def test_the_cli_lists_spark_jobs_without_importing_pyspark():
    code = ("import sys; from click.testing import CliRunner; from kmq.cli import main; "
            "out = CliRunner().invoke(main, ['spark', '--help']).output; "
            "print('percentiles' in out and 'never-acked' in out, "
            "sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'pyarrow', 'pandas')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd="/")
    assert out.stdout.strip() == "True []"


def test_a_job_against_an_address_with_no_broker_is_one_error_line_within_seconds():
    # A bound socket that does not listen refuses connections, and no one else can take it.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        address = "%s:%d" % closed.getsockname()
        code = ("import atexit, sys; atexit.register(lambda: print(sorted(m for m in sys.modules "
                "if m.split('.')[0] == 'pyspark'))); from kmq.cli import main; main()")
        env = {k: v for k, v in os.environ.items() if not k.startswith("KMQ_")}
        out = subprocess.run([sys.executable, "-c", code, "spark", "dead-letters",
                              "--bootstrap-servers", address, "--connect-timeout-s", "1",
                              "--out", "/nonexistent/kmq-spark-out"],
                             capture_output=True, text=True, timeout=60, cwd="/", env=env)
    assert out.returncode == 1, out
    (line,) = out.stderr.splitlines()  # no librdkafka log, no Spark traceback
    assert line.startswith(f"error: no Kafka broker answered at {address} (tried for "), line
    assert "--bootstrap-servers" in line
    # Neither Spark nor its data source started: the broker check came first (the data
    # source's own wait took 1m42s and printed 1,300 lines).
    assert out.stdout.strip() == "[]", "pyspark was imported before the broker was checked"


# Texts of exceptions a real local Spark raised for errors in the data source.
PLANNING = """[PYTHON_DATA_SOURCE_ERROR] Failed to generate Python data source read partitions: \
Traceback (most recent call last):
  File "/work/main/kmq/spark/source.py", line 67, in partitions
    ranges = split(plan(self.options), self.options.min_partitions,
                   ^^^^^^^^^^^^^^^^^^
  File "/work/main/kmq/spark/offsets.py", line 95, in discover
    raise ConfigError(f"option subscribe names topics that do not exist: {', '.join(absent)}")
kmq.errors.ConfigError: option subscribe names topics that do not exist: nope
 SQLSTATE: 38000"""
READING = """An exception was thrown from the Python worker:
Traceback (most recent call last):
  File "/work/main/kmq/spark/fetch.py", line 52, in read_range
    raise ConfigError("x")
confluent_kafka.error.KafkaException: KafkaError{code=_TRANSPORT}

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/work/main/kmq/spark/fetch.py", line 80, in range_records
    raise BrokerUnavailableError(
kmq.errors.BrokerUnavailableError: t/0: no record for 5000 ms at offset 3 \
(option kafkaConsumer.pollTimeoutMs)"""
JVM = """An error occurred while calling o51.parquet.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 1.0 failed
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/work/main/kmq/spark/offsets.py", line 155, in resolve
kmq.spark.offsets.DataLossError: t/0: endingOffsets 99 is past the end 40; set \
failOnDataLoss=false to stop at 40

\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:1)"""


def test_the_kmq_error_inside_a_spark_exception_is_taken_out_of_it():
    from kmq.spark.cli import kmq_error_message

    assert kmq_error_message(PLANNING) == "option subscribe names topics that do not exist: nope"
    assert kmq_error_message(READING) == ("t/0: no record for 5000 ms at offset 3 "
                                          "(option kafkaConsumer.pollTimeoutMs)")
    assert kmq_error_message(JVM) == ("t/0: endingOffsets 99 is past the end 40; "
                                      "set failOnDataLoss=false to stop at 40")
    assert kmq_error_message("kmq.errors.NotAnError: x\nValueError: bad") is None


def test_other_spark_failures_are_one_line_and_other_exceptions_keep_their_traceback():
    from kmq.spark.cli import spark_error_message

    captured = type("PythonException", (Exception,),
                    {"__module__": "pyspark.errors.exceptions.captured"})
    worker = ("An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
              '  File "x.py", line 1, in f\n    unpack()\nstruct.error: unpack requires 21 bytes')
    assert spark_error_message(captured(worker)) == \
        "the Spark job failed: struct.error: unpack requires 21 bytes"
    assert spark_error_message(captured(PLANNING)) == \
        "option subscribe names topics that do not exist: nope"
    assert spark_error_message(ValueError(PLANNING)) is None
