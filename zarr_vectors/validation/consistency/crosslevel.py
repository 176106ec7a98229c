"""Level 5 — a pyramid's ``-N`` records mirror its ``+N`` records.

Between a fine level N and a coarse level N + d, ``links/+d`` at level N holds a record
``[fine vi, coarse vi]`` per fine vertex and ``links/-d`` at level N + d the same pairs
turned around (``docs/format.md`` §8.1); a reader going down the pyramid follows the one, a
reader going up the other, so where they disagree the two directions give different
answers.  The level-3 link tasks of both families digest their records as ``(fine chunk,
fine vi, coarse chunk, coarse vi)`` (:func:`mirror_rows`, ``cells.Digest``); a task per pair
of families adds and compares the digests, and only when they differ reads both families
again to name the first record without its mirror.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from zarr_vectors.errors import ResourceLimitError, ZarrVectorsError
from zarr_vectors.format.paths import format_chunk_key, format_delta
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.groups import open_level
from zarr_vectors.validation.consistency.cells import Digest, digest_sum, multiset_difference, stored_pairs
from zarr_vectors.validation.findings import Finding, crashed, make


class MirroredRecords(Protocol):
    """A level-3 link task's result: the digest of its cross-level records."""

    mirror: Digest


def mirror_rows(rows: np.ndarray, delta: int) -> np.ndarray:
    """Width-2 records ``(chunk_0, vi_0, chunk_1, vi_1)`` as ``(fine chunk, fine vi, coarse chunk,
    coarse vi)``: a ``-d`` record turned around, a ``+d`` one as stored."""
    half = rows.shape[1] // 2
    return rows if delta > 0 else np.concatenate([rows[:, half:], rows[:, :half]], axis=1)


def mirror_findings(storage: Storage, fine: int, delta: int, up_parts: int, *parts: MirroredRecords) -> list[Finding]:
    """``L5_CROSS_LEVEL_MIRROR`` for ``links/+delta`` at level ``fine`` and ``links/-delta`` at
    level ``fine + delta``, from their link tasks' digests (the first ``up_parts`` parts are +delta's)."""
    if digest_sum(p.mirror for p in parts[:up_parts]) == digest_sum(p.mirror for p in parts[up_parts:]):
        return []
    where = f"{fine + delta}/links/{format_delta(-delta)}"
    try:  # which records differ: read again, only when wrong
        ups = _rows(storage, fine, delta)
        downs = _rows(storage, fine + delta, -delta)
    except ResourceLimitError as exc:
        return [make("L5_CROSS_LEVEL_MIRROR", where, f"the records do not mirror links/{format_delta(delta)} at "
                     f"level {fine} (their digests differ); too large to name them: {exc}")]
    except ZarrVectorsError as exc:  # a part level 3 reports too; said here, never a silent pass
        return [make("L5_CROSS_LEVEL_MIRROR", where, f"could not be compared with links/{format_delta(delta)} at "
                     f"level {fine}: {exc}")]
    except Exception as exc:  # noqa: BLE001
        return [crashed(5, where, exc, what="cross-level mirror")]
    missing, extra = multiset_difference(ups, downs), multiset_difference(downs, ups)
    if not (len(missing) or len(extra)):
        return []  # the digests missed a cell a level-3 task could not decode: that task's finding says so
    example = (missing if len(missing) else extra)[0].tolist()
    d = (len(example) - 2) // 2
    first = (f"fine {format_chunk_key(example[:d])} row {example[d]} <-> coarse "
             f"{format_chunk_key(example[d + 1 : -1])} row {example[-1]}")
    return [make("L5_CROSS_LEVEL_MIRROR", where, f"{len(missing)} records of links/{format_delta(delta)} at level "
                 f"{fine} have no mirror here and {len(extra)} here have none there (first: {first}, "
                 f"{'there' if len(missing) else 'here'}): going down and going up the pyramid disagree")]


def _rows(storage: Storage, number: int, delta: int) -> np.ndarray:
    return mirror_rows(stored_pairs(open_level(storage, number), delta), delta)
