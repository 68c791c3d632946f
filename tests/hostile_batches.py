"""Record batches no well-behaved client writes, sent to a real broker as they are.

A hostile or broken client may write a batch whose codec bits name a codec nobody has, whose
compressed payload does not decompress, or that decompresses to hundreds of megabytes (a
compression bomb). Producers never build those, so the batch is made here with aiokafka's
builder, its payload replaced, its CRC computed again, and sent in a ProduceRequest of its
own (the broker stores a v2 batch as it came).
"""

from __future__ import annotations

import asyncio
import struct

from aiokafka.client import AIOKafkaClient
from aiokafka.protocol.produce import ProduceRequest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.util import calc_crc32c
from aiokafka.structs import TopicPartition

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
UNKNOWN_CODEC = 5  # Kafka has 0-4
_HEADER = 61  # a v2 batch's header: the records (or their compressed form) follow it


def batch(records: list[tuple[bytes | None, bytes | None, list]], codec: int = 0,
          payload: bytes | None = None) -> bytes:
    """A v2 batch of ``records`` (key, value, headers); ``codec`` written into its attributes
    and, if ``payload`` is given, the records replaced by it (else they stay uncompressed)."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i, (key, value, headers) in enumerate(records):
        b.append(i, timestamp=None, key=key, value=value, headers=headers)
    raw = bytearray(b.build())
    if payload is not None:
        raw[_HEADER:] = payload
        struct.pack_into(">i", raw, 8, len(raw) - 12)  # batch length: from the epoch on
    raw[22] = (raw[22] & ~0x07) | codec  # attributes (bytes 21-22): the codec's 3 bits
    struct.pack_into(">I", raw, 17, calc_crc32c(bytes(raw[21:])))
    return bytes(raw)


def zstd_bomb(expanded_bytes: int) -> bytes:
    """A zstd frame of a few KiB that expands to ``expanded_bytes`` zero bytes (built in
    pieces: the test process never holds the expanded bytes)."""
    import cramjam

    c = cramjam.zstd.Compressor(level=19)
    chunk = bytes(1 << 20)
    left = expanded_bytes
    while left > 0:
        c.compress(chunk[:min(left, len(chunk))])
        left -= len(chunk)
    return bytes(c.finish())


def gzip_bomb(expanded_bytes: int) -> bytes:
    """A gzip stream of ~1/1000 the size that expands to ``expanded_bytes`` zero bytes."""
    import zlib

    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    out = []
    left = expanded_bytes
    while left > 0:
        out.append(c.compress(chunk[:min(left, len(chunk))]))
        left -= len(chunk)
    out.append(c.flush())
    return b"".join(out)


def send_raw(bootstrap_servers: str, topic: str, partition: int, data: bytes) -> int:
    """Produce one raw batch (acks=all); returns the broker's error code (0: taken)."""
    return asyncio.run(_send(bootstrap_servers, topic, partition, data))


async def _send(bootstrap_servers: str, topic: str, partition: int, data: bytes) -> int:
    client = AIOKafkaClient(bootstrap_servers=bootstrap_servers)
    await client.bootstrap()
    try:
        await client._wait_on_metadata(topic)
        node = client.cluster.leader_for_partition(TopicPartition(topic, partition))
        request = ProduceRequest(None, -1, 30_000, [(topic, [(partition, data)])])
        response = await client.send(node, request)
        return response.topics[0][1][0][1]
    finally:
        await client.close()
