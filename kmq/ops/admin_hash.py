"""The admin token's published hash: salted scrypt, versioned, verified with a bounded cache.

The tracker publishes the ``!auth`` record on the queues topic so SDK processes
can check an admin token themselves. Every reader of that topic sees the
record, and the admin token is chosen by an operator (not minted at full
strength like tenant tokens), so it is stored as scrypt with a random salt per
record and its parameters beside it: guessing costs ~32 MiB and tens of
milliseconds per try, and one table of guesses serves one record only.

Record format (JSON), version 2::

    {"v": 2, "kdf": "scrypt", "n": 32768, "r": 8, "p": 1,
     "salt": "<32 hex>", "hash": "<64 hex>"}

Version 1 (an unsalted SHA-256) is refused with :class:`LegacyAuthRecordError`,
which names the fix: restart a tracker with ``KMQ_AUTH=on`` to republish it.

A slow hash per admin call would make every SDK admin call pay it, so
successful verifications are remembered in memory per (token, record), at most
:data:`CACHE_ENTRIES` of them. Failures are not cached (a wrong token stays
wrong at full cost). The tracker's own views never hash: they compare with
their own ``KMQ_ADMIN_TOKEN`` (web/api.py).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass

from kmq.errors import ConfigError

VERSION = 2
SCRYPT_N = 1 << 15  # 32 MiB at r=8 (128 * r * n bytes)
SCRYPT_R = 8
SCRYPT_P = 1
SALT_BYTES = 16
HASH_BYTES = 32
# A hostile record must not make readers allocate without bound: n * r above
# this is refused (the default is 1/8 of it).
MAX_SCRYPT_MEMORY_BYTES = 256 * 1024 * 1024
MAX_SCRYPT_P = 4
CACHE_ENTRIES = 64


class LegacyAuthRecordError(ConfigError):
    """The ``!auth`` record holds the old unsalted hash (version 1)."""


@dataclass(frozen=True)
class AdminHash:
    """The published form of the admin token: scrypt parameters, salt and hash."""

    n: int
    r: int
    p: int
    salt: bytes
    digest: bytes

    @classmethod
    def of(cls, token: str, *, n: int = SCRYPT_N, r: int = SCRYPT_R, p: int = SCRYPT_P,
           salt: bytes | None = None) -> "AdminHash":
        """Hash ``token`` with a fresh random salt (or the one given)."""
        salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
        _check_cost(n, r, p)
        return cls(n, r, p, salt, _scrypt(token, salt, n, r, p))

    def encode(self) -> bytes:
        return json.dumps({"v": VERSION, "kdf": "scrypt", "n": self.n, "r": self.r, "p": self.p,
                           "salt": self.salt.hex(), "hash": self.digest.hex()}).encode()

    @classmethod
    def decode(cls, data: bytes) -> "AdminHash":
        """Parse an ``!auth`` record (ValueError for garbage, LegacyAuthRecordError for v1)."""
        d = json.loads(data)
        if not isinstance(d, dict):
            raise ValueError("auth record is not a JSON object")
        if d.get("v") == 1:
            raise LegacyAuthRecordError(
                "the queues topic's !auth record holds the admin token as an unsalted SHA-256 "
                "(version 1, written by an older tracker): restart a tracker with KMQ_AUTH=on "
                "to republish it as salted scrypt; until then the admin token is refused here")
        if d.get("v") != VERSION or d.get("kdf") != "scrypt":
            raise ValueError(f"unsupported auth record version {d.get('v')!r} / kdf {d.get('kdf')!r}")
        n, r, p = int(d["n"]), int(d["r"]), int(d["p"])
        _check_cost(n, r, p)
        salt, digest = bytes.fromhex(d["salt"]), bytes.fromhex(d["hash"])
        if not salt or len(digest) != HASH_BYTES:
            raise ValueError("auth record: empty salt or a hash that is not 32 bytes")
        return cls(n, r, p, salt, digest)

    def verify(self, token: str | None) -> bool:
        """Whether ``token`` is the admin token (constant-time; successes cached)."""
        if not token:
            return False
        key = (hashlib.sha256(token.encode()).digest(), self)
        if _cache.hit(key):
            return True
        ok = hmac.compare_digest(_scrypt(token, self.salt, self.n, self.r, self.p), self.digest)
        if ok:
            _cache.add(key)
        return ok


def _check_cost(n: int, r: int, p: int) -> None:
    if n < 2 or n & (n - 1) or r < 1 or not 1 <= p <= MAX_SCRYPT_P or 128 * r * n > MAX_SCRYPT_MEMORY_BYTES:
        raise ValueError(f"scrypt parameters n={n} r={r} p={p} out of bounds "
                         f"(n a power of 2, 128*r*n <= {MAX_SCRYPT_MEMORY_BYTES}, p <= {MAX_SCRYPT_P})")


def _scrypt(token: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(token.encode(), salt=salt, n=n, r=r, p=p, dklen=HASH_BYTES,
                          maxmem=128 * r * n + 1024 * 1024)


class _VerifiedCache:
    """Successful (token digest, record) pairs, least recently used dropped first."""

    def __init__(self, entries: int) -> None:
        self._entries = entries
        self._seen: OrderedDict[tuple[bytes, AdminHash], None] = OrderedDict()
        self._lock = threading.Lock()
        self.slow_hashes = 0  # scrypt runs, for tests and curiosity

    def hit(self, key: tuple[bytes, AdminHash]) -> bool:
        with self._lock:
            if key in self._seen:
                self._seen.move_to_end(key)
                return True
            self.slow_hashes += 1
            return False

    def add(self, key: tuple[bytes, AdminHash]) -> None:
        with self._lock:
            self._seen[key] = None
            while len(self._seen) > self._entries:
                self._seen.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()


_cache = _VerifiedCache(CACHE_ENTRIES)
