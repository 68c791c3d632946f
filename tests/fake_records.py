"""Records as confluent-kafka's ``Message`` answers: a queue-topic record for the dispatcher
(offset, key, partition, error, headers and ``len()``, the value's bytes), for the pure
dispatch rules' tests, and a queues-topic record for the settings view's."""

from __future__ import annotations


class Rec:
    __slots__ = ("_o", "_k", "_n", "_p", "_e", "_h")

    def __init__(self, offset, key, size=10, partition=0, error=None, headers=None):
        self._o, self._k, self._n, self._p, self._e, self._h = offset, key, size, partition, error, headers

    def __len__(self):
        return self._n

    def offset(self):
        return self._o

    def key(self):
        return self._k

    def partition(self):
        return self._p

    def error(self):
        return self._e

    def headers(self):
        return self._h


class StampedRec:
    """A queue record with headers and a timestamp, as the dispatcher's dedup and ordered
    queues read it (offset, headers, timestamp, ``len()``)."""

    def __init__(self, offset, headers=None, ts=1000):
        self._o, self._h, self._ts = offset, headers, ts

    def offset(self):
        return self._o

    def headers(self):
        return self._h

    def timestamp(self):
        return (1, self._ts)

    def __len__(self):  # the value's bytes, as a confluent-kafka Message answers
        return 0


class ConfigRec:
    """A record of the queues topic, as the SDK's and the tracker's readers see it."""

    def __init__(self, key: bytes | None, value: bytes | None, offset: int = 0):
        self._key, self._value, self._offset = key, value, offset

    def key(self):
        return self._key

    def value(self):
        return self._value

    def topic(self):
        return "kmq.queues"

    def partition(self):
        return 0

    def offset(self):
        return self._offset
