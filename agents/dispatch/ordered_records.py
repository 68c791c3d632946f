"""An ordered queue's records on their way to a lane (agents.dispatch.ordered): each carries its
run's id, and a consumer's records are cut into deliveries where a gap is wide."""

from __future__ import annotations

from typing import Any

from kmq.protocol import envelope


class InRun:
    """A record going out on a lane with its run's id (``kmq.run``): the consumer gives back
    the rest of a run by it when one of the run's messages fails (kmq.consumer.group_gate)."""

    __slots__ = ("record", "_headers")

    def __init__(self, record: Any, chain: bytes) -> None:
        self.record = record
        # A kmq.run the record carried was not a dispatcher's (a plain producer's): only ours.
        self._headers = [*(h for h in record.headers() or () if h[0] != envelope.RUN), (envelope.RUN, chain)]

    def headers(self) -> list:
        return self._headers

    def offset(self) -> int:
        return self.record.offset()

    def key(self) -> bytes | None:
        return self.record.key()

    def value(self) -> bytes | None:
        return self.record.value()

    def timestamp(self) -> tuple[int, int]:
        return self.record.timestamp()

    def __len__(self) -> int:
        return len(self.record)


def close_runs(records: list, max_gap: int) -> list[list]:
    """Records in offset order cut where more than ``max_gap`` offsets lie between two."""
    out: list[list] = []
    for rec in records:
        if out and rec.offset() - out[-1][-1].offset() <= max_gap:
            out[-1].append(rec)
        else:
            out.append([rec])
    return out
