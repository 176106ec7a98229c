"""Shared helpers of the side-by-side benchmarks: timing, the reference driver, reporting."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "interop"))

from refenv import ensure_reference_env, run_reference  # noqa: E402


def existing_dir(value: str) -> str:
    """``--workdir``: an existing folder, refused by argparse (not a traceback) otherwise."""
    if not Path(value).is_dir():
        raise argparse.ArgumentTypeError(f"{value}: no such directory")
    return value


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


def timed_fresh(
    run: Callable[[Path], object],
    workdir: Path,
    name: str,
    repeat: int,
    prepare: Callable[[Path], object] | None = None,
) -> tuple[list[float], Path]:
    """Seconds of ``run(path)`` over ``repeat`` runs, each on a new path under ``workdir``.

    Nothing is deleted between runs and dirty pages are flushed (untimed) before each: on
    this machine's ext4 (mounted with ``discard``), files created right after a large tree
    was deleted or written cost several times more, which would bill one run for its
    predecessor's I/O.  The reference driver times its side the same way.  ``prepare``
    (untimed) readies the path, e.g. copies a base store there.  Returns the times and the
    last run's path.
    """
    out = []
    path = workdir
    for i in range(repeat):
        path = workdir / f"{name}-{i}"
        if prepare is not None:
            prepare(path)
        os.sync()
        t0 = time.perf_counter()
        run(path)
        out.append(time.perf_counter() - t0)
    return out, path


def report(rows: list[tuple[str, list[float], list[float]]]) -> None:
    """Print medians and the reference/ours ratio (> 1 means we are faster)."""
    print(f"{'operation':<22}{'ours (median s)':>18}{'reference (median s)':>24}{'speed-up':>12}")
    for name, ours, ref in rows:
        mo, mr = statistics.median(ours), statistics.median(ref)
        print(f"{name:<22}{mo:>18.3f}{mr:>24.3f}{mr / mo:>11.2f}x")


__all__ = ["REPO", "ensure_reference_env", "report", "run_reference", "timed", "timed_fresh"]
