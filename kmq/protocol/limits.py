"""The marker codec's limits: what the SDK can produce, so anything beyond is hostile or broken.

Every consumer may write to the markers topic, so one record must never cost
the tracker more than a record the SDK itself writes. The decoder
(:mod:`kmq.protocol.marker_codec`) refuses what breaks these limits and the state
machine checks them again; the SDK keeps within them (``batch_size`` at most
``MAX_BATCH_SIZE``, fetches split at ``MAX_RANGE_LEN`` offsets, records split
at ``MAX_RECORD_OFFSETS``).

Why each number:

- ``MAX_RANGE_LEN`` (65,536 offsets; an 8 KiB mask): twice the largest
  fetch, so a fetch whose offsets span a few control records or another
  queue's records still fits one range; a wider fetch is split.
- ``MAX_RECORD_OFFSETS`` (262,144): one record decodes into at most 32 KiB
  of masks, and the state machine touches at most that many offsets' worth
  of entries for it.
- ``MAX_MARKERS_PER_RECORD`` (4,096): each marker costs the tracker a table
  read and write; 65,535 one-offset STARTs (the u16 count's most) took 3.6 s
  and 38 MiB to apply (bench/hostile_markers.py).
- ``MAX_TIMEOUT_MS`` (12 h): the visibility ceiling (SQS's; a queue's
  ``visibility_timeout_s`` and ``Message.extend`` stop there).
- ``MAX_DELAY_MS`` (365 days): ``KMQ_MAX_DELAY_S`` is validated against it.
- ``MAX_CREDIT`` (1,048,576 messages): what one shared-queue consumer may ask
  for at once; the SDK asks for its free ``max_in_flight`` clamped to it.
- ``MAX_CONSUMERS_PER_QUEUE`` (4,096) and ``MAX_CONSUMERS_PER_PARTITION``
  (16,384): the live consumers a dispatcher keeps of one shared queue, and of
  all shared queues on one markers partition (KIP-932's share groups: 200 by
  default, 1,000 at most). A CREDIT names any consumer id and queue: 200,000
  made-up ids (49 records) held 188 MiB, and 200,000 made-up queues made the
  leases' expiry alone take 0.74 s a dispatch round (``bench.hostile_credits``).
  A new consumer beyond them waits (``credits-refused``).
- ``MAX_TIME_MS``: epoch milliseconds up to 9999-12-31, so deadlines and
  index keys stay far inside a signed 64-bit integer.

Two more bound the tracker's state rather than the codec:
``MAX_GROUPS_PER_RANGE`` (an in-flight entry keeps at most that many
(deadline, cause, reason) groups, so an entry stays under ~3.2 MiB however
many distinct deadlines or reasons its markers bring; beyond it offsets join
the nearest later group of their cause) and ``MAX_RECORD_WORK_BYTES`` (the
state machine reads and writes at most that many bytes of entries for one
marker record, or one tick's due list, plus the one entry that crosses it;
the SDK's own records stay far below: under 1 MiB for 4,096 acks of one-message
ranges).
"""

from __future__ import annotations

from kmq.protocol.placement import QUEUE_NAME_RE

MAX_RANGE_LEN = 1 << 16                  # offsets in one range (its mask: 8 KiB)
MAX_BATCH_SIZE = MAX_RANGE_LEN // 2      # records one SDK fetch takes (Consumer batch_size)
MAX_RECORD_OFFSETS = 1 << 18             # offsets over all range markers of one record
MAX_MARKERS_PER_RECORD = 4096            # markers in one record (the SDK splits its records at this)
MAX_TIMEOUT_MS = 12 * 3600 * 1000        # START / EXTEND timeout: the visibility ceiling
MAX_DELAY_MS = 365 * 24 * 3600 * 1000    # RELEASE delay (KMQ_MAX_DELAY_S is at most this)
MAX_TIME_MS = 253_402_300_799_999        # SCHEDULE due / TICK time: epoch ms up to 9999-12-31
MAX_REASON_BYTES = 4096                  # REJECT reason (Message.reject's limit)
MAX_MESSAGE_ID_BYTES = 255               # SCHEDULE message id (the SDK's are ~20)
MAX_CREDIT = 1 << 20                     # messages one shared-queue CREDIT asks for (the SDK clamps to it)
MAX_CONSUMERS_PER_QUEUE = 4096          # live consumers a dispatcher keeps of one shared queue
MAX_CONSUMERS_PER_PARTITION = 16384     # ... of all shared queues on one markers partition
MAX_GROUPS_PER_RANGE = 256               # (deadline, cause, reason) groups one in-flight entry keeps
MAX_RECORD_WORK_BYTES = 64 << 20         # table entry bytes one marker record (or one tick) reads and writes
# Beyond KMQ_MAX_MESSAGE_BYTES (what one send may be, key and headers included), what a
# record written again may add: a redelivery's headers on the queue topic, and on the
# dead-letter topic a reject reason (MAX_REASON_BYTES) with the dead-letter headers (an
# audit: at 4 KiB a rejected message at the limit lost its payload, and its redrive failed).
QUEUE_RECORD_HEADROOM_BYTES = 1024
DEAD_LETTER_HEADROOM_BYTES = 16384
_I64_MAX = (1 << 63) - 1


def int_in(value: object, low: int, high: int) -> bool:
    """True if ``value`` is an int (not a bool) within ``low..high``."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def utf8_len(text: object) -> int:
    """Bytes of ``text`` in UTF-8, or -1 when it is not encodable text."""
    try:
        return len(text.encode()) if isinstance(text, str) else -1
    except UnicodeEncodeError:
        return -1


def name_violation(field: str, queue: object) -> str | None:
    """Why ``queue`` is not a valid queue id, or None."""
    if isinstance(queue, str) and QUEUE_NAME_RE.match(queue):
        return None
    shown = queue[:40] + "..." if isinstance(queue, str) and len(queue) > 40 else queue
    return f"{field} {shown!r} is not a valid queue id (QUEUE_NAME_RE)"


def offsets_violation(partition: object, start: object, end: object) -> str | None:
    """Why ``[start, end)`` of ``partition`` is not a range a consumer can fetch, or None."""
    if not int_in(partition, 0, 0xFFFFFFFF):
        return f"partition {partition!r} is not a u32"
    if not (int_in(start, 0, _I64_MAX) and int_in(end, 0, _I64_MAX)):
        return f"offsets {start!r}..{end!r} are not 0..2**63-1"
    if not 0 < end - start <= MAX_RANGE_LEN:  # type: ignore[operator]
        return f"range {start}..{end} holds {end - start} offsets, not 1..{MAX_RANGE_LEN} (MAX_RANGE_LEN)"
    return None

# A dead-letter redrive's slowest rate: one message every 100 s (1e-300 overflowed time.sleep).
MIN_RATE_PER_S = 0.01
