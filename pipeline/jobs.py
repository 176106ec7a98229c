"""Jobs: ``build`` = sources -> write -> [pyramid] -> [shard] -> [validate], and the journal.

A job runs its stages in order on the current Dask client and records each stage's
state in a small JSON journal (beside the store, on the same storage), which is what
``zv status`` reads and ``--resume`` continues from: stages already done are
skipped, and the write stage is idempotent (every cell is a whole object written
from the same plan, so re-running it rewrites identical bytes).
"""

from __future__ import annotations

import json
import time
import traceback
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

import zarr_vectors as zv
from pipeline import sources
from zarr_vectors.core.storage import Storage
from zarr_vectors.errors import InputError

KINDS = ("points", "graph", "skeleton", "mesh", "polylines", "streamlines")


@dataclass
class BuildSpec:
    """Everything a build job needs; plain data, so it can be shipped to a cluster."""

    kind: str
    inputs: list[str]
    out: str
    chunk_shape: float | list[float]
    bin_shape: float | list[float] | None = None
    pyramid: list[tuple[float, float]] = field(default_factory=list)
    shard_shape: int | None = None
    validate_level: int | None = None
    directed: bool = False
    link_store: str = "canonical"
    compressor: str = "zstd"
    storage_options: dict[str, Any] = field(default_factory=dict)
    overwrite: bool = False
    job_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def stages(self) -> list[str]:
        return (
            ["write"]
            + (["pyramid"] if self.pyramid else [])
            + (["shard"] if self.shard_shape else [])
            + (["validate"] if self.validate_level else [])
        )


class Journal:
    """The job's state: stages done, the running stage, results, the error if any."""

    def __init__(self, spec: BuildSpec) -> None:
        self.storage = Storage(spec.out.rstrip("/") + ".zvjob.json", spec.storage_options)
        self.state: dict[str, Any] = {"job_id": spec.job_id, "spec": asdict(spec), "stages": {}, "status": "pending"}

    @staticmethod
    def load(out: str, storage_options: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        storage = Storage(out.rstrip("/") + ".zvjob.json", storage_options)
        raw = storage.get("")
        return json.loads(raw) if raw is not None else None

    def resume_from(self, previous: dict[str, Any]) -> None:
        self.state["stages"] = {k: v for k, v in previous.get("stages", {}).items() if v.get("status") == "done"}

    def done(self, stage: str) -> bool:
        return self.state["stages"].get(stage, {}).get("status") == "done"

    def update(self, stage: str, **values: Any) -> None:
        self.state["stages"].setdefault(stage, {}).update(values)
        self.save()

    def set_status(self, status: str, **values: Any) -> None:
        self.state["status"] = status
        self.state.update(values)
        self.save()

    def save(self) -> None:
        self.storage.put("", json.dumps(self.state, indent=2, default=str).encode())


# ---------------------------------------------------------------------------
# loading inputs per kind
# ---------------------------------------------------------------------------
def _write_call(spec: BuildSpec) -> Callable[[], zv.WriteResult]:
    """Read the inputs lazily and return the writer call for the kind."""
    common: dict[str, Any] = {
        "chunk_shape": spec.chunk_shape,
        "bin_shape": spec.bin_shape,
        "compressor": spec.compressor,
        "storage_options": spec.storage_options,
        "overwrite": spec.overwrite,
    }
    opts = spec.storage_options
    if spec.kind == "points":
        table = sources.vertex_table(sources.read_table(spec.inputs, storage_options=opts))
        return lambda: zv.write_points(
            spec.out, table.positions, object_ids=table.object_ids, attributes=table.attributes, **common
        )
    if len(spec.inputs) != 2:
        raise InputError(f"zv build {spec.kind} takes two inputs (a vertex table and a record table), got {len(spec.inputs)}")
    vdf = sources.read_table(spec.inputs[0], storage_options=opts)
    rdf = sources.read_table(spec.inputs[1], storage_options=opts)
    if spec.kind == "graph":
        table = sources.vertex_table(vdf, with_ids=True)
        edges, edge_attrs = sources.resolve_ids(rdf, vdf, ["src", "dst"], what="edge")
        return lambda: zv.write_graph(
            spec.out, table.positions, edges, directed=spec.directed, store=spec.link_store,
            edge_attributes=edge_attrs, object_ids=table.object_ids, attributes=table.attributes, **common,
        )  # fmt: skip
    if spec.kind == "mesh":
        table = sources.vertex_table(vdf, with_ids=True)
        corners = [c for c in rdf.columns if len(c) == 1 and c.isalpha()]
        faces, face_attrs = sources.resolve_ids(rdf, vdf, sorted(corners), what="face")
        return lambda: zv.write_mesh(
            spec.out, table.positions, faces, face_attributes=face_attrs,
            object_ids=table.object_ids, attributes=table.attributes, **common,
        )  # fmt: skip
    raise InputError(f"zv build {spec.kind}: use a single vertex table with line/order (polylines) or id/parent (skeleton)")


def _single_table_call(spec: BuildSpec) -> Callable[[], zv.WriteResult]:
    """Polylines / streamlines (``line``, ``order``) and skeletons (``id``, ``parent``) from one table."""
    df = sources.read_table(spec.inputs, storage_options=spec.storage_options)
    common: dict[str, Any] = {
        "chunk_shape": spec.chunk_shape,
        "bin_shape": spec.bin_shape,
        "compressor": spec.compressor,
        "storage_options": spec.storage_options,
        "overwrite": spec.overwrite,
    }
    if spec.kind in ("polylines", "streamlines"):
        for c in ("line", "order"):
            if c not in df.columns:
                raise InputError(f"{spec.kind} table lacks column {c!r}; it has {list(df.columns)}")
        pdf = df.compute().sort_values(["line", "order"], kind="stable")
        table = sources.vertex_table(sources.dd.from_pandas(pdf, npartitions=1))
        lines = pdf["line"].to_numpy()
        offsets = np.r_[0, np.flatnonzero(lines[1:] != lines[:-1]) + 1, len(lines)]
        kind = "streamline" if spec.kind == "streamlines" else "polyline"
        return lambda: zv.write_polylines(
            spec.out, table.positions.compute(), offsets, kind=kind,
            attributes={k: v.compute() for k, v in table.attributes.items()}, **common,
        )  # fmt: skip
    if spec.kind == "skeleton":
        for c in ("id", "parent"):
            if c not in df.columns:
                raise InputError(f"skeleton table lacks column {c!r}; it has {list(df.columns)}")
        pdf = df.compute()
        index = {int(i): k for k, i in enumerate(pdf["id"].to_numpy())}
        if len(index) != len(pdf):
            raise InputError("skeleton node ids are not unique")
        try:
            parents = np.asarray([index[int(p)] if p >= 0 else -1 for p in pdf["parent"].to_numpy()], np.int64)
        except KeyError as exc:
            raise InputError(f"skeleton parent id {exc.args[0]} is not a node id") from None
        table = sources.vertex_table(sources.dd.from_pandas(pdf, npartitions=1))
        return lambda: zv.write_skeleton(
            spec.out, table.positions.compute(), parents,
            object_ids=table.object_ids.compute() if table.object_ids is not None else None,
            attributes={k: v.compute() for k, v in table.attributes.items()}, **common,
        )  # fmt: skip
    raise InputError(f"unknown kind {spec.kind!r}; expected one of {list(KINDS)}")


def writer_for(spec: BuildSpec) -> Callable[[], zv.WriteResult]:
    if spec.kind not in KINDS:
        raise InputError(f"unknown kind {spec.kind!r}; expected one of {list(KINDS)}")
    if spec.kind in ("points", "graph", "mesh"):
        return _write_call(spec)
    return _single_table_call(spec)


# ---------------------------------------------------------------------------
# running
# ---------------------------------------------------------------------------
@dataclass
class JobResult:
    job_id: str
    store: str
    stages: dict[str, dict[str, Any]]
    ok: bool
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _stage_functions(spec: BuildSpec) -> dict[str, Callable[[], dict[str, Any]]]:
    def write() -> dict[str, Any]:
        result = writer_for(spec)()
        return {k: v for k, v in asdict(result).items()}

    def pyramid() -> dict[str, Any]:
        zv.build_pyramid(spec.out, factors=spec.pyramid, storage_options=spec.storage_options)
        return {"levels": len(spec.pyramid) + 1}

    def shard() -> dict[str, Any]:
        zv.shard_store(spec.out, shard_shape=spec.shard_shape, storage_options=spec.storage_options)
        return {"shard_shape": spec.shard_shape}

    def validate() -> dict[str, Any]:
        from zarr_vectors.validate import validate as run_validate

        result = run_validate(spec.out, level=spec.validate_level, storage_options=spec.storage_options)
        if not result.ok:
            raise RuntimeError(f"validation at level {spec.validate_level} found {len(result.errors)} error(s): {result.errors[:3]}")
        return {"level": spec.validate_level, "errors": 0, "warnings": len(result.warnings)}

    return {"write": write, "pyramid": pyramid, "shard": shard, "validate": validate}


def run_build(spec: BuildSpec, *, resume: bool = False) -> JobResult:
    """Run the job's stages in order, journalling each; a failure is recorded, then raised."""
    journal = Journal(spec)
    if resume:
        previous = Journal.load(spec.out, spec.storage_options)
        if previous is None:
            raise InputError(f"nothing to resume: no job journal beside {spec.out!r}")
        journal.resume_from(previous)
        spec.overwrite = False if journal.done("write") else True  # a half-written store is rewritten
    journal.set_status("running", started=time.time())
    functions = _stage_functions(spec)
    for stage in spec.stages():
        if journal.done(stage):
            continue
        journal.update(stage, status="running", started=time.time())
        t0 = time.perf_counter()
        try:
            details = functions[stage]()
        except BaseException as exc:
            journal.update(stage, status="failed", error=f"{type(exc).__name__}: {exc}")
            journal.set_status("failed", error=f"{stage}: {type(exc).__name__}: {exc}",
                               traceback=traceback.format_exc(limit=5))
            raise
        journal.update(stage, status="done", seconds=round(time.perf_counter() - t0, 3), **details)
    journal.set_status("done", finished=time.time())
    return JobResult(spec.job_id, spec.out, journal.state["stages"], True)


def job_status(out: str, storage_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    state = Journal.load(out, storage_options)
    if state is None:
        raise InputError(f"no job journal beside {out!r}")
    return state


def plan_summary(spec: BuildSpec) -> dict[str, Any]:
    """What the write stage would do, without writing: the vertex plan (owners, cells, rows)."""
    from zarr_vectors.graphs import vertices as vx

    if spec.kind != "points":
        raise InputError("--dry-run currently plans point builds only")
    table = sources.vertex_table(sources.read_table(spec.inputs, storage_options=spec.storage_options))
    vspec, blocks = vx.normalise_vertex_inputs(
        table.positions, chunk_shape=spec.chunk_shape, bin_shape=spec.bin_shape, bounds=None,
        object_ids=table.object_ids, attributes=table.attributes, compressor=spec.compressor,
    )  # fmt: skip
    plan = vx.plan_vertices(vspec, blocks)
    owned = np.concatenate([plan.owner_cells(k) for k in range(len(plan.owners))]) if plan.owners else np.zeros(0)
    if not np.array_equal(np.sort(owned), plan.cells) or len(np.unique(owned)) != len(owned):
        raise RuntimeError("plan check failed: owners are not disjoint or do not cover every cell")
    return {"stages": spec.stages(), "vertices": vspec.n, **plan.describe()}


def parse_factors(values: Sequence[str]) -> list[tuple[float, float]]:
    """``--pyramid 2`` / ``2,4`` -> [(coarsen, sparsity)]."""
    out = []
    for v in values:
        parts = v.split(",")
        try:
            coarsen = float(parts[0])
            sparsity = float(parts[1]) if len(parts) > 1 else 1.0
        except (ValueError, IndexError):
            raise InputError(f"bad pyramid factor {v!r}: expected FACTOR or FACTOR,SPARSITY") from None
        out.append((coarsen, sparsity))
    return out


def run_detached(spec: BuildSpec, resume: bool = False) -> dict[str, Any]:
    """The job as one task on the cluster (``--detach``): it submits its own stages there.

    ``worker_client`` secedes from the worker's thread pool while the job waits on
    its stages, so the job task never starves the stages of threads.
    """
    from distributed import worker_client

    with worker_client() as client, client.as_current():
        return run_build(spec, resume=resume).to_json()
