"""One local Spark session (local[2]) for the Spark tests, and helpers to write topics.

Spark tests read the session's embedded broker through kmq's Kafka source;
they are slow (a JVM and Python workers start) but run in CI.
"""

from __future__ import annotations

import uuid
from typing import Iterable

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


@pytest.fixture(scope="session")
def spark(artifacts):
    from kmq.spark.session import local_session

    session = local_session("local[2]", "kmq-tests", conf={
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.warehouse.dir": str(artifacts / "spark-warehouse"),
        "spark.driver.memory": "1g",
    })
    yield session
    session.stop()


@pytest.fixture(scope="session")
def make_topic(broker):
    """Create a topic with a unique name: ``make_topic("base", partitions=3)``."""

    def make(base: str, partitions: int = 1, config: dict | None = None) -> str:
        name = f"{base}-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(15)
        wait_visible(admin, name, partitions)
        return name

    return make


def wait_visible(admin: AdminClient, topic: str, partitions: int) -> None:
    from tests.conftest import wait_for

    wait_for(lambda: len(getattr(admin.list_topics(topic, timeout=5).topics.get(topic), "partitions",
                                 {})) == partitions, 15, what=f"topic {topic} visible")


def produce(bootstrap: str, topic: str, records: Iterable[dict], **conf) -> None:
    """Write records (dicts of produce() arguments: value, key, partition, timestamp, headers)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    for r in records:
        p.produce(topic, **r)
    assert p.flush(30) == 0, "records not delivered"
