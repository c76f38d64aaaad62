from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Optional

MAX_RETRY_AFTER = 60.0


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a call that failed for a passing reason is
    repeated: network errors and 5xx answers (every producer call is
    idempotent on the server), never a 4xx.

    The n-th retry waits ``min_delay * 2**n`` seconds, at most ``max_delay``,
    with ±``jitter`` of it at random so that many producers do not retry in
    lockstep; never sooner than a ``Retry-After`` the server sent (at most 60 s).
    The default, 5 retries from 0.1 s up to 5 s, is about 3 s of patience.
    """

    max_retries: int = 5
    min_delay: float = 0.1
    max_delay: float = 5.0
    jitter: float = 0.2

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        if not 0 < self.min_delay <= self.max_delay:
            raise ValueError("need 0 < min_delay <= max_delay (seconds)")
        if not 0 <= self.jitter < 1:
            raise ValueError("jitter is a fraction from 0 to below 1")

    @classmethod
    def none(cls) -> RetryPolicy:
        """Try once, never retry."""
        return cls(max_retries=0)

    def delay(self, retry: int, retry_after: Optional[float] = None) -> float:
        """Seconds to wait before retry number ``retry`` (0 for the first)."""
        base = min(self.max_delay, self.min_delay * (2.0 ** min(retry, 62)))
        d = base * (1 + self.jitter * (2 * random.random() - 1))  # noqa: S311 - jitter, not secrecy
        if retry_after is not None:
            d = max(d, min(retry_after, MAX_RETRY_AFTER))
        return d
