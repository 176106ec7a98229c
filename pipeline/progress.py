"""Progress bars for attached runs: one line per stage, driven from futures.

Registered with :func:`zarr_vectors.execution.runner.callbacks`; under a distributed
client the runner reports every finished task (``as_completed`` on the stage's
futures), so the bar moves as the cluster works.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class TextProgress:
    """``stage [#####-----] done/total  elapsed`` on one line per stage."""

    def __init__(self, stream: TextIO | None = None, width: int = 30) -> None:
        self.stream = stream or sys.stderr
        self.width = width
        self.stages: list[tuple[str, int, float]] = []  # finished: (stage, tasks, seconds)
        self._stage = ""
        self._total = 0
        self._done = 0
        self._start = 0.0

    def on_stage_start(self, stage: str, tasks: int) -> None:
        self._stage, self._total, self._done, self._start = stage, tasks, 0, time.perf_counter()
        self._draw()

    def on_task_end(self, stage: str) -> None:
        self._done += 1
        self._draw()

    def on_stage_end(self, stage: str) -> None:
        self._done = self._total
        self._draw()
        self.stream.write("\n")
        self.stream.flush()
        self.stages.append((stage, self._total, time.perf_counter() - self._start))

    def _draw(self) -> None:
        filled = self.width * self._done // self._total if self._total else self.width
        bar = "#" * filled + "-" * (self.width - filled)
        elapsed = time.perf_counter() - self._start
        self.stream.write(f"\r{self._stage:<16} [{bar}] {self._done}/{self._total} {elapsed:6.1f}s")
        self.stream.flush()
