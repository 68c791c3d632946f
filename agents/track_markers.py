"""The markers agent: folds markers into the tables and acts on TICKs (4. and 5.).

Concurrency 1, one event per marker record, in partition order: a TICK
appended after a backlog is handled only once the backlog before it is,
so a freshly assigned partition never redelivers what its backlog acks.

Each record is applied once. Faust commits the markers offsets now and then,
while table changes reach the changelog as they happen, so a worker that takes
over a partition (after a crash) is handed records whose changes its restored
table already holds. Applying them again would do harm: a replayed START
brings back offsets since acked or republished, and a replayed TICK
republishes them. After each record that changed it, the table records its
offset (same changelog, so a restored table says which records it holds);
older ones are skipped. Records that changed nothing (malformed ones, idle
TICKs, CREDITs) and records of ACKs only (``state.replay_safe``: an ACK applied
again clears what is clear) cost no such write and are harmless to apply again.

What it works with (owned partitions, the redeliverer, the dispatcher, queue settings)
is the worker's :class:`~agents.runtime.TrackerRuntime`, passed down from the agent.
"""

from __future__ import annotations

import logging
import time

from agents.redeliver import Execution
from agents.runtime import TrackerRuntime, runtime
from app import app, settings
from app.topics import markers_topic
from kmq.protocol.clock import applied_at_ms, tick_refused, written_at_ms
from kmq.protocol import expiry
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.errors import DeliveryError, MarkerDecodeError
from kmq.protocol.outcomes import Outcome
from kmq.protocol.state import DueSend, Expiry, StaleIndexKey, replay_safe
from kmq.send_args import headers_bytes

log = logging.getLogger("kmq.tracker.markers")

LOG_APPEND_TIME = 1  # Kafka timestamp type: the broker stamped the record
APPLIED_MARK_EVERY = 1000  # records: the table's applied mark moves at least this often


@app.agent(markers_topic, concurrency=1, name="track_markers")
async def track_markers(stream):
    """Apply each marker record of the partitions this worker owns."""
    rt = runtime()
    async for event in stream.events():
        msg = event.message
        part = rt.owned.get_or_create(msg.partition)
        assigned = not part.gauges_built
        if assigned:
            part.build_gauges()  # after (re)assignment: the table is recovered now
            log.info("markers partition %d: resuming at offset %d; the table holds records up to %d",
                     msg.partition, msg.offset, part.applied_upto())
            # Records between the table's mark and where Faust resumed are read, not assumed
            # (kmq.protocol.gaps.Gaps.expect).
            rt.owned.gaps.expect(msg.partition, part.applied_upto() + 1)
        gap = rt.owned.gaps.handed(msg.partition, msg.offset)
        if gap is not None:  # offsets we were not handed: read and applied first, in order
            await _fill(rt, part, *gap, after_assignment=assigned)
        await _apply_once(rt, part, event)


async def _fill(rt: TrackerRuntime, part, start: int, end: int, after_assignment: bool) -> None:
    """Apply what the log holds at ``[start, end)`` (kmq.protocol.gaps)."""
    gaps = rt.owned.gaps
    records = await rt.gap_reader.read(part.partition, start, end)
    if records is None:
        gaps.unread += 1
        log.error("markers partition %d: offsets %d..%d could not be read within the bound; going on "
                  "without them (%d gaps so far)", part.partition, start, end - 1, gaps.unread)
        return
    gaps.filled(len(records), after_assignment)
    if after_assignment:  # mostly records that changed nothing, so were never marked
        log.info("markers partition %d: offsets %d..%d, between the table's mark and where it was resumed, "
                 "read from the log (%d records)", part.partition, start, end - 1, len(records))
    elif records:
        log.warning("markers partition %d: offsets %s had not been handed to the agent; read from the log "
                    "(%d such records so far, kmq.protocol.gaps)", part.partition,
                    [r.offset for r in records][:10], gaps.found)
    for rec in records:
        await _apply_once(rt, part, rec)


async def _apply_once(rt: TrackerRuntime, part, event) -> None:
    """Apply a record unless the table holds its changes already (a replay)."""
    msg = event.message
    if msg.offset <= part.applied_upto():
        part.replayed += 1  # its changes are in the table already
        return
    needs_mark = await _apply(rt, part, event)
    # A record that changed nothing, or only by ACKs, may be applied again; but the mark moves
    # at least every APPLIED_MARK_EVERY records, so what a successor reads again after an
    # assignment (kmq.protocol.gaps) stays short on a partition of TICKs, CREDITs and ACKs.
    if needs_mark or msg.offset - part.applied_upto() >= APPLIED_MARK_EVERY:
        part.mark_applied(msg.offset)


async def _apply(rt: TrackerRuntime, part, event) -> bool:
    """Apply one marker record of ``part``: what cannot be used is set aside, never raised.

    Returns whether the record changed the table in a way that applying it again would not
    reproduce (not ``state.replay_safe``): only then must the applied mark move past it.
    """
    msg = event.message
    try:
        got = marker_codec.decode_lenient(event.value)
    except MarkerDecodeError as exc:
        # Not the error itself: a local holding it is a cycle (it -> its traceback -> this
        # frame -> it) that only a full collection frees, rare at the tracker's GC threshold.
        bad = (exc.reason, exc.data)
    else:
        bad = None
    if bad is not None:
        # Set aside outside the handler: confluent-kafka's produce raising (a record too large
        # for the dead-letter topic) while an exception is handled leaks that exception, and
        # this one holds the record (an audit: each 200 MiB compressed bomb kept 200 MB).
        _set_aside(rt, part, msg, *bad)
        return False
    if got.set_aside:  # markers outside the codec's limits; the rest of the record is applied
        _set_aside(rt, part, msg, "; ".join(got.set_aside[:3]), bytes(event.value), len(got.set_aside))
    stamp_ms = int(msg.timestamp * 1000) if msg.timestamp else None
    trusted_stamp = msg.timestamp_type == LOG_APPEND_TIME and stamp_ms is not None
    if trusted_stamp:
        now_ms = part.clock.observe(stamp_ms)
    else:
        # A consumer's clock is not ours to trust (seed 003): marker time only.
        now_ms = part.clock.now_ms()
    # A record the previous owner was told (read after a takeover) counts at its trusted
    # stamp (kmq.protocol.clock.applied_at_ms): once per record, an ACQUIRE's and the rest's.
    at_ms = applied_at_ms(now_ms, stamp_ms, part.owned_since_ms, trusted_stamp, False)
    # An ACQUIRE counts from when it was written (its stamp is a dispatcher's clock).
    written_ms = written_at_ms(now_ms, stamp_ms, part.owned_since_ms)
    part.state.begin_record()
    writes = part.state.store.writes
    purged: dict[str, None] = {}  # queues the record purges, in order
    for i, marker in enumerate(got.markers):
        try:
            refused = await _apply_marker(rt, part, marker,
                                          written_ms if marker.__class__ is M.Acquire else at_ms, written_ms)
        except Exception as exc:  # one marker's error must never stop the agent
            log.exception("markers partition %d offset %d: marker %d failed", msg.partition, msg.offset, i + 1)
            refused = f"{type(exc).__name__}: {exc}"
        if refused is not None:
            _set_aside(rt, part, msg, f"marker {i + 1} of {len(got.markers)}: {refused}", _encoded_or_empty(marker))
        elif isinstance(marker, M.Purge):
            purged[marker.queue] = None
    if purged:
        await _record_purges(rt, part, list(purged))
    changed = part.state.store.writes != writes
    if changed or part.next_deadline_ms == 0:  # 0: not known yet
        part.next_deadline_ms = part.state.next_deadline_ms()  # a seek of the deadline index
    return changed and not replay_safe(got.markers)


async def _apply_marker(rt: TrackerRuntime, part, marker: M.Marker, now_ms: int,
                        written_ms: int | None = None) -> str | None:
    """One marker: TICKs carry out what came due, the rest go to the state machine
    (``written_ms``: when its record was written, ``written_at_ms``). Returns why the
    state machine refused the marker (to be set aside), or None."""
    if isinstance(marker, M.Tick):
        refused = tick_refused(marker.now_ms, int(time.time() * 1000), part.clock.now_ms())
        if refused is None:
            await _tick(rt, part, marker)
        return refused
    if isinstance(marker, M.Credit):
        why = M.violation(marker)
        if why is None:
            rt.dispatcher.on_credit(part.partition, marker)  # soft state: nothing in the table
        return why
    if isinstance(marker, M.Schedule):
        size = len(marker.value) + len(marker.queue) + headers_bytes(marker.headers)
        if size > settings.max_message_bytes:  # the SDK's own bound (kmq.send_args.check_size)
            # Kept, its table entry was more than the changelog takes: the worker crashed.
            return (f"a delayed send of {size} bytes with key and headers, above "
                    f"KMQ_MAX_MESSAGE_BYTES={settings.max_message_bytes} (a client with a larger limit?)")
    if isinstance(marker, M.Start) and not expiry.start_allowed(
            rt.config(marker.range.queue), settings, now_ms if written_ms is None else written_ms):
        # A shared queue's messages are handed out by its dispatcher (ACQUIRE); a START
        # would only move its cursor (a forged one past the end would stall the queue).
        # When written, not read: one read late after a takeover was dropped (then handed out again).
        part.count(marker.range.queue, Outcome.START_ON_SHARED, marker.mask.bit_count())
        return None
    if isinstance(marker, M.Floor) and not 0 <= marker.partition < settings.queue_partitions:
        # A cursor of a partition the queue topic does not have (an audit: 400,000 forged
        # FLOORs of made-up partitions grew the table, and every BEGIN loaded them all).
        part.count(marker.queue, Outcome.UNKNOWN_PARTITION, 1)
        return None
    if isinstance(marker, (M.Start, M.Acquire)):
        purged_before = rt.config(marker.range.queue).purged_before.get(marker.range.partition, 0)
        admitted = expiry.admit_start(marker, settings.queue_partitions, purged_before)
        if isinstance(admitted, Outcome):
            part.count(marker.range.queue, admitted, marker.mask.bit_count())
        if admitted is None:
            # Wholly purged (its START came after the purge it raced with): tracked no more,
            # but handed out, so its settles are late, not set aside as unknown-range (an
            # audit: a purge between a partition-mode fetch and its acks counted them so).
            part.state.note_handed_out(marker.range)
            return None
        if not isinstance(admitted, (M.Start, M.Acquire)):
            return None
        marker = admitted
    applied = part.state.apply(marker, now_ms)
    if applied is not None and applied.what == Outcome.MALFORMED_MARKER:
        return applied.detail
    if applied is not None and applied.what == Outcome.FENCED and isinstance(marker, M.Acquire):
        # A dispatcher wrote after its successor began: tests and operators look for this.
        log.warning("markers partition %d: ACQUIRE fenced (epoch %d, current %d): %s",
                    part.partition, marker.epoch, part.state.epoch(), marker.range)
    if applied is not None:
        part.count(applied.queue, applied.what, applied.count)
    if applied is not None and applied.settled and rt.config(marker.range.queue).ordering == "group":
        # An ordered queue's group goes on with its next message (docs/ordering.md); an
        # ACK the table did not hold (late, or of a range never handed out) frees nothing.
        rt.dispatcher.on_ended(part.partition, marker.range.queue, marker.range.partition,
                               M.mask_offsets(marker.range.start, applied.settled), dead_lettered=False)
    if isinstance(marker, M.Start) and applied is not None and applied.what == Outcome.STARTED:
        # A group consumer fetched these: a dispatcher that takes the queue over (a switch
        # to shared mode) starts above them.
        rt.dispatcher.on_started(part.partition, marker.range)
    if isinstance(marker, M.Begin):
        rt.dispatcher.on_begin(part.partition, marker.epoch, part.state.cursors(), part.state.handed_outs())
    return None


async def _record_purges(rt: TrackerRuntime, part, queues: list[str]) -> None:
    """After the record's PURGEs forgot what was in flight (nothing republished before is
    above the point): the queue topic's ends become their purge points, all at once."""
    try:
        await rt.redeliverer.record_purge_points(queues)
    except Exception:  # as one marker's error: logged, never stopping the agent
        log.exception("markers partition %d: recording the purge points of %d queues failed",
                      part.partition, len(queues))
        return
    for queue in queues:  # an ordered queue's groups drop what they hold below it (docs/ordering.md)
        rt.dispatcher.on_purged(part.partition, queue, rt.redeliverer.config(queue).purged_before)


def _encoded_or_empty(marker: M.Marker) -> bytes:
    try:
        return marker_codec.encode([marker])
    except (ValueError, TypeError):
        return b""


async def _tick(rt: TrackerRuntime, part, tick: M.Tick) -> None:
    """Redeliver what is due, then forget it (never the other way round).

    What is due is taken at ``expiry.tick_time`` (the TICK's own time, however
    late it is read); what it becomes is ``expiry.plan``'s.
    """
    now_ms = part.clock.observe(tick.now_ms)
    part.ticks.ran(now_ms)
    try:
        await rt.redeliverer.flush_set_aside()
    except DeliveryError as exc:
        log.warning("setting malformed markers aside: %s", exc)
    due_at = expiry.tick_time(now_ms, tick.now_ms)
    started = time.perf_counter()
    due = part.state.due(due_at, settings.redeliver_batch_limit)
    if not due:
        return
    actionable = [d for d in due if not isinstance(d, StaleIndexKey)]
    done = Execution()
    if actionable:
        try:
            sends, ranges, marked = await _mark_attempts(rt, part, actionable)
            if marked:
                await app.producer.flush()  # the marks reach the changelog before any write
            done = await rt.redeliverer.execute(actionable, now_ms, sends, ranges)
        except DeliveryError as exc:
            log.warning("partition %d: %s", part.partition, exc)
            return
        except Exception:  # nothing was forgotten: the next TICK tries again
            part.tick_failures += 1
            if part.tick_failures <= 10 or part.tick_failures % 1000 == 0:  # ticks come every 20 ms
                log.exception("partition %d: redelivery failed (%d so far); will retry on the next tick",
                              part.partition, part.tick_failures)
            return
    part.state.settle(due, done.deferred)
    for queue, p, offset, dead_lettered in done.ended:  # ordered queues: dead-lettered or dropped heads
        rt.dispatcher.on_ended(part.partition, queue, p, [offset], dead_lettered=dead_lettered)
    for queue, what, n in done.outcomes:
        part.count(queue, what, n)
    part.tick_costs.append((sum(d.count for d in due), time.perf_counter() - started))


async def _mark_attempts(rt: TrackerRuntime, part, due):
    """Before writing anything, make durable where the target partitions ended.

    A tracker that dies after republishing but before forgetting would do it
    all again; with the marks, the next attempt looks for what is already
    there and writes only the rest (seed 003's "tracker dies between
    republishing and recording it"). Returns the scheduled sends and ranges
    an earlier attempt began on (to be looked up), and whether marks were written.
    """
    sends = [d for d in due if isinstance(d, DueSend)]
    expiries = [d for d in due if isinstance(d, Expiry)]
    marked = False
    prior_sends = {d: part.state.attempt_offset(d) for d in sends}
    fresh_sends = [d for d in sends if prior_sends[d] < 0]
    if fresh_sends:
        ends = await rt.redeliverer.end_offsets(fresh_sends)
        part.state.mark_attempts(fresh_sends, ends)
        marked = True
    prior_ranges = {d.range: part.state.range_attempt(d.range) for d in expiries}
    fresh_ranges = [r for r, (q, _) in prior_ranges.items() if q < 0]
    if fresh_ranges:
        ends = await rt.redeliverer.attempt_points(fresh_ranges)
        part.state.mark_range_attempts(fresh_ranges, ends)
        marked = True
    return ({d: off for d, off in prior_sends.items() if off >= 0},
            {r: v for r, v in prior_ranges.items() if v[0] >= 0}, marked)


def _set_aside(rt: TrackerRuntime, part, msg, reason: str, data: bytes, markers: int = 1) -> None:
    """Count ``markers`` unusable markers of one record and copy ``data`` to the dead-letter topic."""
    part.malformed += markers
    if part.malformed <= 10 or part.malformed % 1000 < markers:  # a flood must not flood the log
        log.warning("markers partition %d offset %d: %s; set aside on %s (%d so far)", msg.partition,
                    msg.offset, reason, settings.dlq_topic, part.malformed)
    headers = [("kmq.dlq.reason", Outcome.MALFORMED_MARKER.value.encode()),
               ("kmq.dlq.detail", reason.encode(errors="replace")[:4096]),
               ("kmq.source", f"{settings.markers_topic}:{msg.partition}:{msg.offset}".encode())]
    rt.redeliverer.set_aside(b"!malformed-markers", data, headers)
