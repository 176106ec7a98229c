"""Level 4 — a polyline level's bridges agree with its manifests.

A polyline or streamline level stores each line's vertices as runs (fragments), in
the order its manifest names them, and a delta-0 record -- a bridge -- from the last vertex
of each run to the first of the next wherever the two lie in different chunks
(``docs/format.md`` §8).  The reader assembles lines from the manifests alone, so a store
whose bridges say otherwise reads back as other lines than its links describe.  The check
compares the two as multisets -- unordered pairs for an undirected family -- by digests
(``cells.Digest``: a count and two sums of row hashes): a task per manifests chunk digests the
bridges its rows imply (from each fragment's first and last row, which the level-3 vertex
tasks keep), the level-3 link tasks digest the records they decode anyway
(:func:`bridge_rows`), and a small task adds and compares them.  Only a mismatch is worked out
row by row, reading the level again (:func:`bridge_findings`, also the whole check of a
level without a usable delta-0 family).  Line stores are not held to it: the reference's
line writer stores fragment indices where the bridges name rows (D12,
``format.kinds.ROW_BRIDGED_KINDS``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np

from zarr_vectors.encoding import FragmentIndex, decode_manifest_table, group_rows
from zarr_vectors.errors import ResourceLimitError, ZarrVectorsError
from zarr_vectors.format import bounds
from zarr_vectors.format.paths import format_chunk_key
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.grid import read_cells_many
from zarr_vectors.store.groups import Level, open_level
from zarr_vectors.store.link_family import link_family_policy
from zarr_vectors.store.object_index import ObjectIndex, read_object_index
from zarr_vectors.validation.consistency.cells import (
    Digest,
    digest_sum,
    multiset_difference,
    row_hashes,
    stored_pairs,
)
from zarr_vectors.validation.consistency.vertices import VertexResult
from zarr_vectors.validation.findings import Finding, crashed, make
from zarr_vectors.validation.manifests import ManifestChunkError, ManifestJob, read_manifest_chunk

T = TypeVar("T")


@dataclass(frozen=True)
class RunEnds:
    """A level's fragments' first and last rows, per chunk, from its vertex tasks (merged once:
    every manifests chunk's task takes them), and how many fragments the level has."""

    ends: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]]
    fragments: int


def merge_run_ends(*vertex_parts: VertexResult) -> RunEnds:
    ends = {c: e for part in vertex_parts for c, e in part.run_ends.items()}
    return RunEnds(ends, sum(len(first) for first, _ in ends.values()))


def implied_bridges(storage: Storage, number: int, job: ManifestJob, directed: bool, shared: bool, seed: int,
                    run_ends: RunEnds) -> Digest | list[Finding]:
    """The digest of the bridges one manifests chunk's rows imply (:func:`bridge_rows`; a line is
    one row, so its bridges lie in one chunk), or the finding that ends the check.  Reads that
    chunk.  Where no fragment is ``shared``, its rows name at most the level's fragments: a
    mode-1 block naming more is refused before it is expanded."""
    def implied() -> Digest:
        chunk = read_manifest_chunk(storage, *job)
        if chunk is None:
            raise ManifestChunkError(f"{job[1]} vanished while validating")
        _, count, items = chunk  # rows numbered in the chunk: a line is one row
        most = None if shared else run_ends.fragments
        blocks = decode_manifest_table(items[:count], job[4], max_fragments=most)
        return Digest.of(bridge_rows(_bridge_rows(*blocks, run_ends.ends), directed), seed)
    return _guarded(number, implied)


class DigestedRecords(Protocol):
    """A level-3 link task's result: the digest of its records as bridges."""

    bridges: Digest


def compare_bridges(storage: Storage, number: int, allow_layouts: tuple[str, ...], implied_parts: int,
                    *parts: Digest | list[Finding] | DigestedRecords) -> list[Finding]:
    """``L4_POLYLINE_BRIDGES`` from the first ``implied_parts`` parts (:func:`implied_bridges`) and the
    link tasks' digests of the stored records after them (a duplicate family's digested once per
    record: the copy its first endpoint's chunk holds)."""
    implied, stored = parts[:implied_parts], parts[implied_parts:]
    ended = [f for part in implied if isinstance(part, list) for f in part]
    if ended:
        return ended[:1]
    if digest_sum(implied) == digest_sum(part.bridges for part in stored):
        return []
    return bridge_findings(storage, number, allow_layouts)  # which rows differ, read again: only when wrong


def bridge_rows(rows: np.ndarray, directed: bool) -> np.ndarray:
    """Bridge rows ``(chunk_a, row_a, chunk_b, row_b)`` as both sides of the comparison digest
    them: an undirected family's endpoints in a fixed order."""
    return rows if directed else _unordered(rows)


def bridge_findings(storage: Storage, number: int, allow_layouts: tuple[str, ...]) -> list[Finding]:
    """``L4_POLYLINE_BRIDGES`` for one level, row by row, naming the first bridge that differs."""
    def compare() -> list[Finding]:
        level = open_level(storage, number)
        objects = read_object_index(level, allow_layouts=allow_layouts)
        policy = link_family_policy(level, 0)
        if objects is None or (policy is None and number > 0):  # coarse levels may keep no bridges
            return []
        expected = _implied_bridges(level, objects)
        stored = stored_pairs(level, 0) if policy is not None else np.zeros((0, expected.shape[1]), np.int64)
        if policy is not None and not policy.directed:
            expected, stored = _unordered(expected), _unordered(stored)
        if policy is not None and policy.store == "duplicate":
            stored = np.unique(stored, axis=0)
        if _same_rows(expected, stored):
            return []
        return _difference_finding(number, multiset_difference(expected, stored),
                                   multiset_difference(stored, expected))
    return _guarded(number, compare)


def _guarded(number: int, check: Callable[[], T]) -> T | list[Finding]:
    """A part that does not decode is a finding too: the check did not run, never a silent pass."""
    path = str(number)
    try:
        return check()
    except ResourceLimitError as exc:  # a level too large to compare in one task is not wrong: said, not failed
        return [make("L4_POLYLINE_BRIDGES", f"{path}/links/0", f"the bridges were not compared with the manifests: "
                     f"{exc}", severity="warning")]
    except ZarrVectorsError as exc:  # often a part level 3 reports too
        return [make("L4_POLYLINE_BRIDGES", f"{path}/links/0", f"the bridges could not be compared with the "
                     f"manifests: {exc}")]
    except Exception as exc:  # noqa: BLE001
        return [crashed(4, path, exc, what="polyline bridges")]


def _difference_finding(number: int, missing: np.ndarray, extra: np.ndarray) -> list[Finding]:
    if not (len(missing) or len(extra)):
        return []
    example = (missing if len(missing) else extra)[0].tolist()
    d = (len(example) - 2) // 2
    first = (f"{format_chunk_key(example[:d])} row {example[d]} -> {format_chunk_key(example[d + 1 : -1])} "
             f"row {example[-1]}")
    return [make("L4_POLYLINE_BRIDGES", f"{number}/links/0", f"{len(missing)} bridges the manifests' runs imply are "
                 f"not stored and {len(extra)} stored records join no consecutive runs (first: {first}, "
                 f"{'implied' if len(missing) else 'stored'}): the lines read back are not the ones the links "
                 "describe")]


def _implied_bridges(level: Level, objects: ObjectIndex) -> np.ndarray:
    """The level's implied bridges (:func:`_bridge_rows`), read through the store's own API."""
    ids, chunks, frags = objects.blocks_table()
    grid = level.array("vertex_fragments")
    present = set(grid.nonempty_chunk_coords())
    wanted = [c for c in map(tuple, np.unique(chunks, axis=0).tolist()) if c in present] if len(ids) else []
    limit = bounds.fragment_index_bound(level.meta.vertex_count)  # no cell inflates past what the level holds
    payloads = read_cells_many([(grid, c) for c in wanted], required=True, max_payload_bytes=[limit] * len(wanted))
    ends = {c: FragmentIndex.decode(payload).first_last_rows() for c, payload in zip(wanted, payloads)}
    return _bridge_rows(ids, chunks, frags, ends)


def _bridge_rows(ids: np.ndarray, chunks: np.ndarray, frags: np.ndarray,
                 ends: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """(b, 2 D + 2) rows ``(chunk_a, last row of run a, chunk_b, first row of run b)`` for
    consecutive non-empty runs of one line in different chunks, in manifest order: from the blocks
    ``(line, chunk, fragment)`` and each chunk's fragments' first and last rows
    (``FragmentIndex.first_last_rows``)."""
    d = chunks.shape[1] if chunks.ndim == 2 else 0
    if not len(ids):
        return np.zeros((0, 2 * d + 2), dtype=np.int64)
    order, starts = group_rows(chunks)  # the blocks by chunk
    groups = np.r_[starts, len(order)]
    first = np.full(len(ids), -1, dtype=np.int64)
    last = first.copy()
    for k, key in enumerate(map(tuple, chunks[order[starts]].tolist())):  # one step per chunk, the blocks vectorised
        if key not in ends:
            continue  # a chunk without a FragmentIndex: level 3's L3_MANIFEST_CHUNK_MISSING
        run_first, run_last = ends[key]
        blocks = order[groups[k] : groups[k + 1]]
        f = frags[blocks]
        inside = (f >= 0) & (f < len(run_first))
        first[blocks[inside]], last[blocks[inside]] = run_first[f[inside]], run_last[f[inside]]
    kept = np.flatnonzero(first >= 0)  # the non-empty runs
    a, b = kept[:-1], kept[1:]
    bridge = (ids[a] == ids[b]) & (chunks[a] != chunks[b]).any(axis=1)
    a, b = a[bridge], b[bridge]
    return np.column_stack([chunks[a], last[a], chunks[b], first[b]]).astype(np.int64)


def _unordered(pairs: np.ndarray) -> np.ndarray:
    """Each row's two endpoints in a fixed order (the smaller, as a tuple, first)."""
    if not len(pairs):
        return pairs
    half = pairs.shape[1] // 2
    a, b = pairs[:, :half], pairs[:, half:]
    differ = a != b
    first_diff = np.argmax(differ, axis=1)
    rows = np.arange(len(pairs))
    swap = differ.any(axis=1) & (a[rows, first_diff] > b[rows, first_diff])
    out = pairs.copy()
    out[swap] = np.column_stack([b[swap], a[swap]])
    return out


def _same_rows(left: np.ndarray, right: np.ndarray) -> bool:
    """Whether two row sets are equal as multisets, by sorted 64-bit row hashes: one sort each (a
    whole store's thousands of bridges; np.unique over rows was most of the check's time).  Only
    a mismatch is worked out exactly (``multiset_difference``)."""
    if left.shape != right.shape:
        return False
    return bool(np.array_equal(np.sort(row_hashes(left)), np.sort(row_hashes(right))))
