"""The tracker's Faust consumer lengthens its fetch wait while fetches come back empty in vain.

``kmq.kafka.fetch_wait`` says when and why (the embedded broker answers nothing to a
short wait on a partition of many small batches; a markers partition gets one batch
per settlement, CREDIT and START under a trickle). aiokafka reads its fetch wait at
each request, so the wait is raised in place. Each fetch response is looked at per
partition: how far the partition's end (its last stable offset: the consumer reads
committed) lies past what was fetched.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kmq.kafka.fetch_wait import FetchWait
from kmq.kafka.patient_reader import note_raised

log = logging.getLogger("kmq.tracker.fetch_wait")

NAME = "tracker-consumer"  # in /kmq/health's fetch_waits_raised


def install() -> None:
    """Patch aiokafka's fetcher once per process."""
    from aiokafka.consumer.fetcher import READ_COMMITTED, Fetcher
    from aiokafka.structs import TopicPartition

    if getattr(Fetcher, "_kmq_patient", False):
        return
    original = Fetcher._kmq_proc_fetch_request = Fetcher._proc_fetch_request  # (kept: test_dependencies)

    async def _proc_fetch_request(self: Any, assignment: Any, node_id: Any, request: Any) -> Any:
        asked = {TopicPartition(topic, p): offset
                 for topic, parts in request.topics for p, offset, _max_bytes in parts}
        result = await original(self, assignment, node_id, request)
        wait = self.__dict__.get("_kmq_fetch_wait")
        if wait is None:
            wait = self._kmq_fetch_wait = FetchWait.starting_at(self._fetch_max_wait_ms)
        if not assignment.active:
            return result
        now = time.monotonic()
        ends = self.__dict__.setdefault("_kmq_ends", {})  # tp -> end the last response reported
        read = self.__dict__.setdefault("_kmq_read_bytes", {})  # tp -> bytes fetched so far
        for tp, offset in asked.items():
            state = assignment.state_value(tp)
            if state is None:
                continue
            # Behind: the end the previous response reported lies past this fetch's offset
            # (what the previous one brought was consumed: aiokafka fetches a partition
            # only then). This response's own records are not counted yet.
            before = ends.get(tp)
            ends[tp] = state.lso if self._isolation_level == READ_COMMITTED and state.lso is not None \
                else state.highwater
            got = getattr(self._records.get(tp), "_partition_records", None)
            if got is not None:  # this response's records (not an error)
                read[tp] = read.get(tp, 0) + got._records.size_in_bytes()
            if wait.observe(now, tp, behind=before is not None and before > offset, position=offset,
                            read_bytes=read.get(tp, 0)):
                self._fetch_max_wait_ms = wait.wait_ms
                note_raised(NAME, wait.wait_ms)
                log.warning("%s, %s[%d]: %s", NAME, tp.topic, tp.partition, wait.why(before, offset))
        return result

    Fetcher._proc_fetch_request = _proc_fetch_request
    Fetcher._kmq_patient = True
