"""Snapshot of a local directory, for byte-for-byte store comparisons in tests.

Importable from every test folder: pytest puts ``tests/`` on ``sys.path`` for the root
``conftest.py``.
"""

from __future__ import annotations

import os
from pathlib import Path


def tree(root: Path) -> dict[str, bytes]:
    """Every file below ``root`` (relative posix path -> bytes)."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            full = Path(dirpath) / f
            out[full.relative_to(root).as_posix()] = full.read_bytes()
    return out
