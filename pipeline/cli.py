"""The ``zv`` command line."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator


def _demo(args: argparse.Namespace) -> int:
    from pipeline.demo import run_demo

    return run_demo(args.out, args.points)


def _info(args: argparse.Namespace) -> int:
    """Levels, counts, attributes, sharding and the files each array holds (one listing of the store)."""
    import zarr_vectors as zv
    from pipeline.summary import info_lines

    with zv.count_requests() as own:
        store = zv.open_store(args.store, storage_options=_storage_options(args.storage_option))
        lines, missing = info_lines(store, store.storage.object_sizes())
    print("\n".join(lines))
    print(f"requests:       {own.counts} (this command)")
    _job_requests(args.store, _storage_options(args.storage_option))
    return 1 if missing else 0  # no reader opens such a level


def _job_requests(store: str, options: dict) -> None:
    """The requests of each stage of the job that built the store, from its journal (if one is beside it)."""
    from pipeline.journal import Journal
    from zarr_vectors.errors import StorageRequestError, ZarrVectorsError

    try:
        state = Journal.load(store, options)
    except StorageRequestError:  # the storage stopped answering: said, not skipped
        raise
    except (ZarrVectorsError, OSError, ValueError):
        return
    stages = {k: v["requests"] for k, v in (state or {}).get("stages", {}).items() if "requests" in v}
    if stages:
        print(f"job {state.get('job_id')} requests by stage:")
        for stage, doc in stages.items():
            print(f"  {stage:<12}{_counts_text(doc)}")


def _storage_options(pairs: list[str]) -> dict:
    """``KEY=VALUE`` pairs; values parse as JSON when they can (numbers, booleans), dotted keys nest."""
    import json

    out: dict = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"zv: error: --storage-option expects KEY=VALUE, got {pair!r}")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        target = out
        *parents, leaf = key.split(".")
        for part in parents:
            target = target.setdefault(part, {})
        target[leaf] = value
    return out


def _on_store(command: str, args: argparse.Namespace, run: Callable[[dict], int], *, on_cluster: bool = False) -> int:
    """``run(storage_options)`` for a command on an existing store.

    Exit 2, with one line naming the command, for a bad ``--storage-option`` (or other
    argument: ``run``'s own SystemExit), a refused store or an unreachable one.  With
    ``on_cluster`` the store is checked and sized first, then ``run`` goes where
    :func:`pipeline.cluster.choose` says (local threads for a small store, else a cluster)
    with progress on stderr.
    """
    from contextlib import nullcontext

    from pipeline.cluster import choose, session
    from pipeline.progress import TextProgress
    from zarr_vectors.errors import StorageRequestError, ZarrVectorsError
    from zarr_vectors.execution.runner import callbacks
    from zarr_vectors.store.backend import Storage

    try:
        options = _storage_options(args.storage_option)
        if not on_cluster:
            return run(options)
        storage = Storage(args.store, options)
        storage.check_reachable()
        size = _store_bytes(storage)  # before a cluster starts: whether there is a store, what to run on
        quiet = getattr(args, "json", False)
        choice = choose(work_bytes=size, what="store", **_cluster_choice(args))
        if not quiet:
            print(choice.line(), file=sys.stderr)
        with session(choice) as client:
            if not quiet and client is not None:
                print(f"dask dashboard: {client.dashboard_link}", file=sys.stderr)
            with callbacks(TextProgress()) if not quiet else nullcontext():
                return run(options)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader of our output went away: main() says nothing more
        raise
    except StorageRequestError as exc:  # the store stopped answering: the command failed, its input did not
        return _stage_failed(command, command, exc, as_json=getattr(args, "json", False))
    except (ZarrVectorsError, OSError) as exc:
        print(f"zv {command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a task failed, a worker died, a future was cancelled (a BaseException)
        return _stage_failed(command, command, exc, as_json=getattr(args, "json", False))


def _store_bytes(storage) -> int | None:  # noqa: ANN001 - zarr_vectors.store.backend.Storage
    """The bytes a store holds (one listing), None when it cannot be listed whole: a hostile
    tree is the validator's to report, not this sizing's.  StoreNotFoundError for nothing there."""
    from zarr_vectors.errors import StorageRequestError, StoreNotFoundError, ZarrVectorsError

    try:
        sizes = storage.object_sizes()
    except StorageRequestError:  # the store stopped answering: nothing to learn by listing again
        raise
    except (ZarrVectorsError, OSError):
        sizes = None
    if not (sizes if sizes is not None else storage.list_dir("")):
        raise StoreNotFoundError(f"nothing at {storage.url!r}: no such store")
    return None if sizes is None else sum(sizes.values())


@contextlib.contextmanager
def user_warnings() -> Iterator[list[str]]:
    """The UserWarnings raised in the block -- what a reader or writer says of a file (a TCK
    count its streamlines do not match, what a format cannot hold) -- as lines a command says
    as its own; the list is filled when the block ends, also when it raises.  Other warnings are
    shown as Python shows them, once the recording has stopped: shown inside it they were
    recorded again, and a loop over the record never ended."""
    import warnings

    lines: list[str] = []
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UserWarning)
            yield lines
    finally:
        for w in caught:
            if issubclass(w.category, UserWarning):
                lines.append(str(w.message))
            else:
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def _cluster_choice(args: argparse.Namespace) -> dict:
    """The cluster options of a command, as :func:`pipeline.cluster.choose` takes them."""
    return {"scheduler_address": args.scheduler_address, "scheduler_file": args.scheduler_file,
            "cluster": args.cluster, "workers": args.workers, "memory_limit": args.memory_limit}


def _job_failed(job_id: str, exc: BaseException) -> int:
    """A build that failed outside every stage (the plan, the journal, the cluster): one line, exit 1."""
    from zarr_vectors.errors import describe

    print(f"zv build: job {job_id} failed: {describe(exc)}", file=sys.stderr)
    return 1


def _stage_failed(command: str, stage: str, exc: BaseException, *, as_json: bool, step: str = "",
                  **job: str) -> int:
    """One stderr line ``zv COMMAND: stage 'STAGE' failed: Type: message`` (with ``--json`` also
    a structured ``error`` on stdout, beside ``job``'s fields).  Exit 2 when the stage refused
    its input (a ZarrVectorsError other than a failed validation or a storage that stopped
    answering), else 1: a task failed, a worker died, a future was cancelled, the storage failed
    a request after its retries."""
    import json

    from zarr_vectors.errors import StorageRequestError, ValidationFailedError, ZarrVectorsError, describe

    line = describe(exc)
    print(f"zv {command}: stage {stage!r} failed: {line}", file=sys.stderr)
    if as_json:
        error = {"stage": stage, "step": step, "type": type(exc).__name__, "message": line.partition(": ")[2]}
        print(json.dumps({**job, "ok": False, "error": error}))
    refused = isinstance(exc, ZarrVectorsError) and not isinstance(exc, (ValidationFailedError, StorageRequestError))
    return 2 if refused else 1


def _validate(args: argparse.Namespace) -> int:
    """Exit 0 when the store has no error, 1 when it has, 2 for usage errors or an unreachable store."""
    import json

    from zarr_vectors import count_requests
    from zarr_vectors.validation import validate

    def run(options: dict) -> int:
        with count_requests() as tally:
            result = validate(args.store, args.level, allow_layouts=tuple(args.allow_layout), storage_options=options)
        print(json.dumps({**result.to_json(), "requests": tally.to_json()}) if args.json else result.summary())
        return 0 if result.ok else 1

    return _on_store("validate", args, run, on_cluster=True)


def _store_args(p: argparse.ArgumentParser) -> None:
    """The store a command works on, and how to reach it."""
    p.add_argument("store", help="path or URL (file://, memory://, s3://bucket/prefix)")
    p.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                   help="fsspec storage option (VALUE parsed as JSON when possible; dotted KEY nests); repeatable")


def _cluster_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("where it runs (default: local threads; an embedded LocalCluster sized to the machine "
                             "when asked for or when the input or store reaches zarr_vectors.cli.cluster-threshold "
                             "(256MiB by default); no cluster at all when DASK_SCHEDULER=threads or synchronous)")
    g.add_argument("--scheduler-address", help="connect to a running scheduler (else $DASK_SCHEDULER_ADDRESS)")
    g.add_argument("--scheduler-file", help="connect through a scheduler file")
    g.add_argument("--cluster", action="store_true", help="start an embedded cluster whatever the size of the work")
    g.add_argument("--workers", type=int, help="embedded cluster (implies --cluster): number of worker processes")
    g.add_argument("--memory-limit", help="embedded cluster (implies --cluster): memory limit per worker, e.g. 2GiB")


def _floats(text: str | None, option: str = "") -> list[float] | None:
    if text is None:
        return None
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise SystemExit(f"zv: error: {option + ' ' if option else ''}expected comma-separated numbers, "
                         f"got {text!r}") from None


def parse_bbox(text: str | None, command: str) -> list[list[float]] | None:
    """``--bbox x0,y0,z0,x1,y1,z1`` -> ``[[x0, y0, z0], [x1, y1, z1]]``: an even count of numbers,
    the minimum corner first (the reader checks the corners against the store's dimension)."""
    values = _floats(text, "--bbox")
    if values is None:
        return None
    if len(values) % 2:
        raise SystemExit(f"zv {command}: error: --bbox expects 2 x D numbers (the minimum corner, then the maximum), "
                         f"got {len(values)}: {text!r}")
    half = len(values) // 2
    lo, hi = values[:half], values[half:]
    if any(a > b for a, b in zip(lo, hi)):
        raise SystemExit(f"zv {command}: error: --bbox {text!r}: a minimum exceeds its maximum")
    return [lo, hi]


def _shape(text: str | None) -> float | list[float] | None:
    """One number applies to every axis; several give one per axis."""
    values = _floats(text)
    return values[0] if values is not None and len(values) == 1 else values


def _shard_shape(text: str | None) -> int | list[int] | None:
    """``N`` (every axis) or ``N,N,N`` (one per axis), as ``zv shard --shard-shape`` takes it."""
    if text is None:
        return None
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise SystemExit(f"zv: error: --shard-shape expects N or N,N,..., got {text!r}") from None
    return values[0] if len(values) == 1 else values


def _build(args: argparse.Namespace) -> int:
    """Exit 0 when every stage succeeded, 1 when a stage failed, 2 for bad input or an unreachable store.

    Every check that needs no data pass (arguments, each input's schema, the shapes, the
    output path) runs before the choice of where the job runs: a refused build starts no
    cluster and leaves no journal.
    """
    import json
    import os
    from contextlib import nullcontext

    from pipeline import build_args
    from pipeline.cluster import choose, local_scheduler, session
    from pipeline.jobs import BuildSpec, parse_aggregate, parse_factors, plan_summary, preflight, run_build
    from pipeline.progress import TextProgress
    from zarr_vectors.errors import StageFailedError, StorageRequestError, ZarrVectorsError
    from zarr_vectors.execution.runner import callbacks

    try:
        spec = BuildSpec(
            kind=args.kind,
            inputs=args.paths[:-1],
            out=args.paths[-1],  # BuildSpec makes local paths absolute
            chunk_shape=_shape(args.chunk_shape),
            bin_shape=_shape(args.bin_shape),
            pyramid=parse_factors(args.pyramid or []),
            aggregate=parse_aggregate(args.aggregate),
            shard_shape=_shard_shape(args.shard_shape),
            validate_level=args.validate,
            consolidate=args.consolidate,
            directed=args.directed,
            link_store=args.link_store,
            storage_options=_storage_options(args.storage_option),
            overwrite=args.overwrite,
            columns=build_args.columns(args),
        )
        if not spec.inputs:
            raise SystemExit("zv build: error: give at least one INPUT and the output store")
        if args.detach and not (args.scheduler_address or args.scheduler_file or os.environ.get("DASK_SCHEDULER_ADDRESS")):
            raise SystemExit("zv build: error: --detach needs a running cluster (--scheduler-address, "
                             "--scheduler-file or DASK_SCHEDULER_ADDRESS); an embedded one stops with this command")
        if args.detach and args.report:
            raise SystemExit("zv build: error: --report cannot be honoured with --detach: the report records the "
                             "work this command waits for, and a detached job runs after it returns")
        if args.report and local_scheduler(scheduler_address=args.scheduler_address, scheduler_file=args.scheduler_file):
            raise SystemExit("zv build: error: --report needs a Dask cluster; dask.config names the in-process "
                             f"scheduler {local_scheduler()!r}")
        if args.report:
            import importlib.util

            if importlib.util.find_spec("bokeh") is None:  # else the report fails after the whole job ran
                raise SystemExit("zv build: error: --report needs bokeh (pip install bokeh)")
    except (SystemExit, ZarrVectorsError) as exc:
        print(exc, file=sys.stderr)
        return 2
    try:  # usage errors, unreadable inputs, missing columns, an unreachable or existing store
        with user_warnings() as said:  # what a reader warns of is a line of ours
            input_bytes, warnings = preflight(spec, resume=args.resume or args.dry_run, writes=not args.dry_run)
        warnings = said + warnings
    except ZarrVectorsError as exc:
        print(f"zv build: error: {exc}", file=sys.stderr)
        return 2
    choice = choose(work_bytes=input_bytes, what="input", needs_cluster="--report" if args.report else None,
                    **_cluster_choice(args))
    if not args.json:  # where it runs is the first line, as for every command
        print(choice.line(), file=sys.stderr)
    for line in warnings:
        print(f"zv build: warning: {line}", file=sys.stderr)
    with session(choice) as client:
        if not args.json and client is not None:
            print(f"dask dashboard: {client.dashboard_link}", file=sys.stderr)
        try:
            if args.dry_run:
                summary = {**plan_summary(spec), "warnings": warnings}
                print(json.dumps(summary, indent=None if args.json else 2))
                return 0
            if args.detach:
                from distributed import fire_and_forget

                from pipeline.jobs import resumed_job_id, run_detached

                if args.resume:  # the id it runs under, and that its retries are known by
                    spec.job_id = resumed_job_id(spec)
                _remember_job(spec)
                fire_and_forget(client.submit(run_detached, spec, args.resume, pure=False, key=f"zv-build-{spec.job_id}"))
                print(json.dumps({"job_id": spec.job_id, "store": spec.out}) if args.json else
                      f"submitted job {spec.job_id}; follow it with: zv status {spec.job_id}")
                return 0
            progress = TextProgress() if not args.json else None
            report = None
            if args.report:
                from distributed import performance_report

                # inline: Bokeh's scripts inside the file, so it opens offline and travels as one file
                report = performance_report(filename=os.path.abspath(args.report), mode="inline")
            _remember_job(spec)  # `zv status JOB` works while the job runs
            first_id = spec.job_id
            try:
                with report or nullcontext(), callbacks(*([progress] if progress else [])):
                    result = run_build(spec, resume=args.resume)
            finally:
                if spec.job_id != first_id:  # a resumed job takes the journalled job's id
                    _remember_job(spec)
        except StageFailedError as exc:  # journalled too: `zv status` says the same
            if exc.stage == "validate" and not args.json:
                print(f"validation (level {spec.validate_level}): FAIL")
            for note in getattr(exc, "__notes__", ()):  # the journal could not record the failure, say
                print(f"zv build: {note}", file=sys.stderr)
            return _stage_failed("build", exc.stage, exc.cause, as_json=args.json, step=exc.step,
                                 job_id=spec.job_id, store=spec.out)
        except StorageRequestError as exc:  # the store stopped answering: the job failed, not its input
            return _job_failed(spec.job_id, exc)
        except ZarrVectorsError as exc:
            print(f"zv build: error: {exc}", file=sys.stderr)
            return 2
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # outside every stage (the plan, the journal, the cluster); a cancelled future
            return _job_failed(spec.job_id, exc)
    if args.json:
        print(json.dumps({**result.to_json(), "warnings": warnings}, default=str))
    else:
        _build_summary(spec, result)
    if args.report:
        from pipeline.report import add_requests

        add_requests(os.path.abspath(args.report), result.stages)
        if not args.json:
            print(f"performance report: {os.path.abspath(args.report)}")
    return 0


def _build_summary(spec, result) -> None:  # noqa: ANN001 - BuildSpec, JobResult
    """Each stage's time and requests, the counts of every level built, the validation verdict."""
    import zarr_vectors as zv
    from pipeline.summary import levels_summary

    for stage, info in result.stages.items():
        print(f"{stage:<10} {info.get('status')}  {info.get('seconds', '')}s  {_requests_line(info)}".rstrip())
    if result.journal_requests:  # the job's own bookkeeping, apart from every stage
        print(f"{'(journal)':<10} {_requests_line({'requests': result.journal_requests})}")
    for line in levels_summary(zv.open_store(spec.out, storage_options=spec.storage_options)):
        print(line)
    if spec.validate_level:
        warnings = result.stages.get("validate", {}).get("warnings", 0)
        print(f"validation (level {spec.validate_level}): PASS" + (f", {warnings} warnings" if warnings else ""))
    print(f"store: {result.store}")


def _requests_line(info: dict) -> str:
    """A journalled stage's request totals on one line ('' when it has none)."""
    doc = info.get("requests")
    return _counts_text(doc) if doc else ""


def _counts_text(doc: dict) -> str:
    """Request totals as a tally journalled them, saying whose counts were lost (a worker that left)."""
    from zarr_vectors.store.accounting import RequestCounts

    try:
        counts = str(RequestCounts.from_json(doc))
    except (AttributeError, TypeError, ValueError):  # a damaged journal: said, not raised
        return "(request counts unreadable)"
    lost = doc.get("incomplete")
    return counts + (f" (incomplete: {'; '.join(map(str, lost))})" if isinstance(lost, list) and lost else "")


def _job_index(job_id: str):  # -> pathlib.Path
    from pathlib import Path

    return Path.home() / ".cache" / "zv" / "jobs" / f"{job_id}.json"


def _remember_job(spec) -> None:  # noqa: ANN001 - BuildSpec
    """Where ``zv status JOB`` finds the job's store; a job runs without it (said once)."""
    import json
    import os

    try:
        path = _job_index(spec.job_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        # the options may hold credentials (`zv status JOB` needs them): readable by this user only
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(descriptor, 0o600)  # one written before, by an earlier version, kept its mode
        with open(descriptor, "w") as index:
            index.write(json.dumps({"store": spec.out, "storage_options": spec.storage_options}))
    except (OSError, RuntimeError) as exc:  # RuntimeError: no home directory to be found
        print(f"zv build: warning: job {spec.job_id} not recorded in ~/.cache/zv/jobs ({type(exc).__name__}: "
              f"{exc}): ask `zv status` with the store's path", file=sys.stderr)


def _status(args: argparse.Namespace) -> int:
    """Exit 0 when the job is done, 1 when it failed, was refused or its process is gone (interrupted),
    3 while it runs or waits to start (pending), 2 when unknown."""
    import json

    from pipeline.journal import job_status
    from zarr_vectors.errors import InputError, ZarrVectorsError

    target, options = args.job, _storage_options(args.storage_option)
    try:
        index = _job_index(target)
    except RuntimeError:  # no home directory: no index, a store path still works
        index = None
    by_id = index is not None and index.exists()  # else a store path or URL
    try:
        if by_id:
            try:
                known = json.loads(index.read_text())
                target, options = str(known["store"]), options or dict(known["storage_options"] or {})
            except (OSError, ValueError, TypeError, KeyError, RecursionError) as exc:
                raise InputError(f"the job index {str(index)!r} is damaged ({type(exc).__name__}: {exc})") from None
        found = job_status(target, options, missing_ok=by_id)  # a job asked by id may be queued
        if found is None:  # submitted, and no worker has started it yet
            print(json.dumps({"job_id": args.job, "status": "pending", "store": target}) if args.json else
                  f"job {args.job}: pending -- not started; no journal beside {target!r} yet")
            return 3
        state = found
        planned = _stages_of(state)
    except ZarrVectorsError as exc:
        print(f"zv status: error: {exc}", file=sys.stderr)
        return 2
    refused = state.get("refused")  # a damaged journal may hold anything there
    refusals = [r for r in refused if isinstance(r, dict) and r.get("job_id") == args.job and "error" in r] \
        if isinstance(refused, list) else []
    if by_id and state["job_id"] != args.job:
        # the journal is another job's: this one was refused before it journalled, or has not started
        if refusals:
            print(json.dumps({"job_id": args.job, "status": "refused", "store": target, "error": refusals[-1]["error"]})
                  if args.json else f"job {args.job}: refused -- {refusals[-1]['error']}")
            return 1
        print(json.dumps({"job_id": args.job, "status": "pending", "store": target, "journal_job_id": state["job_id"]})
              if args.json else f"job {args.job}: pending -- not started; the journal beside {target!r} is job "
                                f"{state['job_id']}'s ({state['status']})")
        return 3
    if args.json:
        out = {k: v for k, v in state.items() if k != "spec"}
        out.update(store=state["spec"]["out"], planned=planned)
        print(json.dumps(out, default=str))
    else:
        print(f"job {state['job_id']}: {state['status']}  (store {state['spec']['out']})")
        for stage in planned:
            info = state["stages"].get(stage, {})
            line = f"  {stage:<10} {info.get('status', 'pending')}  {info.get('seconds', '')}"
            if info.get("status") == "running" and "step" in info:
                line += f"  {info['step']}: {info.get('tasks_done', 0)}/{info.get('tasks_total', '?')} tasks"
            print(line.rstrip())
        if state.get("error"):
            print(f"  error: {state['error']}")
        for refusal in refusals:  # a detached --resume of this job, refused before it ran
            print(f"  a later run was refused: {refusal['error']}")
        if state["status"] == "interrupted":
            process = state["process"]
            print(f"  its journal says running, but its process ({process['pid']} on {process['host']}) is gone: "
                  "the job was stopped; re-run the build with --resume to finish it")
    return {"done": 0, "failed": 1, "interrupted": 1}.get(state["status"], 3)


def _stages_of(state: dict) -> list[str]:
    from pipeline.jobs import BuildSpec
    from zarr_vectors.errors import InputError

    try:
        return BuildSpec(**state["spec"]).stages()
    except (TypeError, ValueError) as exc:
        raise InputError(f"the job journal of job {state['job_id']} is damaged: its spec is no build's "
                         f"({exc})") from exc


def _shard(args: argparse.Namespace) -> int:
    """``zv shard``: exit 0 when done, 2 for bad input, a refused store or an unreachable one."""
    import zarr_vectors as zv

    try:
        if args.unshard == (args.shard_shape is not None):
            raise SystemExit("zv shard: error: give --shard-shape N (or N,N,N) or --unshard, not both")
        shape = _shard_shape(args.shard_shape)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2

    def run(options: dict) -> int:
        with zv.count_requests() as tally:
            if shape is None:
                print(zv.unshard_store(args.store, storage_options=options))
            else:
                print(zv.shard_store(args.store, shape, storage_options=options))
        print(f"requests: {tally.counts}")
        return 0

    return _on_store("shard", args, run, on_cluster=True)


def _consolidate(args: argparse.Namespace) -> int:
    """``zv consolidate``: exit 0 when done, 2 for a missing, refused or unreachable store."""
    import zarr_vectors as zv
    from zarr_vectors.store.consolidated import drop_consolidated

    def run(options: dict) -> int:
        if not args.drop:
            print(f"{args.store}: {zv.consolidate_store(args.store, storage_options=options)} nodes consolidated")
            return 0
        storage = zv.open_store(args.store, storage_options=options).storage  # a Zarr Vectors root, or refused
        dropped = drop_consolidated(storage)
        print(f"{storage.url}: {'consolidated metadata removed' if dropped else 'was not consolidated'}")
        return 0

    return _on_store("consolidate", args, run)


def _aggregate_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--aggregate", action="append", default=[], metavar="NAME=REDUCTION",
                        help="how coarse levels reduce vertex attribute NAME per metavertex: mean, min, max or first "
                        "(default: mean for floats, first for integers and booleans); repeatable")


def _pyramid(args: argparse.Namespace) -> int:
    """``zv pyramid``: exit 0 when built, 2 for bad input, a refused store or an unreachable one."""
    import zarr_vectors as zv
    from pipeline.jobs import parse_aggregate
    from zarr_vectors.errors import InputError

    try:
        aggregate = parse_aggregate(args.aggregate)
        factors = []
        for text in args.factor:
            values = _floats(text, "--factor")
            if len(values) not in (1, 2):
                raise SystemExit(f"zv pyramid: error: --factor expects FACTOR or FACTOR,SPARSITY, got {text!r}")
            factors.append((values[0], values[1] if len(values) == 2 else 1.0))
        scales = None
        if args.chunk_scale:
            scales = []
            for text in args.chunk_scale:
                values = _floats(text, "--chunk-scale")
                scales.append(values[0] if len(values) == 1 else tuple(values))
    except InputError as exc:
        print(f"zv pyramid: error: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2

    def run(options: dict) -> int:
        with zv.count_requests() as tally:
            print(zv.build_pyramid(
                args.store, factors=factors, chunk_scale_factors=scales, cross_level_storage=args.cross_level_storage,
                cross_level_depth=args.cross_level_depth, sparsity_seed=args.seed, aggregate=aggregate or None,
                storage_options=options,
            ))  # fmt: skip
        print(f"requests: {tally.counts}")
        return 0

    return _on_store("pyramid", args, run, on_cluster=True)


def build_parser() -> argparse.ArgumentParser:
    from pipeline import build_args, cmd_conformance, cmd_export, cmd_plot
    parser = argparse.ArgumentParser(prog="zv", description="Zarr Vectors stores on Dask.")
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo", help="synthesise a point cloud and a graph, build both (pyramid, shards, level-5 validation)"
    )
    demo.add_argument("--out", default="demo-output", help="folder for inputs, stores and report (default: %(default)s)")
    demo.add_argument("--points", type=int, default=1_000_000, help="number of points (default: %(default)s)")
    demo.set_defaults(func=_demo)
    info = sub.add_parser("info", help="summarise a store")
    _store_args(info)
    info.set_defaults(func=_info)
    check = sub.add_parser("validate", help="check a store against the format (levels 1-5); exit 1 on errors")
    _store_args(check)
    check.add_argument("--level", type=int, choices=range(1, 6), default=5, metavar="N",
                       help="conformance level 1..5, cumulative (default: %(default)s)")
    check.add_argument("--json", action="store_true", help="print one JSON object instead of a summary")
    check.add_argument("--allow-layout", action="append", default=[], metavar="NAME",
                       help="also read this object_index layout (e.g. vlen_manifests_v2); repeatable")
    _cluster_args(check)
    check.set_defaults(func=_validate)
    build = sub.add_parser("build", help="build a store from files: write -> [pyramid] -> [shard] -> [consolidate] "
                           "-> [validate]", formatter_class=argparse.RawDescriptionHelpFormatter)
    build.add_argument("kind", choices=["points", "graph", "skeleton", "mesh", "polylines", "streamlines"])
    build.add_argument("paths", nargs="+", metavar="INPUT... OUT",
                       help="input files, format by extension (see below), then the store")
    build_args.add_arguments(build)
    build.add_argument("--chunk-shape", default="250",
                       help="chunk edge(s), e.g. 250 or 250,250,100 (default: %(default)s)")
    build.add_argument("--bin-shape", help="bin edge(s) (must divide the chunk shape; default: the chunk shape, "
                                           "one bin per chunk)")
    build.add_argument("--pyramid", action="append", metavar="FACTOR[,SPARSITY]", help="add a coarser level; repeatable")
    _aggregate_arg(build)
    build.add_argument("--shard-shape", metavar="N", help="shard the grid arrays at the end: N cells per shard "
                       "on every axis, or N,N,N per axis")
    build.add_argument("--consolidate", action="store_true", help="copy every node's metadata into the root "
                       "zarr.json at the end (zarr readers open the store with one read)")
    build.add_argument("--validate", type=int, choices=range(1, 6), metavar="LEVEL", help="validate at the end")
    build.add_argument("--directed", action="store_true", help="graph: directed edges")
    build.add_argument("--link-store", choices=["canonical", "duplicate"], default="canonical",
                       help="graph and mesh: canonical stores each link once, duplicate once per chunk it "
                            "touches (default: %(default)s)")
    build.add_argument("--overwrite", action="store_true", help="replace an existing store")
    build.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                       help="an fsspec / S3 option for the store and inputs, e.g. endpoint_url=http://...; repeatable")
    build.add_argument("--json", action="store_true", help="print a machine-readable summary")
    build.add_argument("--dry-run", action="store_true", help="print the plan (owners, cells, rows) and stop")
    build.add_argument("--detach", action="store_true", help="submit to the cluster and return a job id")
    build.add_argument("--resume", action="store_true", help="finish an interrupted job (stages done are skipped)")
    build.add_argument("--report", metavar="FILE.html", help="write a Dask performance report")
    _cluster_args(build)
    build.set_defaults(func=_build)
    status = sub.add_parser("status", help="state of a build job (by job id or store)")
    status.add_argument("job", help="job id printed by --detach, or the store path / URL")
    status.add_argument("--json", action="store_true", help="print the job's state as one JSON object")
    status.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                        help="an fsspec / S3 option for the store, e.g. endpoint_url=http://...; repeatable")
    status.set_defaults(func=_status)
    shard = sub.add_parser("shard", help="repack a store's grid arrays into sharding_indexed shards (or back)")
    _store_args(shard)
    shard.add_argument("--shard-shape", metavar="N", help="cells per shard: N for every axis, or N,N,N per axis")
    shard.add_argument("--unshard", action="store_true", help="go back to one object per cell")
    _cluster_args(shard)
    shard.set_defaults(func=_shard)
    consolidate = sub.add_parser("consolidate", help="copy every node's metadata into the root zarr.json (or drop "
                                 "the copy)")
    _store_args(consolidate)
    consolidate.add_argument("--drop", action="store_true", help="remove the copy instead")
    consolidate.set_defaults(func=_consolidate)
    pyramid = sub.add_parser("pyramid", help="build (or rebuild) the coarser levels of a store")
    _store_args(pyramid)
    pyramid.add_argument("--factor", action="append", required=True, metavar="FACTOR[,SPARSITY]",
                         help="one per new level: bin coarsening (>= 1) and object sparsity (>= 1, default 1)")
    pyramid.add_argument("--chunk-scale", action="append", metavar="N[,N,N]",
                         help="one per new level (give all or none): the level's chunk = its parent's x N")
    pyramid.add_argument("--cross-level-storage", choices=("none", "implicit", "explicit"), default="explicit")
    pyramid.add_argument("--cross-level-depth", type=int, default=1, help="largest |N| linked; -1 = every pair")
    pyramid.add_argument("--seed", type=int, default=0, help="object sparsity seed (default: %(default)s)")
    _aggregate_arg(pyramid)
    _cluster_args(pyramid)
    pyramid.set_defaults(func=_pyramid)
    cmd_export.add_parser(sub)
    cmd_plot.add_parser(sub)
    cmd_conformance.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from zarr_vectors.execution.runner import frozen_heap

    try:
        with frozen_heap():  # a command is one job: its client steps pause for no full collection
            rc = int(args.func(args))
        sys.stdout.flush()  # here, not at exit, so that a closed pipe is caught below
        return rc
    except BrokenPipeError:  # `zv info STORE | head -1`: the reader has what it wanted
        _drop_stdout()
        return 141  # 128 + SIGPIPE, what a shell reports for a tool the closed pipe stopped
    except KeyboardInterrupt:  # Ctrl-C: a job's journal and its note are written by then; no traceback
        print(f"zv {args.command}: interrupted", file=sys.stderr)
        return 130  # 128 + SIGINT, what a shell reports
    except Exception as exc:  # the command line reports, it does not trace back
        from zarr_vectors.errors import StageFailedError, StorageRequestError, ZarrVectorsError, describe

        if isinstance(exc, StageFailedError):  # zv demo runs build jobs too
            return _stage_failed(args.command, exc.stage, exc.cause, as_json=False, step=exc.step)
        if isinstance(exc, StorageRequestError):  # e.g. the summary after a build: the command failed, not its input
            print(f"zv {args.command}: {describe(exc)}", file=sys.stderr)
            return 1
        if isinstance(exc, ZarrVectorsError):  # named by its command, as each command's own errors are
            print(f"zv {args.command}: error: {exc}", file=sys.stderr)
            return 2
        raise


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush at exit does not fail again."""
    import os

    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # not a real file (captured in a test)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


class _Version(argparse.Action):
    """``zv --version``: looked up only when asked (importlib.metadata is not free at start-up)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from importlib.metadata import PackageNotFoundError, version

        from zarr_vectors.format.metadata import ZV_VERSION

        try:
            ours = version("zarr-vectors-dask")
        except PackageNotFoundError:  # run from a source tree that was never installed
            ours = "unknown (not installed)"
        print(f"zv {ours} (zarr-vectors-dask; writes Zarr Vectors format {ZV_VERSION})")
        parser.exit(0)


if __name__ == "__main__":
    sys.exit(main())
