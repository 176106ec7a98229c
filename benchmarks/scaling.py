"""Scaling beyond this machine, on paper: speed-up bounds from one worker's measured task stream.

A ``zv build`` (write + pyramid + shard + validate L5, from Parquet) runs on ONE
single-threaded worker process while a scheduler plugin records every task's compute
interval, its dependencies (the scheduler's own ``TaskState.dependencies``) and every graph
the client submits, and a sampler in this process records where the client thread is.  The
cluster is, by default, a scheduler and a worker in processes of their own, as a deployment
runs them; ``--cluster embedded`` uses the job's ``LocalCluster``, whose scheduler runs in the
client's process and shares its GIL, so the scheduler's handling of each graph may be billed as
the client's time.  Workloads: a graph of 10^6 vertices / 3*10^6 edges
(``benchmarks/pipeline.py``'s tables) and 10^7 points with one attribute; chunk 250 over
[0,1000)^3.

The model.  The 1-worker wall time ``T1`` of a build (or of one stage) is split, instant
by instant, into

* ``W``  task time: the worker computes a task (one thread, so intervals never overlap);
* ``S``  serial time: no task runs and either the client is not waiting for a graph --
  client-side work: reading input metadata, planning, creating arrays, building and
  submitting graphs, gathering results -- or it waits for the scheduler to start a graph
  it just submitted (until that graph's first task starts);
* ``D``  dispatch gaps: no task runs while the client waits for a graph that has started
  (the scheduler-to-worker round trip between consecutive tasks);

so ``T1 = W + S + D``.  The graphs are planned for ``--plan-threads`` worker threads
(default 32, the size the target names; ``zarr_vectors.plan-threads``), not for the one
worker that runs them: task sizes follow the cluster a graph is planned for, and a graph
cut for one worker would bound its own critical path.  One worker then runs the graph
32 workers would get, its per-task costs included.  On ``N`` workers two lower bounds
hold for the wall time:

* Amdahl, with the serial part measured: ``T(N) >= S + (W + D) / N`` (each worker has
  its share of the tasks and of the gaps between them);
* the critical path ``CP``: the build replayed on unboundedly many workers, as soon as
  possible -- each task starts when its dependencies (from the scheduler) are done and
  its graph has been submitted; the client is a serial chain: between two submissions it
  spends the time it spent in the measured run, and a graph it waited for (every
  ``runner.compute`` / ``persist`` and ``dask.compute``; not ``runner.start``) holds the
  chain until that graph's last task is done.  ``T(N) >= CP``.

so the speed-up over one worker is at most ``T1 / max(S + (W + D)/N, CP)`` =
``min(Amdahl, T1 / CP)``; the report says which term binds.  Both bounds are optimistic:
they leave out the scheduler's per-task cost growing with N, transfers between workers
(none with one worker), stragglers and storage bandwidth.  ``CP (DAG)`` is the longest
chain through the task graph alone, without the client: what the graph's shape allows;
the report also names what the critical chain is made of (the client, each task group).
Target (issue 13): a bound of at least 16x at 32 workers.

Where the serial time goes: the client-only part of ``S`` before each submitted graph is
billed to the runner step that graph belongs to (``runner.compute`` / ``persist`` /
``start`` are wrapped here to timestamp them and learn their keys), and the client
thread's stacks, sampled every 10 ms, name the functions.  The library's only part in
this is the ``zarr_vectors.plan-threads`` setting.

A worker's first large build pays for fresh memory: on this VM (transparent huge pages on
``madvise``, which numpy asks for) the pyramid's first ``-1`` partition task took 0.27--0.37 s
where the same task later took 0.05--0.09 s.  ``--builds 2`` shows both: the first build as
a new cluster sees it, the next as a cluster that has run builds before.

    .venv/bin/python benchmarks/scaling.py [--workloads graph points] [--graph-n 1000000]
        [--points-n 10000000] [--plan-threads 32] [--builds N] [--cluster processes|embedded]
        [--workdir DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import ast
import bisect
import json
import os
import shutil
import sys
import tempfile
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import dask
import numpy as np
import pandas as pd
from dask.core import flatten
from dask.utils import key_split
from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.metrics import time

# This folder holds ``pipeline.py``, whose name shadows the ``pipeline`` package.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
from pipeline.cluster import WORKER_ENVIRON, connect
from pipeline.jobs import BuildSpec, run_build
from zarr_vectors.execution import runner

PLUGIN = "zv-scaling-stream"
WORKERS = (8, 32, 128)
STAGES = ("write", "pyramid", "shard", "validate")
RUN_MARK = "#"  # a recomputed key's run id: key#n
_REPO = os.path.dirname(_HERE)
_PROJECT = tuple(os.path.join(_REPO, d) + os.sep for d in ("zarr_vectors", "pipeline"))
_RUNNER = runner.__file__


# ---------------------------------------------------------------------------
# recording
# ---------------------------------------------------------------------------
class StreamRecorder(SchedulerPlugin):
    """On the scheduler: every submitted graph (time, wanted keys, new tasks) and every
    finished task (compute intervals, dependencies).  Keys as ``str``, so they compare
    equal to the client's after any serialisation.

    A key computed again (a Parquet partition each input pass re-reads, a task lost with
    its worker) is a new task: its id is ``key#n`` for the n-th recomputation, billed to
    the graph that listed it, and its dependencies name the runs they read.  A graph
    listing a key already in memory adds no run.  Keeping one record per key would drop
    every earlier run's time and bill it as idle."""

    name = PLUGIN

    def __init__(self) -> None:
        self.graphs: list[dict[str, Any]] = []
        self.tasks: dict[str, dict[str, Any]] = {}
        self.scheduler: Any = None
        self.runs: dict[str, int] = {}  # key -> its runs so far (listed or started)
        self.pending: dict[str, str] = {}  # key -> the id its next finished run gets
        self.latest: dict[str, str] = {}  # key -> the id of its last finished run
        self.finished: set[str] = set()  # the ids of finished runs
        self.graph_of: dict[str, int] = {}  # run id -> the graph that listed it
        self.last_stop: dict[str, float] = {}  # key -> the end of its last recorded interval

    async def start(self, scheduler: Any) -> None:
        self.scheduler = scheduler

    def _new_run(self, key: str) -> str:
        n = self.runs.get(key, -1) + 1
        self.runs[key] = n
        self.pending[key] = key if n == 0 else f"{key}{RUN_MARK}{n}"
        return self.pending[key]

    def _run_id(self, key: Any, scheduler: Any) -> str:
        name = str(key)
        ts = scheduler.tasks.get(key)
        if ts is not None and ts.state in ("memory", "erred") and name in self.latest:
            return self.latest[name]  # done already: nothing runs for this graph
        if name in self.pending and self.pending[name] not in self.finished:
            return self.pending[name]  # listed again before its run finished: the same run
        run = self._new_run(name)
        self.graph_of[run] = len(self.graphs)
        return run

    def update_graph(self, scheduler: Any, *, keys: Iterable[Any] = (), tasks: Iterable[Any] = (), **kwargs: Any) -> None:
        self.scheduler = scheduler
        self.graphs.append({"time": time(), "keys": [str(k) for k in keys],
                            "tasks": [self._run_id(k, scheduler) for k in tasks]})

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        if start != "processing" or finish not in ("memory", "erred"):
            return
        ts = self.scheduler.tasks.get(key) if self.scheduler is not None else None
        name = str(key)
        run = self.pending.get(name, name)
        if run in self.finished:  # computed again with no graph listing it: billed to the last one's graph
            graph = self.graph_of.get(run)
            run = self._new_run(name)
            if graph is not None:
                self.graph_of[run] = graph
                self.graphs[graph]["tasks"].append(run)
        # a worker that still knows the key reports the earlier runs' intervals too
        before = self.last_stop.get(name, 0.0)
        spans = [(s["start"], s["stop"]) for s in kwargs.get("startstops", ())
                 if s.get("action") == "compute" and s["start"] >= before]
        self.tasks[run] = {
            "spans": spans,
            "deps": [self.latest.get(str(d.key), str(d.key)) for d in ts.dependencies] if ts is not None else [],
        }
        self.last_stop[name] = max([before] + [b for _, b in spans])
        self.latest[name] = run
        self.finished.add(run)


def _collect(dask_scheduler: Any) -> dict[str, Any]:
    plugin = dask_scheduler.plugins[PLUGIN]
    return {"graphs": plugin.graphs, "tasks": plugin.tasks}


@dataclass
class Call:
    """One runner call on the client: ``compute`` / ``persist`` (waits) or ``start`` (does not)."""

    kind: str
    name: str
    enter: float
    exit: float
    keys: set[str]


@dataclass
class Recording:
    graphs: list[dict[str, Any]] = field(default_factory=list)
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    samples: list[tuple[float, tuple[Any, ...]]] = field(default_factory=list)  # (time, code objects, innermost first)
    interval: float = 0.01


def _keys(items: Sequence[Any]) -> set[str]:
    return {str(k) for item in items if dask.is_dask_collection(item) for k in flatten(item.__dask_keys__())}


@contextmanager
def recording(client: Any, interval: float = 0.01) -> Iterator[Recording]:
    """Record the task stream, the runner's calls and the client thread's stacks inside the block."""
    rec = Recording(interval=interval)
    client.register_plugin(StreamRecorder())
    originals = {n: getattr(runner, n) for n in ("compute", "persist", "start")}

    def wrap(kind: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            name, items = ("start", args) if kind == "start" else (args[0], args[1:])
            t0 = time()
            try:
                return fn(*args, **kwargs)
            finally:
                rec.calls.append(Call(kind, name, t0, time(), _keys(items)))

        return call

    tid, stop = threading.get_ident(), threading.Event()

    def sample() -> None:
        while not stop.wait(interval):
            frame, stack = sys._current_frames().get(tid), []
            while frame is not None:
                stack.append(frame.f_code)
                frame = frame.f_back
            rec.samples.append((time(), tuple(stack)))

    sampler = threading.Thread(target=sample, name="zv-scaling-sampler", daemon=True)
    for n, fn in originals.items():
        setattr(runner, n, wrap(n, fn))
    sampler.start()
    try:
        yield rec
    finally:
        stop.set()
        sampler.join()
        for n, fn in originals.items():
            setattr(runner, n, fn)
        data = client.run_on_scheduler(_collect)
        client.unregister_scheduler_plugin(PLUGIN)
        rec.graphs, rec.tasks = data["graphs"], data["tasks"]


# ---------------------------------------------------------------------------
# interval arithmetic on sorted disjoint [start, stop) lists
# ---------------------------------------------------------------------------
Segments = list[tuple[float, float]]


def union(spans: Iterable[tuple[float, float]]) -> Segments:
    out: Segments = []
    for a, b in sorted(s for s in spans if s[1] > s[0]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def clip(segs: Segments, lo: float, hi: float) -> Segments:
    return [(max(a, lo), min(b, hi)) for a, b in segs if min(b, hi) > max(a, lo)]


def complement(segs: Segments, lo: float, hi: float) -> Segments:
    out, at = [], lo
    for a, b in clip(segs, lo, hi):
        if a > at:
            out.append((at, a))
        at = max(at, b)
    return out + ([(at, hi)] if hi > at else [])


def intersect(x: Segments, y: Segments) -> Segments:
    out, i, j = [], 0, 0
    while i < len(x) and j < len(y):
        a, b = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        if b > a:
            out.append((a, b))
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return out


def length(segs: Segments) -> float:
    return float(sum(b - a for a, b in segs))


# ---------------------------------------------------------------------------
# analysis
# ---------------------------------------------------------------------------
@dataclass
class Graph:
    time: float
    label: str
    blocking: bool
    tasks: list[str]
    first_start: float | None
    last_stop: float | None

    @property
    def done(self) -> float:
        """When the client stops waiting for it (a graph it does not wait for: at submission)."""
        return max(self.time, self.last_stop or self.time) if self.blocking else self.time


@dataclass
class Figures:
    """One window's accounting (a whole build or one stage), in seconds."""

    wall: float
    tasks: int
    task_time: float  # W
    serial: float  # S = client + submit
    client: float
    submit: float
    dispatch: float  # D
    critical_path: float  # CP, with the client as a serial chain
    client_chain: float  # the client's own time on that chain (between and after its waits)
    dag_critical_path: float  # the task graph alone
    chain: list[tuple[str, float, int]]  # the critical chain: (the client / a task group, seconds, count)
    bounds: dict[int, dict[str, Any]]


def _graphs(rec: Recording) -> list[Graph]:
    """The submitted graphs in time order, each labelled with its runner step."""
    owner: dict[str, int] = {}
    for i, g in enumerate(rec.graphs):
        for k in g["tasks"]:
            if k in rec.tasks:
                owner.setdefault(k, i)
    members: dict[int, list[str]] = defaultdict(list)
    for k, i in owner.items():
        members[i].append(k)
    by_keys: dict[str, list[Call]] = defaultdict(list)
    for c in rec.calls:
        for k in c.keys:
            by_keys[k].append(c)
    out = []
    for i, g in enumerate(rec.graphs):
        keys = members.get(i, [])
        keys.sort(key=lambda k: rec.tasks[k]["spans"][0][0] if rec.tasks[k]["spans"] else 0.0)
        spans = [s for k in keys for s in rec.tasks[k]["spans"]]
        # the latest runner call before the graph that asked for one of its keys (a later
        # call may ask for the keys of an earlier ``start`` again)
        calls = [c for k in g["keys"] for c in by_keys.get(k, ())]
        # else the call running when it arrived (a dict of collections is wrapped in a
        # delayed of a fresh key on submission)
        calls = [c for c in calls if c.enter <= g["time"]] or [c for c in rec.calls if c.enter <= g["time"] <= c.exit]
        call = max(calls, key=lambda c: c.enter, default=None)
        label = f"{call.kind} {call.name!r}" if call is not None else "dask.compute outside the runner"
        out.append(Graph(g["time"], label, call is None or call.kind != "start", keys,
                         min((a for a, _ in spans), default=None), max((b for _, b in spans), default=None)))
    return sorted(out, key=lambda g: g.time)


def _duration(task: dict[str, Any]) -> float:
    return float(sum(b - a for a, b in task["spans"]))


Chain = tuple[Any, tuple[str, float]] | None  # a cons list, innermost last: (rest, (what, seconds))


def _group(key: str) -> str:
    """A task run's group name (``('write-owner-<token>', 3)#1`` -> ``write-owner``)."""
    key = key.rsplit(RUN_MARK, 1)[0] if RUN_MARK in key else key
    try:
        name = ast.literal_eval(key)[0] if key.startswith("(") else key
    except (ValueError, SyntaxError, IndexError, TypeError):
        name = key
    return key_split(name)


def _chain_summary(path: Chain) -> list[tuple[str, float, int]]:
    """The critical chain's time by what it is: the client, and each task group (seconds, count)."""
    seconds: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    while path is not None:
        path, (what, dt) = path
        seconds[what] += dt
        count[what] += 1
    return sorted(((w, round(seconds[w], 3), count[w]) for w in seconds), key=lambda x: -x[1])


def critical_paths(rec: Recording, graphs: Sequence[Graph], lo: float, hi: float
                   ) -> tuple[float, float, float, list[tuple[str, float, int]]]:
    """(CP with the client as a serial chain, the client's share of all of its time, CP of the
    task graph alone, what the critical chain is made of) over ``graphs``.

    The replay on unboundedly many workers: the client's chain advances by the time it
    spent between submissions in the measured run; a task finishes its duration after
    the later of its graph's submission and its dependencies; a graph the client waited
    for holds the chain until its last task.  Dependencies outside ``graphs`` (earlier
    stages) are done already.
    """
    finish: dict[str, tuple[float, Chain]] = {}
    dag: dict[str, float] = {}
    chain, path, last, client = 0.0, None, lo, 0.0
    for g in graphs:
        gap = max(0.0, g.time - last)
        client += gap
        chain, path = chain + gap, (path, ("client", gap)) if gap > 0 else path
        release, latest = (chain, path), (chain, path)
        for k in g.tasks:
            task, dur = rec.tasks[k], _duration(rec.tasks[k])
            deps = [d for d in task["deps"] if d in finish]
            before = max([release] + [finish[d] for d in deps], key=lambda fp: fp[0])
            finish[k] = (before[0] + dur, (before[1], (_group(k), dur)))
            dag[k] = max([0.0] + [dag[d] for d in deps]) + dur
            latest = max(latest, finish[k], key=lambda fp: fp[0])
        if g.blocking:
            (chain, path), last = max((chain, path), latest, key=lambda fp: fp[0]), max(last, g.done)
        else:
            last = max(last, g.time)
    gap = max(0.0, hi - last)
    client += gap
    end = max([(chain + gap, (path, ("client", gap)) if gap > 0 else path), *finish.values()], key=lambda fp: fp[0])
    return end[0], client, max(dag.values(), default=0.0), _chain_summary(end[1])


def figures(rec: Recording, lo: float, hi: float, graphs: Sequence[Graph] | None = None) -> Figures:
    """The model's terms over the window [lo, hi] (see the module docstring)."""
    graphs = [g for g in (graphs if graphs is not None else _graphs(rec)) if lo <= g.time <= hi]
    keys = [k for g in graphs for k in g.tasks]
    busy = clip(union(s for k in keys for s in rec.tasks[k]["spans"]), lo, hi)
    idle = complement(busy, lo, hi)
    waiting = clip(union((g.time, g.done) for g in graphs if g.blocking), lo, hi)
    latency = union((g.time, g.first_start) for g in graphs if g.blocking and g.first_start is not None)
    idle_waiting = intersect(idle, waiting)
    client = length(intersect(idle, complement(waiting, lo, hi)))
    submit = length(intersect(idle_waiting, latency))
    dispatch = length(idle_waiting) - submit
    wall, work = hi - lo, length(busy)
    cp, client_chain, dag_cp, chain = critical_paths(rec, graphs, lo, hi)
    serial = client + submit
    bounds = {}
    for n in WORKERS:
        amdahl = wall / (serial + (work + dispatch) / n) if serial + work + dispatch > 0 else float(n)
        path = wall / cp if cp > 0 else float("inf")
        bounds[n] = {"amdahl": amdahl, "critical_path": path, "bound": min(amdahl, path),
                     "binds": "serial (Amdahl)" if amdahl <= path else "critical path"}
    return Figures(wall, len(keys), work, serial, client, submit, dispatch, cp, client_chain, dag_cp, chain, bounds)


def _frame_label(stack: tuple[Any, ...]) -> str:
    """The innermost project function on the client's stack, and whether it was submitting a graph."""
    project = [c for c in stack if c.co_filename.startswith(_PROJECT) and c.co_filename != _RUNNER]
    if not project:
        return "outside the project"
    inner = project[0]
    label = f"{os.path.relpath(inner.co_filename, _REPO)}:{inner.co_name}"
    if any(c.co_filename == _RUNNER for c in stack[: stack.index(inner)]):
        label += " (building/submitting a graph)"
    return label


def serial_breakdown(rec: Recording, lo: float, hi: float, stages: dict[str, tuple[float, float]],
                     graphs: Sequence[Graph]) -> dict[str, list[tuple[str, float]]]:
    """Where the client-only serial time goes: per runner step (the time before each
    submitted graph, summed by step) and per function (the sampled client stacks)."""

    def stage_of(t: float) -> str:
        return next((s for s, (a, b) in stages.items() if a <= t <= b), "job (between stages)")

    graphs = [g for g in graphs if lo <= g.time <= hi]
    keys = [k for g in graphs for k in g.tasks]
    idle = complement(union(s for k in keys for s in rec.tasks[k]["spans"]), lo, hi)
    waiting = union((g.time, g.done) for g in graphs if g.blocking)
    serial = intersect(idle, complement(waiting, lo, hi))
    # per step: the serial time between the previous graph's end and this graph's submission
    steps: dict[str, float] = defaultdict(float)
    last = lo
    for g in graphs:
        steps[f"{stage_of(g.time)}: before {g.label}"] += length(clip(serial, last, g.time))
        last = max(last, g.done)
    steps["job: after the last graph"] += length(clip(serial, last, hi))
    # per function: each sample stands for the time to the next one, when inside serial time
    funcs: dict[str, float] = defaultdict(float)
    starts = [a for a, _ in serial]
    times = [t for t, _ in rec.samples]
    for i, (t, stack) in enumerate(rec.samples):
        j = bisect.bisect_right(starts, t) - 1
        if j >= 0 and t < serial[j][1] and lo <= t <= hi:
            dt = min((times[i + 1] if i + 1 < len(times) else t + rec.interval) - t, 3 * rec.interval)
            funcs[f"{stage_of(t)}: {_frame_label(stack)}"] += dt

    def top(d: dict[str, float]) -> list[tuple[str, float]]:
        return sorted(((k, round(v, 3)) for k, v in d.items() if v > 0), key=lambda kv: -kv[1])

    return {"steps": top(steps), "functions": top(funcs)}


@dataclass
class Report:
    workload: str
    plan_threads: int
    build: Figures
    stages: dict[str, Figures]
    between_stages: float  # job overhead outside every stage: preflight, journal
    serial_steps: list[tuple[str, float]]
    serial_functions: list[tuple[str, float]]


def analyse(rec: Recording, lo: float, hi: float, stages: dict[str, tuple[float, float]], workload: str = "",
            plan_threads: int = 1) -> Report:
    graphs = _graphs(rec)
    per_stage = {s: figures(rec, a, b, graphs) for s, (a, b) in stages.items()}
    build = figures(rec, lo, hi, graphs)
    breakdown = serial_breakdown(rec, lo, hi, stages, graphs)
    return Report(workload, plan_threads, build, per_stage, build.wall - sum(f.wall for f in per_stage.values()),
                  breakdown["steps"], breakdown["functions"])


# ---------------------------------------------------------------------------
# the workloads
# ---------------------------------------------------------------------------
def graph_inputs(n: int, work: Path) -> tuple[str, list[str], str]:
    """``benchmarks/pipeline.py``'s tables: n vertices, 3n random edges with a weight, object ids."""
    sys.path.insert(0, _HERE)
    try:
        import graph as graph_bench
    finally:
        sys.path.remove(_HERE)
    data = graph_bench.make_inputs(n)
    pos = data["positions"]
    pd.DataFrame({"id": np.arange(n, dtype=np.int64), "x": pos[:, 0], "y": pos[:, 1], "z": pos[:, 2],
                  "object_id": data["object_ids"]}).to_parquet(work / "vertices.parquet", row_group_size=250_000)
    pd.DataFrame({"src": data["edges"][:, 0], "dst": data["edges"][:, 1], "weight": data["lattr__weight"]}).to_parquet(
        work / "edges.parquet", row_group_size=500_000)
    return "graph", [str(work / "vertices.parquet"), str(work / "edges.parquet")], \
        f"{n:,} vertices, {len(data['edges']):,} edges"


def points_inputs(n: int, work: Path) -> tuple[str, list[str], str]:
    """n uniform points in [0,1000)^3 (float32) with one float32 attribute."""
    rng = np.random.default_rng(0)
    pos = rng.uniform(0, 1000, (n, 3)).astype(np.float32)
    pd.DataFrame({"x": pos[:, 0], "y": pos[:, 1], "z": pos[:, 2], "value": rng.standard_normal(n).astype(np.float32)}
                 ).to_parquet(work / "points.parquet", row_group_size=1_000_000)
    return "points", [str(work / "points.parquet")], f"{n:,} points"


def build_spec(kind: str, inputs: list[str], out: Path) -> BuildSpec:
    return BuildSpec(kind=kind, inputs=inputs, out=str(out), chunk_shape=250.0, pyramid=[(2.0, 1.0)], shard_shape=2,
                     validate_level=5)


def measure(client: Any, kind: str, inputs: list[str], out: Path, workload: str = "", *, plan_threads: int = 32,
            interval: float = 0.01) -> Report:
    """One recorded build on ``client`` (one single-threaded worker), planned for ``plan_threads``, analysed."""
    with client.as_current(), dask.config.set({"zarr_vectors.plan-threads": plan_threads}), \
            recording(client, interval) as rec:
        lo = time()
        result = run_build(build_spec(kind, inputs, out))
        hi = time()
    stages = {s: (float(v["started"]), float(v["started"]) + float(v["seconds"])) for s, v in result.stages.items()}
    return analyse(rec, lo, hi, stages, workload or kind, plan_threads)


# ---------------------------------------------------------------------------
# reporting
# ---------------------------------------------------------------------------
def format_report(r: Report, top: int = 12) -> str:
    head = (f"{'':<10}{'T1':>8}{'tasks':>7}{'W':>8}{'S':>7}{'(client':>8}{'submit)':>8}{'D':>7}{'CP':>8}"
            f"{'(client)':>9}{'CP dag':>8}" + "".join(f"{f'x{n}':>8}" for n in WORKERS) + "  binds at 32")
    lines = [(f"{r.workload}: zv build on 1 worker, planned for {r.plan_threads} (write + pyramid 2 + shard 2 + "
             "validate L5); seconds, bounds x"),
             head]

    def row(name: str, f: Figures) -> str:
        return (f"{name:<10}{f.wall:8.2f}{f.tasks:7d}{f.task_time:8.2f}{f.serial:7.2f}{f.client:8.2f}{f.submit:8.2f}"
                f"{f.dispatch:7.2f}{f.critical_path:8.2f}{f.client_chain:9.2f}{f.dag_critical_path:8.2f}"
                + "".join(f"{f.bounds[n]['bound']:8.1f}" for n in WORKERS) + f"  {f.bounds[32]['binds']}")

    lines.append(row("build", r.build))
    lines += [row(s, f) for s, f in r.stages.items()]
    lines.append("  critical chain (seconds, count): " + "; ".join(
        f"{s}: " + ", ".join(f"{w} {t:.2f} x{c}" for w, t, c in f.chain[:4]) for s, f in r.stages.items()))
    lines.append(f"{'(job)':<10}{r.between_stages:8.2f}  outside every stage: preflight, journal")
    b32 = r.build.bounds[32]
    lines.append(f"  32 workers: Amdahl {b32['amdahl']:.1f}x, critical path {b32['critical_path']:.1f}x -> "
                 f"{b32['bound']:.1f}x ({'meets' if b32['bound'] >= 16 else 'misses'} the 16x target)")
    lines.append(f"  client-only serial time {r.build.client:.2f} s, by runner step (the time before each graph):")
    lines += [f"    {v:7.3f}  {k}" for k, v in r.serial_steps[:top]]
    lines.append("  ... by function (client stacks sampled during it):")
    lines += [f"    {v:7.3f}  {k}" for k, v in r.serial_functions[:top]]
    return "\n".join(lines)


@contextmanager
def one_worker(kind: str, work: Path) -> Iterator[Any]:
    """A client on a cluster of one single-threaded worker: ``embedded``, the job's own default
    (a ``LocalCluster``: its scheduler runs in this process, and its event loop shares the GIL
    with the client's planning), or ``processes``, as a deployment runs one (distributed's
    ``SubprocessCluster``: the scheduler and the worker in processes of their own, so the
    client's time is its own)."""
    if kind == "embedded":
        with connect(workers=1, threads_per_worker=1) as client:
            yield client
        return
    from distributed.deploy.subprocess import SubprocessCluster

    os.environ.update(WORKER_ENVIRON)  # what the embedded cluster gives its workers; read as a process starts
    with SubprocessCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster, \
            connect(scheduler_address=cluster.scheduler_address) as client:
        client.wait_for_workers(1, timeout=120)
        yield client


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", nargs="+", choices=("graph", "points"), default=["graph", "points"])
    parser.add_argument("--graph-n", type=int, default=1_000_000)
    parser.add_argument("--points-n", type=int, default=10_000_000)
    parser.add_argument("--workdir", default=None, help="parent folder of the inputs and stores (default: the temp dir)")
    parser.add_argument("--plan-threads", type=int, default=32, help="plan the graphs for this many worker threads")
    parser.add_argument("--builds", type=int, default=1,
                        help="builds of each workload in a row on the same worker: the first meets a fresh "
                             "worker heap, later ones a worker that has built before (a running cluster)")
    parser.add_argument("--json", default=None, help="also write the reports here")
    parser.add_argument("--cluster", choices=("embedded", "processes"), default="processes",
                        help="processes (default): the scheduler and the worker in processes of their own, as "
                             "deployed; embedded: the job's LocalCluster, whose scheduler shares this process")
    args = parser.parse_args()
    if args.builds < 1:
        parser.error(f"--builds must be at least 1, got {args.builds}")
    if args.workdir is not None and not os.path.isdir(args.workdir):
        parser.error(f"--workdir {args.workdir}: no such directory")
    work = Path(tempfile.mkdtemp(prefix="zv-bench-scaling-", dir=args.workdir))
    makers = {"graph": (graph_inputs, args.graph_n), "points": (points_inputs, args.points_n)}
    reports = []
    try:
        with one_worker(args.cluster, work) as client:
            for name in args.workloads:
                make, n = makers[name]
                (work / name).mkdir()
                (work / f"{name}-warm").mkdir()
                kind, warm_inputs, _ = make(min(n, 10_000), work / f"{name}-warm")
                with client.as_current():
                    run_build(build_spec(kind, warm_inputs, work / f"{name}-warm.zv"))  # worker imports, pools
                kind, inputs, what = make(n, work / name)
                for run in range(args.builds):
                    label = f"{name} ({what})" + (f", build {run + 1} of {args.builds}" if args.builds > 1 else "")
                    report = measure(client, kind, inputs, work / f"{name}-{run}.zv", label,
                                     plan_threads=args.plan_threads)
                    print(format_report(report), flush=True)
                    reports.append(asdict(report))
                    shutil.rmtree(work / f"{name}-{run}.zv", ignore_errors=True)
        if args.json:
            Path(args.json).write_text(json.dumps(reports, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
