"""``benchmarks/scaling.py``: the accounting on a stream with known answers, and the whole
recording on a tiny real build (so the script keeps working as the stages change)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from zarr_vectors.execution import runner

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "scaling.py"


@pytest.fixture(scope="module")
def scaling():
    spec = importlib.util.spec_from_file_location("zv_bench_scaling", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # the scheduler plugin is unpickled by reference
    spec.loader.exec_module(module)
    return module


def _task(start: float, stop: float, *deps: str) -> dict:
    return {"spans": [(start, stop)], "deps": list(deps)}


def test_serial_time_and_critical_path_of_a_known_stream(scaling):
    """Two waited-for graphs; the second depends on the first across a client gap.

    Window [0, 10].  Graph 1 submitted at 1: a (1.5-3.5), b after a (3.5-4.5), c (4.7-5.2);
    the client works 5.2-6; graph 2 at 6: d after b (6.5-8.5); the client works to 10.
    """
    rec = scaling.Recording(
        graphs=[{"time": 1.0, "keys": ["b", "c"], "tasks": ["a", "b", "c"]}, {"time": 6.0, "keys": ["d"], "tasks": ["d"]}],
        tasks={"a": _task(1.5, 3.5), "b": _task(3.5, 4.5, "a"), "c": _task(4.7, 5.2), "d": _task(6.5, 8.5, "b")},
        calls=[scaling.Call("compute", "one", 0.9, 5.3, {"b", "c"}), scaling.Call("persist", "two", 5.9, 8.6, {"d"})],
    )
    f = scaling.figures(rec, 0.0, 10.0)
    assert f.task_time == pytest.approx(5.5)
    assert f.client == pytest.approx(1.0 + 0.8 + 1.5)  # before graph 1, between, after graph 2
    assert f.submit == pytest.approx(0.5 + 0.5)  # submitted, first task not started yet
    assert f.dispatch == pytest.approx(0.2)  # between b and c
    assert f.task_time + f.serial + f.dispatch == pytest.approx(f.wall)
    # replay: a ends 1+2, b 3+1, chain waits to 4, +0.8 client, d max(4.8, b=4)+2 = 6.8, +1.5
    assert f.critical_path == pytest.approx(8.3)
    assert f.client_chain == pytest.approx(3.3)
    assert f.dag_critical_path == pytest.approx(5.0)  # a -> b -> d
    chain = {what: (seconds, count) for what, seconds, count in f.chain}
    assert chain == {"client": (pytest.approx(3.3), 3), "a": (2.0, 1), "b": (1.0, 1), "d": (2.0, 1)}
    b8 = f.bounds[8]
    assert b8["amdahl"] == pytest.approx(10 / (4.3 + 5.7 / 8))
    assert b8["critical_path"] == pytest.approx(10 / 8.3)
    assert b8["binds"] == "critical path" and b8["bound"] == pytest.approx(10 / 8.3)
    labels = [g.label for g in scaling._graphs(rec)]
    assert labels == ["compute 'one'", "persist 'two'"]


def test_a_started_graph_is_not_waited_for(scaling):
    """``runner.start`` returns at once: its tasks overlap client work, which stays client time."""
    rec = scaling.Recording(
        graphs=[{"time": 0.0, "keys": ["e"], "tasks": ["e"]}, {"time": 1.5, "keys": ["f"], "tasks": ["f"]}],
        tasks={"e": _task(0.2, 2.2), "f": _task(2.2, 3.2, "e")},
        calls=[scaling.Call("start", "start", 0.0, 0.01, {"e"}), scaling.Call("compute", "use", 1.4, 3.3, {"f"})],
    )
    graphs = scaling._graphs(rec)
    assert [g.blocking for g in graphs] == [False, True]
    f = scaling.figures(rec, 0.0, 4.0, graphs)
    assert f.client == pytest.approx(0.2 + 0.8)  # before e starts (not a wait), after f
    assert f.submit == pytest.approx(0.0) and f.dispatch == pytest.approx(0.0)
    assert f.critical_path == pytest.approx(3.8)  # e ends 2, f max(1.5, 2)+1 = 3, +0.8


@pytest.mark.slow
def test_recorded_tiny_build_adds_up(scaling, tmp_path):
    """A real 1-worker build: every stage accounted, the identities of the model hold."""
    from pipeline.cluster import connect

    kind, inputs, _ = scaling.points_inputs(3000, tmp_path)
    originals = (runner.compute, runner.persist, runner.start)
    with connect(workers=1, threads_per_worker=1) as client:
        report = scaling.measure(client, kind, inputs, tmp_path / "tiny.zv", plan_threads=4)
        assert scaling.PLUGIN not in client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.plugins))
    assert (runner.compute, runner.persist, runner.start) == originals  # the wrappers are gone
    assert list(report.stages) == list(scaling.STAGES)
    for f in [report.build, *report.stages.values()]:
        assert f.tasks > 0 and f.task_time > 0
        assert f.task_time + f.serial + f.dispatch == pytest.approx(f.wall, abs=1e-6)
        assert max(f.dag_critical_path, f.client_chain) <= f.critical_path <= f.wall + 1e-6
        bounds = [f.bounds[n]["bound"] for n in scaling.WORKERS]
        assert all(1.0 - 1e-9 <= b <= n for b, n in zip(bounds, scaling.WORKERS)) and bounds == sorted(bounds)
    assert sum(f.wall for f in report.stages.values()) <= report.build.wall
    assert any("compute 'scan'" in step for step, _ in report.serial_steps)
    assert report.serial_functions  # the client thread was sampled during serial time
    assert sum(seconds for _, seconds, _ in report.build.chain) == pytest.approx(report.build.critical_path, abs=1e-2)
    text = scaling.format_report(report)
    assert "binds at 32" in text and "validate" in text


def test_plan_threads_setting_sizes_the_graph_for_a_larger_cluster(zv_config):
    """``zarr_vectors.plan-threads`` plans for that many threads whatever runs the graph."""
    import numpy as np

    zv_config("plan-threads", 32)
    assert runner.parallelism() == 32
    assert len(runner.task_runs(np.ones(640, dtype=np.int64), 1)) == 4 * 32  # tasks-per-thread 4, 5 items each


def test_a_graph_of_fresh_keys_is_billed_to_the_running_call(scaling):
    """A dict of collections reaches the scheduler under a key made on submission: the call
    running then owns it; a graph outside every call is named as such."""
    rec = scaling.Recording(
        graphs=[{"time": 1.0, "keys": ["dict-123"], "tasks": ["x", "dict-123"]},
                {"time": 3.0, "keys": ["len-9"], "tasks": ["len-9"]}],
        tasks={"x": _task(1.1, 1.5), "dict-123": _task(1.5, 1.6, "x"), "len-9": _task(3.1, 3.2)},
        calls=[scaling.Call("compute", "manifests", 0.9, 1.7, set())],
    )
    assert [g.label for g in scaling._graphs(rec)] == ["compute 'manifests'", "dask.compute outside the runner"]


def test_a_key_computed_again_is_a_run_of_its_own(scaling):
    """Each input pass re-reads the same Parquet partition keys: every run keeps its own
    interval (a worker that still knows the key reports the earlier ones too), and a
    dependent reads the latest run.  One record per key billed the earlier runs as idle."""
    from types import SimpleNamespace

    deps = {"part": [], "use": ["part"], "kept": []}
    scheduler = SimpleNamespace(tasks={k: SimpleNamespace(state="released", dependencies=[
        SimpleNamespace(key=d) for d in ds]) for k, ds in deps.items()})
    rec = scaling.StreamRecorder()

    def finish(key, *spans):
        rec.transition(key, "processing", "memory",
                       startstops=[{"action": "compute", "start": a, "stop": b} for a, b in spans])

    rec.update_graph(scheduler, keys=["part", "kept"], tasks=["part", "kept"])
    finish("part", (1.0, 2.0))
    finish("kept", (2.0, 2.2))
    scheduler.tasks["kept"].state = "memory"  # persisted: a later graph lists it, nothing runs
    rec.update_graph(scheduler, keys=["use"], tasks=["part", "use", "kept"])
    rec.update_graph(scheduler, keys=["use"], tasks=["part"])  # listed again before its run ends: the same run
    finish("part", (1.0, 2.0), (3.0, 3.5))
    finish("use", (3.5, 4.0))
    finish("part", (1.0, 2.0), (3.0, 3.5), (5.0, 5.2))  # lost with its worker and computed again, unlisted

    assert [g["tasks"] for g in rec.graphs] == [["part", "kept"], ["part#1", "use", "kept", "part#2"], ["part#1"]]
    assert rec.tasks == {"part": _task(1.0, 2.0), "kept": _task(2.0, 2.2), "part#1": _task(3.0, 3.5),
                         "use": _task(3.5, 4.0, "part#1"), "part#2": _task(5.0, 5.2)}
    assert scaling._group("('read_parquet-0a1b', 3)#1") == "read_parquet"
    for g, t in zip(rec.graphs, (0.5, 2.5, 2.6)):
        g["time"] = t  # the recorder stamps the wall clock
    f = scaling.figures(scaling.Recording(graphs=rec.graphs, tasks=rec.tasks), 0.0, 6.0)
    assert f.task_time == pytest.approx(2.4)  # every run of the partition counts, the kept key once
