"""Timing helpers shared by the benchmarks: repeat a call, summarise median and p95."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def timings(fn: Callable[[], object], n: int) -> list[float]:
    """Seconds taken by each of ``n`` calls of ``fn``."""
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def summary(samples: list[float], *, digits: int = 2, width: int = 8) -> str:
    """``median ms (p95 ...)`` of ``samples`` (seconds)."""
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"{statistics.median(ordered) * 1000:{width}.{digits}f} ms (p95 {p95 * 1000:{width - 1}.{digits}f})"
