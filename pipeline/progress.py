"""Progress for attached runs: a bar per stage on a terminal, one plain line per stage otherwise.

Registered with :func:`zarr_vectors.execution.runner.callbacks`; under a distributed
client the runner reports every finished task (``as_completed`` on the stage's
futures), so the bar moves as the cluster works.  Redrawn bars (carriage returns) are
noise in a log file or a pipe, so there each stage prints once, when it ends.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class TextProgress:
    """``stage [#####-----] done/total  elapsed`` redrawn on a terminal; ``stage  N task(s)  elapsed``
    once per stage elsewhere (``bars`` decides: default, whether the stream is a terminal)."""

    def __init__(self, stream: TextIO | None = None, width: int = 30, *, bars: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.width = width
        self.bars = _is_terminal(self.stream) if bars is None else bars
        self.stages: list[tuple[str, int, float]] = []  # finished: (stage, tasks, seconds)
        self._stage = ""
        self._total = 0
        self._done = 0
        self._start = 0.0

    def on_stage_start(self, stage: str, tasks: int) -> None:
        self._stage, self._total, self._done, self._start = stage, tasks, 0, time.perf_counter()
        if self.bars:
            self._draw()

    def on_task_end(self, stage: str) -> None:
        self._done += 1
        if self.bars:
            self._draw()

    def on_stage_end(self, stage: str) -> None:
        self._done = self._total
        elapsed = time.perf_counter() - self._start
        if self.bars:
            self._draw()
            self.stream.write("\n")
        else:
            tasks = f"{self._total:>5} task{'' if self._total == 1 else 's'}"
            self.stream.write(f"{self._stage:<24} {tasks:<11} {elapsed:6.1f}s\n")
        self.stream.flush()
        self.stages.append((stage, self._total, elapsed))

    def _draw(self) -> None:
        filled = self.width * self._done // self._total if self._total else self.width
        bar = "#" * filled + "-" * (self.width - filled)
        elapsed = time.perf_counter() - self._start
        self.stream.write(f"\r{self._stage:<24} [{bar}] {self._done}/{self._total} {elapsed:6.1f}s")
        self.stream.flush()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False
