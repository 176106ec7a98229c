"""Jobs: ``build`` = sources -> write -> [pyramid] -> [shard] -> [consolidate] -> [validate], and the journal.

A job runs its stages in order on the current Dask client and records each stage's
state in a small JSON journal (beside the store, on the same storage), which is what
``zv status`` reads and ``--resume`` continues from: stages already done are
skipped, and the write stage is idempotent (every cell is a whole object written
from the same plan, so re-running it rewrites identical bytes).
"""

from __future__ import annotations

import json
import os
import time
import traceback
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import dask
import numpy as np

import zarr_vectors as zv
from pipeline.journal import (  # noqa: F401 - job_status: the jobs API
    Journal,
    heard_from,
    job_status,
    journalled_spec,
    process_gone,
    process_state,
    this_process,
)
from zarr_vectors import config
from zarr_vectors.errors import InputError, StageFailedError, StoreExistsError, ValidationFailedError, describe
from zarr_vectors.store.backend import Storage, local_path
from zarr_vectors.store.groups import refuse_foreign_entries

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
    aggregate: dict[str, str] = field(default_factory=dict)  # vertex attribute -> reduction (D22)
    shard_shape: int | list[int] | None = None  # cells per shard: one for every axis, or one per axis
    validate_level: int | None = None
    consolidate: bool = False  # copy every node's metadata into the root (one read to open, for zarr readers)
    directed: bool = False
    link_store: str = "canonical"
    compressor: str = "zstd"
    storage_options: dict[str, Any] = field(default_factory=dict)
    overwrite: bool = False
    columns: dict[str, Any] = field(default_factory=dict)  # ColumnMap.to_json(): which input column is what
    job_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def __post_init__(self) -> None:
        """Local paths made absolute here, in the client: the spec travels to a cluster
        (``--detach``), whose processes run in other directories."""
        self.inputs = [_located(p) for p in self.inputs]
        self.out = _located(self.out)

    def stages(self) -> list[str]:
        return (
            ["write"]
            + (["pyramid"] if self.pyramid else [])
            + (["shard"] if self.shard_shape else [])
            + (["consolidate"] if self.consolidate else [])
            + (["validate"] if self.validate_level else [])
        )


def _located(path: str) -> str:
    """A local path or ``file://`` / ``local://`` URL made absolute (``file://rel.zv`` was read on a
    worker from its own directory); other URLs as given."""
    local = local_path(path)
    if local is None:
        return path
    scheme, sep, _ = path.partition("://")
    return f"{scheme}://{local}" if sep else local


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
    journal_requests: dict[str, Any] | None = None  # the journal's own saves, apart from every stage's requests

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _stage_functions(spec: BuildSpec) -> dict[str, Callable[[], dict[str, Any]]]:
    def write() -> dict[str, Any]:
        from pipeline.inputs import writer_for  # the input readers: imported by a build, not by a status query

        result = writer_for(spec)()
        return {k: v for k, v in asdict(result).items()}

    def pyramid() -> dict[str, Any]:
        zv.build_pyramid(
            spec.out, factors=spec.pyramid, aggregate=spec.aggregate or None, storage_options=spec.storage_options
        )
        return {"levels": len(spec.pyramid) + 1}

    def shard() -> dict[str, Any]:
        zv.shard_store(spec.out, shard_shape=spec.shard_shape, storage_options=spec.storage_options)
        return {"shard_shape": spec.shard_shape}

    def consolidate() -> dict[str, Any]:
        return {"nodes": zv.consolidate_store(spec.out, storage_options=spec.storage_options)}

    def validate() -> dict[str, Any]:
        result = zv.validate(spec.out, level=spec.validate_level, storage_options=spec.storage_options)
        if not result.ok:
            raise ValidationFailedError(f"validation at level {spec.validate_level} found {len(result.errors)} error(s): {result.errors[:3]}")
        return {"level": spec.validate_level, "errors": 0, "warnings": len(result.warnings)}

    return {"write": write, "pyramid": pyramid, "shard": shard, "consolidate": consolidate, "validate": validate}


#: Spec fields a resumed job must share with the journalled one (everything that decides
#: what the stages already done wrote); ``validate_level`` and ``consolidate`` may change on resume.
RESUME_FIELDS = ("kind", "inputs", "out", "chunk_shape", "bin_shape", "pyramid", "aggregate", "shard_shape",
                 "directed", "link_store", "compressor", "columns")


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _input_size(path: str, storage_options: Mapping[str, Any], kind: str | None = None) -> int:
    """Bytes of one input (a file, a glob of them, a Parquet dataset directory); InputError when there is none."""
    import glob

    import fsspec

    from zarr_vectors.io import registry

    registry.format_for(path, kind)  # an unknown suffix is a usage error too
    local = local_path(path)
    remote = local is None
    if local is not None and not glob.has_magic(local) and os.path.isfile(local):
        return os.path.getsize(local)
    fs, fspath = fsspec.core.url_to_fs(path, **(dict(storage_options) if remote else {}))
    found = fs.glob(fspath) if glob.has_magic(fspath) else [fspath] if fs.exists(fspath) else []
    if not found:
        raise InputError(f"input not found: {path!r}")
    return sum(int(fs.du(p, total=True)) for p in found)


def _check_output(spec: BuildSpec) -> None:
    """A local output path must be a directory (or not exist yet) below a writable directory,
    holding none of the inputs."""
    out = local_path(spec.out)  # as the store's Storage reads it
    if out is None:
        return
    if os.path.exists(out) and not os.path.isdir(out):
        raise InputError(f"output {spec.out!r} is a file, not a store directory")
    inside = os.path.realpath(out) + os.sep
    for source in spec.inputs:
        local = local_path(source)
        if local is not None and os.path.realpath(local).startswith(inside):
            raise InputError(f"input {source!r} lies inside the output {spec.out!r}, which the build replaces")
    parent = os.path.dirname(os.path.abspath(out))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"output {spec.out!r}: cannot create it, {parent!r} is not a writable directory")


def preflight(spec: BuildSpec, *, resume: bool = False, writes: bool = True) -> tuple[int, list[str]]:
    """Every check that needs no data pass, before a journal or a store is touched.

    Raises InputError / StoreExistsError / StoreNotFoundError (exit 2 on the command
    line; on the command line, before any cluster starts): an unknown kind, a bad chunk
    or bin shape (of another rank than the input's axes, a bin that does not divide the
    chunk), a wrong number of inputs,
    an input that does not exist or cannot be read, a column the mapping names that it
    lacks, an output path that cannot be a store, an unreachable output location, or an
    existing store without ``overwrite`` (a refused build must not overwrite the journal
    of the job that wrote that store), and -- for a build that ``writes`` -- a store another
    running job holds.  Returns the inputs' size in bytes (what decides threads or a
    cluster) and the warnings naming input columns that cannot be stored.
    """
    if spec.kind not in KINDS:
        raise InputError(f"unknown kind {spec.kind!r}; expected one of {list(KINDS)}")
    for what, value in (("chunk shape", spec.chunk_shape), ("bin shape", spec.bin_shape)):
        values = [] if value is None else [value] if np.isscalar(value) else list(value)
        if value is not None and not (values and all(np.isfinite(v) and v > 0 for v in values)):
            raise InputError(f"{what} entries must be finite and > 0, found {value!r}")
    from pipeline import inputs

    inputs.check_arity(spec)
    if spec.aggregate and not spec.pyramid:
        raise InputError("--aggregate says how coarse levels reduce attributes: it needs --pyramid")
    if spec.pyramid:
        from zarr_vectors.pyramid.plan import check_factors

        base_bin = spec.bin_shape if spec.bin_shape is not None else spec.chunk_shape
        check_factors(spec.pyramid, base_bin=[base_bin] if np.isscalar(base_bin) else base_bin)
    if spec.shard_shape is not None:
        values = [spec.shard_shape] if np.isscalar(spec.shard_shape) else list(spec.shard_shape)
        if not values or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1
                                 for v in values):
            raise InputError(f"shard shape must be N or N,N,... positive numbers of cells, found {spec.shard_shape!r}")
    _check_output(spec)
    storage = Storage(spec.out, spec.storage_options)
    storage.check_reachable()
    size = sum(_input_size(path, spec.storage_options, spec.kind) for path in spec.inputs)
    existing = [] if resume else storage.list_dir("")
    if existing and not spec.overwrite:
        raise StoreExistsError(f"{spec.out!r} already exists; pass --overwrite to replace it{_unfinished_job(spec)}")
    refuse_foreign_entries(storage, existing)
    if writes:  # a dry run plans beside a running job without touching its store
        _refuse_a_running_job(spec)
    return size, inputs.check_inputs(spec, size)


def _refuse_a_running_job(spec: BuildSpec) -> None:
    """One writer per store: refused while the journal beside it says another job is running and
    that job still holds the store -- its process, where this host can ask, lives; elsewhere its
    journal was saved within the heartbeat lease.  Two jobs on one output (``--overwrite`` or
    ``--resume`` while the first ran) deleted the store, or left it without level 0 under a
    journal saying done.  The journal's own job id is this job's task, which the scheduler
    re-runs after a worker died: not refused.  A damaged journal is no claim."""
    try:
        state = Journal.load(spec.out, spec.storage_options)
    except InputError:
        return
    if state is None or state["status"] != "running" or state["job_id"] == spec.job_id:
        return
    process, silent = state.get("process"), heard_from(state)
    alive = process_state(process)
    lease = 4 * float(config.get("jobs.heartbeat"))
    if alive == "gone" or (alive == "unknown" and (silent is None or silent >= lease)):
        return  # known ended, or another host's or container's and not heard from: no claim
    where = f" (pid {process.get('pid')} on {process.get('host')})" if isinstance(process, dict) else ""
    heard = f", last saved {silent:.0f} s ago" if silent is not None else ""
    raise StoreExistsError(
        f"{spec.out!r} is being written by job {state['job_id']}{where}, whose journal says running{heard}: wait "
        f"for it (zv status {state['job_id']}); a job on another host or in another container that stopped "
        f"saving its journal for {lease:.0f} s no longer holds the store"
    )


def resumed_job_id(spec: BuildSpec) -> str:
    """The id a ``--resume`` of ``spec.out`` runs under: the journalled job's (its own when none is)."""
    state = Journal.load(spec.out, spec.storage_options)
    return str(state["job_id"]) if state is not None else spec.job_id


def _unfinished_job(spec: BuildSpec) -> str:
    """The ``--resume`` hint for an existing store, when its journal says a job stopped while writing
    it; nothing for a finished job's store, a store without a journal or a damaged one."""
    try:
        state = Journal.load(spec.out, spec.storage_options)
    except zv.ZarrVectorsError:  # a damaged journal: the refusal says only what is certain
        return ""
    if state is None or state["status"] == "done":
        return ""
    gone = "; its process is gone" if state["status"] == "running" and process_gone(state.get("process")) else ""
    unfinished = [name for name, stage in state["stages"].items() if stage.get("status") != "done"]
    where = f" in its {unfinished[0]} stage" if unfinished else ""
    return f" (or --resume to finish job {state['job_id']}, whose journal says {state['status']}{where}{gone})"


class JournalProgress:
    """Runner callback: the running stage's step and task counts, saved to the journal.

    Saves at each step's start and end and at most every ``interval`` seconds between,
    so ``zv status`` shows progress for detached jobs too.
    """

    def __init__(self, journal: Journal, stage: str, interval: float = 1.0) -> None:
        self.journal, self.stage, self.interval = journal, stage, interval
        self._last = 0.0

    def _set(self, force: bool, **values: Any) -> None:
        self.journal.state["stages"].setdefault(self.stage, {}).update(values)
        now = time.monotonic()
        if force or now - self._last >= self.interval:
            self._last = now
            self.journal.save()

    def on_stage_start(self, step: str, tasks: int) -> None:
        self._set(True, step=step, tasks_done=0, tasks_total=tasks)

    def on_task_end(self, step: str) -> None:
        info = self.journal.state["stages"].get(self.stage, {})
        self._set(False, tasks_done=int(info.get("tasks_done", 0)) + 1)

    def on_stage_end(self, step: str) -> None:
        info = self.journal.state["stages"].get(self.stage, {})
        self._set(True, tasks_done=int(info.get("tasks_total", 0)))


def run_build(spec: BuildSpec, *, resume: bool = False) -> JobResult:
    """Run the job's stages in order, journalling each; a failure is recorded, then raised as
    :class:`StageFailedError` naming the stage (its ``cause`` is what the stage raised).

    ``resume``: continue the job journalled beside ``spec.out`` (same job id; its spec
    must match in every field that decides what was written); stages done are skipped,
    and an unfinished write is redone from scratch (a half-written store is replaced).
    """
    from zarr_vectors.execution.runner import frozen_heap

    with frozen_heap():
        return _run_build(spec, resume)


def _run_build(spec: BuildSpec, resume: bool) -> JobResult:
    preflight(spec, resume=resume)
    previous = None
    if resume:
        previous = Journal.load(spec.out, spec.storage_options)
        if previous is None:
            raise InputError(f"nothing to resume: no job journal beside {spec.out!r}")
        mine, theirs = _plain(asdict(spec)), previous.get("spec", {})
        changed = [k for k in RESUME_FIELDS if mine.get(k) != theirs.get(k)]
        if changed:
            raise InputError(
                f"--resume: the job journalled beside {spec.out!r} ran with other arguments "
                + ", ".join(f"{k}={theirs.get(k)!r} (now {mine.get(k)!r})" for k in changed)
            )
        spec.job_id = previous.get("job_id", spec.job_id)
    journal = Journal(spec)
    try:
        _run_stages(spec, journal, previous)
    except BaseException as exc:
        try:
            journal.close()  # the failure is on storage before it is raised
        except Exception as lost:  # noqa: BLE001 - the stage's failure is what is raised; this is said with it
            exc.add_note(f"the job journal beside {spec.out!r} could not be saved: {describe(lost)}")
        raise
    journal.close()
    return JobResult(spec.job_id, spec.out, journal.state["stages"], True,
                     journal_requests=journal.requests.counts.to_json())


def _run_stages(spec: BuildSpec, journal: Journal, previous: dict[str, Any] | None) -> None:
    """The stages not done yet, in order, each journalled (the caller flushes the journal), the
    journal's heartbeat going while they run."""
    if previous is not None:
        journal.resume_from(previous)
        spec.overwrite = False if journal.done("write") else True  # a half-written store is rewritten
        journal.state["spec"] = journalled_spec(spec)
    journal.set_status("running", started=time.time(), error=None, process=this_process())
    with journal.beating():
        _run_stage_list(spec, journal)
    journal.set_status("done", finished=time.time())


def _run_stage_list(spec: BuildSpec, journal: Journal) -> None:
    """Each stage not done yet: journalled running before it touches the store, then done or failed."""
    from zarr_vectors import count_requests
    from zarr_vectors.execution.runner import callbacks

    functions = _stage_functions(spec)
    for stage in spec.stages():
        if journal.done(stage):
            continue
        journal.update(stage, status="running", started=time.time())
        # on storage before the stage touches the store: a journal never says a stage is done,
        # or shows an earlier job, while the store is being changed (one round trip a stage)
        journal.flush()
        t0 = time.perf_counter()
        tally = None
        try:
            with count_requests() as tally, callbacks(JournalProgress(journal, stage)):
                details = functions[stage]()
        except BaseException as exc:
            step = str(journal.state["stages"].get(stage, {}).get("step", ""))
            journal.update(stage, status="failed", error=f"{type(exc).__name__}: {exc}", error_type=type(exc).__name__,
                           **({"requests": tally.to_json()} if tally is not None else {}))
            journal.set_status("failed", error=f"{stage}: {type(exc).__name__}: {exc}",
                               traceback=traceback.format_exc(limit=5))
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            if stage == "write" and isinstance(exc, InputError) and not any(p in str(exc) for p in spec.inputs):
                # the writer checks arrays ("positions row 1 is not finite"): say where they came from
                exc.add_note(f"input: {', '.join(spec.inputs)}")
            raise StageFailedError(stage, exc, step=step) from exc
        journal.update(stage, status="done", seconds=round(time.perf_counter() - t0, 3), **details,
                       requests=tally.to_json())


def plan_summary(spec: BuildSpec) -> dict[str, Any]:
    """What the write stage would do, without writing: the writer's own plan, checked.

    Graph and mesh plan their vertex table (the first input).  Their records are filed
    by cell on the cluster during the build and cut into link owners of even record
    counts then, so that split is not known before the records are read.
    """
    from pipeline import inputs

    preflight(spec, resume=True, writes=False)  # the store may exist: a dry run writes nothing either way
    positions, object_ids, attributes = inputs.plan_table(spec)
    plan = zv.plan_write(
        positions,
        options=zv.WriteOptions(chunk_shape=spec.chunk_shape, bin_shape=spec.bin_shape, compressor=spec.compressor),
        object_ids=object_ids, attributes=attributes,
    )  # fmt: skip
    return {"kind": spec.kind, "store": spec.out, "stages": spec.stages(), **plan.summary()}


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


def parse_aggregate(values: Sequence[str]) -> dict[str, str]:
    """``--aggregate NAME=REDUCTION`` (repeatable) -> {name: reduction}, each reduction one of D22's."""
    from zarr_vectors.format.coarsen import REDUCTIONS

    out: dict[str, str] = {}
    for v in values:
        name, sep, how = v.partition("=")
        if not sep or not name or how not in REDUCTIONS:
            raise InputError(f"--aggregate {v!r}: expected NAME=REDUCTION with REDUCTION one of {list(REDUCTIONS)}")
        if name in out:
            raise InputError(f"--aggregate names {name!r} twice")
        out[name] = how
    return out


def run_detached(spec: BuildSpec, resume: bool = False) -> dict[str, Any]:
    """The job as one task on the cluster (``--detach``): it submits its own stages there.

    ``worker_client`` secedes from the worker's thread pool while the job waits on
    its stages, so the job task never starves the stages of threads.
    """
    from distributed import worker_client

    # the worker's process holds other tasks' data: its heap is not the job's to freeze
    with worker_client() as client, client.as_current(), dask.config.set({"zarr_vectors.freeze-heap": False}):
        try:
            return run_build(spec, resume=resume).to_json()
        except zv.ZarrVectorsError as exc:
            if not isinstance(exc, StageFailedError):  # refused before its journal: no trace but the worker's log
                record_refusal(spec, exc)
            raise


#: refusals a journal keeps (the newest)
KEPT_REFUSALS = 10


def record_refusal(spec: BuildSpec, exc: BaseException) -> None:
    """Where ``zv status JOB`` finds why a detached job was refused before it journalled (an input
    gone since the command checked it, a ``--resume`` with other arguments): a new journal saying
    failed where nothing is yet, else a ``refused`` entry in the journal there.  Not beside a store
    without a journal (a failed journal would invite a ``--resume`` that replaces it), nor in a
    live job's journal (its own writer alone writes it).  Best effort: the task's error stands."""
    try:
        state = Journal.load(spec.out, spec.storage_options)
        if state is None:
            if Storage(spec.out, spec.storage_options).list_dir(""):
                return
            state = {"job_id": spec.job_id, "spec": journalled_spec(spec), "stages": {}, "status": "failed",
                     "error": f"refused: {describe(exc)}", "finished": time.time()}
        elif state["status"] == "running" and not process_gone(state.get("process")):
            return
        else:
            entry = {"job_id": spec.job_id, "error": describe(exc), "at": time.time()}
            state["refused"] = [*state.get("refused", [])[1 - KEPT_REFUSALS:], entry]
        Journal.put_state(spec.out, spec.storage_options, state)
    except Exception:  # noqa: BLE001, S110 - the refusal itself is what the task raises
        pass
