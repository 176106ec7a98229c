"""Shared helpers of the side-by-side benchmarks: timing, the reference driver, reporting."""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "interop"))

from refenv import ensure_reference_env, run_reference  # noqa: E402


def timed(fn: Callable[[], object], repeat: int, setup: Callable[[], object] | None = None) -> list[float]:
    """Wall-clock seconds of ``fn`` over ``repeat`` runs (``setup`` untimed before each)."""
    out = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def report(rows: list[tuple[str, list[float], list[float]]]) -> None:
    """Print medians and the reference/ours ratio (> 1 means we are faster)."""
    print(f"{'operation':<22}{'ours (median s)':>18}{'reference (median s)':>24}{'speed-up':>12}")
    for name, ours, ref in rows:
        mo, mr = statistics.median(ours), statistics.median(ref)
        print(f"{name:<22}{mo:>18.3f}{mr:>24.3f}{mr / mo:>11.2f}x")


__all__ = ["REPO", "ensure_reference_env", "report", "run_reference", "timed"]
