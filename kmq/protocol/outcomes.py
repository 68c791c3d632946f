"""What the tracker counts: one name per thing that can happen to a marker or a message.

The values are the strings the JSON API, the Prometheus labels, the Spark
events and the docs use (``StrEnum``: ``Outcome.ACKED == "acked"``), spelled
once here.
"""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    """What happened to ``count`` messages (or markers) of a queue."""

    # 4. markers folded into the state machine
    STARTED = "started"                  # a fetched range is now in flight
    ACKED = "acked"
    EXTENDED = "extended"
    RELEASED = "released"
    RETURNED = "returned"                # handed back unprocessed (a closing consumer's prefetch)
    REJECTED = "rejected"
    SCHEDULED = "scheduled"              # a delayed send is held
    SCHEDULED_DUPLICATE = "scheduled-duplicate"
    PURGED = "purged"
    FENCED = "fenced"                    # an ACQUIRE of a dispatcher that lost its partition
    # A settle or EXTEND for a range handed out before (below the queue partition's cursor)
    # that the tracker no longer holds: its messages were acked, or taken back when their
    # visibility timeout passed (redelivered or dead-lettered). Normal at-least-once traffic,
    # not acted on; a steady rate says the queue's visibility timeout is too short.
    LATE = "late"
    # 5. what came due, carried out
    REDELIVERED = "redelivered"
    DEAD_LETTERED = "dead-lettered"
    BACKOFF = "backoff"                  # expired, waits out the queue's backoff first
    DISCARDED = "discarded"              # rejected or at max deliveries, dead-lettering off
    SCHEDULED_DELIVERED = "scheduled-delivered"
    SCHEDULED_FOUND = "scheduled-found"  # published by an attempt before a crash
    FOUND_AFTER_CRASH = "found-after-crash"
    # set aside: counted, not acted on
    MALFORMED_MARKER = "malformed-marker"      # a record or marker the codec or state machine refused
    UNKNOWN_RANGE = "unknown-range"            # a marker for a range the tracker does not hold
    UNKNOWN_PARTITION = "unknown-partition"    # a START naming a queue-topic partition that does not exist
    BEYOND_END = "beyond-end"                  # offsets past the queue partition's end (never written)
    FOREIGN_RECORD = "foreign-record"          # a marker named another queue's record: not acted on
    START_ON_SHARED = "start-on-shared"        # a consumer's START for a shared queue (its dispatcher hands out)
    PAYLOAD_EXPIRED = "payload-expired"        # the record left the queue topic before it came due
    TOO_LARGE = "too-large"                    # too large to be written again


# Reasons the tracker counts things it set aside (/kmq/health, kmq_tracker_set_aside_total).
SET_ASIDE = (Outcome.MALFORMED_MARKER, Outcome.UNKNOWN_RANGE, Outcome.UNKNOWN_PARTITION,
             Outcome.BEYOND_END, Outcome.PAYLOAD_EXPIRED, Outcome.TOO_LARGE, Outcome.START_ON_SHARED,
             Outcome.FOREIGN_RECORD)
