"""Level 1 — every ``object_index/manifests`` chunk decoded, as one task per chunk.

The rows are summarised by :func:`zarr_vectors.encoding.summarize_manifest_rows` into small
tables that level 3 checks against the fragment counts; this module reads the chunks,
undoes their framing and turns every problem into an ``L1_MANIFEST_UNDECODABLE`` finding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import dask

from zarr_vectors import config
from zarr_vectors.encoding import (
    MAX_SID_NDIM,
    FramedItems,
    ManifestSummary,
    item_spans,
    merge_manifest_summaries,
    summarize_manifest_rows,
)
from zarr_vectors.errors import EncodingError, ResourceLimitError
from zarr_vectors.execution import runner
from zarr_vectors.format.bounds import manifest_chunk_bound
from zarr_vectors.format.schema import is_int
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.codecs import Compressor, decode_limit
from zarr_vectors.validation.findings import Finding, Report, crashed, make
from zarr_vectors.validation.structure import StoreModel, cell_key, grid_chunk_shape, key_parser


@dataclass
class ManifestCheck:
    """One manifests array (or chunk) checked: its findings and the summary level 3 uses."""

    findings: list[Finding] = field(default_factory=list)
    summary: ManifestSummary = field(default_factory=ManifestSummary)

    @classmethod
    def merge(cls, parts: list[ManifestCheck]) -> ManifestCheck:
        return cls([f for p in parts for f in p.findings], merge_manifest_summaries(p.summary for p in parts))


#: one stored manifests chunk to decode: (array path, key, chunk index, array document, sid_ndim,
#: the level's declared (num_present, vertex_count)) -- see :func:`manifest_jobs`
ManifestJob = tuple[str, str, int, dict[str, Any], int, tuple[Any, Any]]


def decode_manifest_chunk(
    storage: Storage, path: str, key: str, chunk_index: int, doc: dict[str, Any], sid_ndim: int,
    declared: tuple[Any, Any] = (None, None),
) -> ManifestCheck:
    """Decode one manifests chunk (all its rows); any failure is a finding, never an exception.

    ``declared`` is the level's ``(num_present, vertex_count)``: with them the chunk decodes with
    its bound from metadata (:func:`zarr_vectors.format.bounds.manifest_chunk_bound`), and one
    inflating past it is an ``L1_RESOURCE_LIMIT`` finding.  The summary keeps the runs of fragments
    each block names (level 3's ownership rules).
    """
    out = ManifestCheck()
    cell = str(chunk_index)
    try:
        try:
            chunk = read_manifest_chunk(storage, path, key, chunk_index, doc, sid_ndim, declared)
        except ResourceLimitError as exc:
            out.findings.append(make("L1_RESOURCE_LIMIT", path, f"chunk is not decoded: {exc}", cell=cell))
            return out
        except ManifestChunkError as exc:
            out.findings.append(make("L1_MANIFEST_UNDECODABLE", path, str(exc), cell=cell))
            return out
        if chunk is None:
            return out
        first, count, items = chunk
        out.summary = summarize_manifest_rows(items[:count], sid_ndim, first_row=first, count_named=True)
        out.findings.extend(make("L1_MANIFEST_UNDECODABLE", path, message) for message in out.summary.problems)
        for r, extra in enumerate(items[count:]):
            if extra:
                out.findings.append(make("L1_MANIFEST_UNDECODABLE", path, f"padding row {first + count + r} past the "
                                         f"array's {doc['shape'][0]} rows is not empty", cell=cell))
                break
    except Exception as exc:  # noqa: BLE001
        out.findings.append(crashed(1, path, exc, cell=cell, what="manifest decode"))
    return out


class ManifestChunkError(EncodingError):
    """A manifests chunk that does not decode to its rows (``L1_MANIFEST_UNDECODABLE``)."""


def read_manifest_chunk(
    storage: Storage, path: str, key: str, chunk_index: int, doc: dict[str, Any], sid_ndim: int,
    declared: tuple[Any, Any] = (None, None),
) -> tuple[int, int, FramedItems] | None:
    """One stored manifests chunk as ``(first row, rows of the array in it, all its items)``, decoded
    within its bound (:func:`decode_manifest_chunk`); None once it is gone.  Raises
    :class:`ManifestChunkError` or ``ResourceLimitError``."""
    rows_per_chunk = doc["chunk_grid"]["configuration"]["chunk_shape"][0]
    codecs = doc["codecs"]
    n_rows = int(doc["shape"][0])
    comp = Compressor.from_config(codecs[1], file=f"{path}/zarr.json", pointer="/codecs/1") if len(codecs) > 1 \
        else None
    first = chunk_index * rows_per_chunk
    count = max(0, min(rows_per_chunk, n_rows - first))
    raw = storage.get(key)
    if raw is None:
        return None
    limit = manifest_chunk_bound(count, rows_per_chunk, declared[0], declared[1], sid_ndim)
    try:
        items = item_spans(comp.decode(raw, limit=decode_limit(limit), where=key) if comp else raw)
    except ResourceLimitError:
        raise
    except Exception as exc:  # noqa: BLE001 - an undecodable chunk is a finding
        raise ManifestChunkError(f"chunk {key!r} does not decode: {exc}") from None
    if len(items) != rows_per_chunk:
        raise ManifestChunkError(f"chunk holds {len(items)} rows, expected {rows_per_chunk}")
    return first, count, items


def manifest_jobs(model: StoreModel, number: int) -> tuple[list[ManifestJob], list[Finding]]:
    """(path, key, chunk index, doc, sid_ndim, (num_present, vertex_count)) for every *stored*
    manifests chunk of a level, and the findings about the array's declared grid.

    Jobs come from the listing (``model.cells``), never from the declared shape: a shape of
    10^12 rows plans no more work than the chunks on storage.  A chunk the shape declares
    but storage lacks would read as rows of the fill value ``""``, which is no manifest.
    """
    path = f"{model.levels[number]}/object_index/manifests"
    node = model.nodes.get(path)
    group = model.nodes.get(f"{model.levels[number]}/object_index")
    if node is None or node.doc is None or node.node_type != "array":
        return [], []
    doc = node.doc
    # the level's chunk-key rank; an object_index sid_ndim that disagrees is a level-2 finding
    rank = model.grid_rank(number)
    sid = group.attrs.get("sid_ndim") if group else None
    if not is_int(sid) or sid < 1 or (rank is not None and sid != rank):
        sid = rank or 0
    shape = doc.get("shape")
    grid = grid_chunk_shape(doc)
    parser = key_parser(doc)
    if parser is None:
        return [], []  # the chunk key encoding is reported at level 1 or 2
    if not (isinstance(shape, list) and len(shape) == 1 and grid is not None and len(grid) == 1
            and is_int(shape[0]) and shape[0] >= 0 and is_int(grid[0]) and grid[0] >= 1
            and 1 <= sid <= MAX_SID_NDIM):
        return [], [make("L1_MANIFEST_UNDECODABLE", path, "manifests must be a 1-D variable_length_bytes array "
                         "chunked along its rows, and object_index needs sid_ndim")]
    n_chunks = -(-shape[0] // grid[0])
    max_chunks = int(config.get("limits.max-declared-chunks"))
    if n_chunks > max_chunks:
        return [], [make("L1_RESOURCE_LIMIT", path, f"shape {shape} in chunks of {grid} declares {n_chunks} chunks, "
                         f"more than zarr_vectors.limits.max-declared-chunks ({max_chunks}): a reader refuses it",
                         pointer="/shape")]
    prefix, sep = parser
    stored = sorted(index[0] for index in model.cells.get(path, {}) if len(index) == 1 and index[0] < n_chunks)
    findings = []
    if len(stored) < n_chunks:
        missing = next((i for i, c in enumerate(stored) if c != i), len(stored))
        findings.append(make("L1_MANIFEST_UNDECODABLE", path, f"{n_chunks - len(stored)} of its {n_chunks} chunks "
                             f"are not stored (the first is chunk {missing}): their rows would be the fill value "
                             "'', which is no manifest", cell=str(missing)))
    declared = (group.attrs.get("num_present") if group else None, model.level_attrs(number).get("vertex_count"))
    return [(path, cell_key(path, (i,), prefix, sep), i, doc, sid, declared) for i in stored], findings


def shared_fragments(model: StoreModel, number: int) -> bool:
    """Whether a level may name one fragment in several manifests (``shared_fragments: true``;
    never level 0, where each vertex has one owner)."""
    return number > 0 and model.level_attrs(number).get("shared_fragments") is True


def start_manifests(model: StoreModel, report: Report) -> dict[int, list[Any]]:
    """Submit the decode tasks of every level's manifests without waiting for them (the client
    checks metadata meanwhile); :func:`collect_manifests` waits and keeps the summaries."""
    report.ran_rule("L1_MANIFEST_UNDECODABLE")
    per_level: dict[int, list[Any]] = {}
    report.ran_rule("L1_RESOURCE_LIMIT")
    for number in sorted(model.levels):
        jobs, findings = manifest_jobs(model, number)
        report.extend(findings)
        if not jobs:
            continue
        storage_d = dask.delayed(model.storage, traverse=False)
        per_level[number] = [
            dask.delayed(decode_manifest_chunk, pure=False)(storage_d, path, key, i, doc, sid, declared)
            for path, key, i, doc, sid, declared in jobs
        ]
    if not per_level:
        return {}
    levels = sorted(per_level)
    started = runner.start(*[part for n in levels for part in per_level[n]], stage="manifests")
    out, at = {}, 0
    for n in levels:
        out[n], at = started[at : at + len(per_level[n])], at + len(per_level[n])
    return out


def collect_manifests(per_level: dict[int, list[Any]], report: Report) -> dict[int, ManifestCheck]:
    """The summaries of :func:`start_manifests`' tasks, their findings added to ``report``."""
    if not per_level:
        return {}
    try:
        computed = runner.compute("manifests", per_level)[0]
    except Exception as exc:  # noqa: BLE001
        report.add(crashed(1, "/", exc, what="manifest decode"))
        return {}
    out = {}
    for number, parts in computed.items():
        merged = ManifestCheck.merge(parts)
        report.extend(merged.findings)
        out[number] = merged
    return out
