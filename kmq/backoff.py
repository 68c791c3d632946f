"""Retry backoff policies and the pure ``compute_backoff`` helper.

A policy says how long to wait before redelivering a message whose delivery
number ``attempt`` (1 = first) timed out or was released without a delay.
Randomness is passed in, so tests and the tracker's replays are reproducible.

- ``fixed``: always ``base_s``.
- ``exponential``: ``base_s * multiplier ** (attempt - 1)`` capped at ``max_s``,
  with jitter: ``full`` (uniform in [0, d]), ``equal`` (d/2 + uniform in
  [0, d/2]) or ``none``.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass
from typing import Any, Callable

from kmq.errors import ConfigError

KINDS = ("none", "fixed", "exponential")
JITTERS = ("none", "full", "equal")
MAX_BACKOFF_S = 7 * 24 * 3600.0


@dataclass(frozen=True)
class Backoff:
    """A retry backoff policy; build with :meth:`fixed`, :meth:`exponential` or :meth:`none`."""

    kind: str = "none"
    base_s: float = 0.0
    max_s: float = 0.0
    multiplier: float = 2.0
    jitter: str = "none"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"backoff kind={self.kind!r}: use one of {', '.join(KINDS)}")
        if self.jitter not in JITTERS:
            raise ConfigError(f"backoff jitter={self.jitter!r}: use one of {', '.join(JITTERS)}")
        for name in ("base_s", "max_s", "multiplier"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= MAX_BACKOFF_S:
                raise ConfigError(f"backoff {name}={v!r} must be a number in [0, {MAX_BACKOFF_S:g}]")
        if self.kind == "exponential" and self.multiplier < 1:
            raise ConfigError(f"backoff multiplier={self.multiplier!r} must be >= 1")
        if self.kind == "exponential" and self.max_s < self.base_s:
            raise ConfigError(f"backoff max_s={self.max_s!r} is below base_s={self.base_s!r}")

    @classmethod
    def none(cls) -> "Backoff":
        """Redeliver at once."""
        return cls()

    @classmethod
    def fixed(cls, delay_s: float) -> "Backoff":
        """Wait ``delay_s`` before every redelivery."""
        return cls("fixed", base_s=delay_s, max_s=delay_s)

    @classmethod
    def exponential(cls, base_s: float, max_s: float, multiplier: float = 2.0,
                    jitter: str = "full") -> "Backoff":
        """Wait ``base_s * multiplier**(attempt-1)``, at most ``max_s``, with jitter."""
        return cls("exponential", base_s=base_s, max_s=max_s, multiplier=multiplier, jitter=jitter)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Backoff":
        return cls(**{k: d[k] for k in ("kind", "base_s", "max_s", "multiplier", "jitter") if k in d})


def compute_backoff(policy: Backoff, attempt: int,
                    uniform: Callable[[float, float], float] = random.uniform) -> float:
    """Seconds to wait before redelivering after delivery number ``attempt`` (>= 1; below
    it counts as 1)."""
    if not isinstance(policy, Backoff):
        raise ConfigError(f"policy={policy!r} must be a kmq.Backoff (Backoff.fixed(...), "
                          "Backoff.exponential(...) or Backoff.none())")
    if isinstance(attempt, bool) or not isinstance(attempt, int):
        raise ConfigError(f"attempt={attempt!r} must be a whole number (the delivery that ended, 1 = first)")
    if policy.kind == "none":
        return 0.0
    if policy.kind == "fixed":
        return policy.base_s
    exponent = max(0, attempt - 1)
    # Compare in logs before exponentiating: multiplier**exponent overflows a
    # float long before the cap stops mattering.
    if policy.base_s <= 0:
        delay = 0.0
    elif policy.multiplier == 1 or exponent * math.log(policy.multiplier) < math.log(
            policy.max_s / policy.base_s):
        delay = policy.base_s * policy.multiplier ** exponent
    else:
        delay = policy.max_s
    if policy.jitter == "full":
        return uniform(0.0, delay)
    if policy.jitter == "equal":
        return delay / 2 + uniform(0.0, delay / 2)
    return delay
