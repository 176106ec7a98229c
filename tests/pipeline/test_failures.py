"""Fault injection: a task that fails once, a worker killed mid-write, an interrupted reconcile.

Dask runs a task at least once; every task is idempotent (whole-object writes of
deterministic bytes), so each of these must end in exactly the store a clean run writes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading

import dask
import numpy as np
import pandas as pd
import pytest
from file_tree import tree
from pipeline_helpers import (
    graph_frames,
    journal,
    points_frame,
    register_flaky,
    wait_for,
    write_parquet_parts,
)

import zarr_vectors as zv
from pipeline.cli import main as zv_main
from zarr_vectors.store.grid import GridArray
from zarr_vectors.store.groups import Level
from zarr_vectors.validation import validate
from zarr_vectors.write import linked, points

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")]


# ---------------------------------------------------------------------------
# (a) a task that fails once
# ---------------------------------------------------------------------------
@pytest.fixture
def flaky(local_cluster):
    """``flaky://`` registered here and on the session cluster's workers."""
    register_flaky()
    assert set(local_cluster.run(register_flaky).values()) == {"flaky"}
    return local_cluster


def test_a_write_task_that_fails_once_is_retried_to_identical_bytes(tmp_path, cli, flaky, zv_config):
    df = points_frame(20_000, seed=41, objects=30, float32=True)
    src = write_parquet_parts(df, tmp_path / "in.parquet", parts=4)
    zv_config("write.min-rows-per-task", 3000)  # several owner tasks
    common = ["--chunk-shape", "20", "--bin-shape", "10", "--scheduler-address", flaky.scheduler.address, "--json"]
    clean = tmp_path / "clean" / "s.zv"
    assert cli("build", "points", src, clean, *common).rc == 0

    faults = tmp_path / "faults"
    faults.mkdir()
    faulty = tmp_path / "faulty" / "s.zv"
    opts = ["--storage-option", f"fail_dir={faults}", "--storage-option", "fail_on=/0/vertices/c/"]
    run = cli("build", "points", src, f"flaky://{faulty}", *opts, *common, "--validate", "5")
    assert run.rc == 0, run.err
    marker = (faults / "failed-once").read_text()
    assert "/0/vertices/c/" in marker  # the fault fired, in a cell write of a worker task
    assert int(marker.split()[0]) in set(flaky.run(os.getpid).values())
    assert run.json()["stages"]["write"]["num_tasks"] > 1
    assert tree(faulty) == tree(clean)  # the retry wrote exactly the clean run's bytes
    assert validate(str(faulty), 5).ok


def test_without_retries_the_same_fault_fails_the_job(tmp_path, cli, flaky):
    """The retry is what saves the job above: with none, the write stage fails (exit 1, journalled)."""
    df = points_frame(5000, seed=42)
    src = tmp_path / "in.parquet"
    df.to_parquet(src, index=False)
    with dask.config.set({"zarr_vectors.task-retries": 0}):
        faults = tmp_path / "faults"
        faults.mkdir()
        out = tmp_path / "s.zv"
        run = cli("build", "points", src, f"flaky://{out}", "--chunk-shape", "25",
                  "--storage-option", f"fail_dir={faults}", "--storage-option", "fail_on=/0/vertices/c/",
                  "--scheduler-address", flaky.scheduler.address)
        assert run.rc == 1
        # the filesystem's OSError is a failed request of the store's backend, named as such
        assert_one_failure_line(run.err, "write", "StorageRequestError",
                                f"store 'flaky://{out}': OSError: injected fault: write of ")
        state = journal(out)
        assert state["status"] == "failed" and state["stages"]["write"]["status"] == "failed"
        assert "injected fault" in state["stages"]["write"]["error"]
        # and --resume finishes it (the fault has fired; the marker keeps it from firing again)
        resumed = cli("build", "points", src, f"flaky://{out}", "--chunk-shape", "25", "--resume",
                      "--storage-option", f"fail_dir={faults}", "--storage-option", "fail_on=/0/vertices/c/",
                      "--scheduler-address", flaky.scheduler.address)
        assert resumed.rc == 0, resumed.err
        assert journal(out)["status"] == "done" and validate(str(out), 5).ok
        assert len(zv.read(str(out))) == 5000


def assert_one_failure_line(err: str, stage: str, kind: str, message: str) -> None:
    """The failure is reported as one line naming the stage and the exception: no traceback, no bare warning."""
    lines = [line for line in err.splitlines() if line.startswith("zv build:")]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"zv build: stage '{stage}' failed: {kind}: {message}"), lines[0]
    assert "Traceback" not in err


def test_data_refused_by_the_writer_names_the_input_file(tmp_path, cli):
    """Regression (hunt): the writer's checks name an array and row, not the file the data
    came from; the build's failure line now names the inputs too (once: a reader's own
    message already names its file)."""
    (tmp_path / "nan.csv").write_text("x,y,z,w\n1,2,3,4\nnan,2,3,5\n")
    run = cli("build", "points", tmp_path / "nan.csv", tmp_path / "a.zv")
    assert run.rc == 2
    assert_one_failure_line(run.err, "write", "InputError", "positions row 1 is not finite (NaN or infinity); "
                            f"nothing was written; input: {tmp_path / 'nan.csv'}")
    (tmp_path / "flat.ply").write_text("ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n"
                                       "property float z\nelement face 0\nproperty list uchar int vertex_indices\n"
                                       "end_header\n0 0 0\n1 0 0\n0 1 0\n")
    # a mesh file of no faces is refused before the job starts (it was refused by the write
    # stage, after its journal was written beside the store)
    run = cli("build", "mesh", tmp_path / "flat.ply", tmp_path / "b.zv")
    assert run.rc == 2 and run.err.strip().splitlines()[-1] == (
        f"zv build: error: {str(tmp_path / 'flat.ply')!r}: holds no faces for a mesh"), run.err
    assert not (tmp_path / "b.zv").exists() and not (tmp_path / "b.zv.zvjob.json").exists()
    (tmp_path / "bare.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\n")
    run = cli("build", "mesh", tmp_path / "bare.obj", tmp_path / "c.zv")
    assert run.rc == 2 and "holds no faces for a mesh" in run.err and not (tmp_path / "c.zv.zvjob.json").exists()


def test_a_stage_failure_is_one_line_and_crosses_processes():
    """A detached job's StageFailedError is pickled back to the scheduler; distributed's
    cancellation reports span lines; an empty message still says what it was."""
    import pickle
    from concurrent.futures import CancelledError

    from zarr_vectors.errors import StageFailedError

    again = pickle.loads(pickle.dumps(StageFailedError("shard", OSError("two\nlines"), "pack shards")))
    assert (again.stage, again.step, type(again.cause)) == ("shard", "pack shards", OSError)
    assert str(again) == "stage 'shard' failed in step 'pack shards': OSError: two; lines"
    assert str(StageFailedError("write", CancelledError())) == "stage 'write' failed: CancelledError: (no message)"
    noted = RuntimeError("worker killed")
    noted.add_note("the root names level 0 only")  # what the failed step left, as the pyramid says it
    assert str(StageFailedError("pyramid", noted)) == ("stage 'pyramid' failed: RuntimeError: worker killed; "
                                                       "the root names level 0 only")


def test_a_failed_shard_task_names_the_stage_and_its_exception(tmp_path, cli, flaky):
    """Regression (issue 13): a failing stage ended in a bare warning line; now one line, a JSON error, exit 1."""
    src = tmp_path / "in.parquet"
    points_frame(3000, seed=46).to_parquet(src, index=False)
    faults = tmp_path / "faults"
    faults.mkdir()
    out = tmp_path / "s.zv"
    with dask.config.set({"zarr_vectors.task-retries": 0}):
        run = cli("build", "points", src, f"flaky://{out}", "--chunk-shape", "25", "--pyramid", "2",
                  "--shard-shape", "2", "--validate", "5", "--json", "--storage-option", f"fail_dir={faults}",
                  "--storage-option", "fail_on=.zv-shard-staging", "--scheduler-address", flaky.scheduler.address)
    assert run.rc == 1
    failed_request = f"store 'flaky://{out}': OSError: injected fault: write of "
    assert_one_failure_line(run.err, "shard", "StorageRequestError", failed_request)
    summary = run.json()
    assert summary["ok"] is False and summary["store"] == f"flaky://{out}"
    error = summary["error"]
    assert (error["stage"], error["type"], error["step"]) == ("shard", "StorageRequestError", "pack shards")
    assert error["message"].startswith(failed_request) and ".zv-shard-staging" in error["message"]
    state = journal(out)
    assert state["status"] == "failed" and state["error"].startswith(f"shard: StorageRequestError: {failed_request}")
    assert [state["stages"][s]["status"] for s in ("write", "pyramid", "shard")] == ["done", "done", "failed"]
    assert state["stages"]["shard"]["error_type"] == "StorageRequestError"


@pytest.fixture
def fragile_cluster():
    """A dedicated 2-worker cluster whose scheduler gives up on a task the first time its worker dies."""
    from distributed import Client, LocalCluster

    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster, set_as_default=False) as client:
        register_flaky()
        client.run(register_flaky)
        yield client


def build_holding_a_shard_write(tmp_path, client):
    """Start ``zv build ... --shard-shape 2`` in a thread; returns (thread, result, pid of the held worker, faults)."""
    src = tmp_path / "in.parquet"
    points_frame(3000, seed=47).to_parquet(src, index=False)
    faults = tmp_path / "faults"
    faults.mkdir()
    argv = ["build", "points", str(src), f"flaky://{tmp_path / 's.zv'}", "--chunk-shape", "25", "--shard-shape",
            "2", "--storage-option", f"fail_dir={faults}", "--storage-option", "hold_on=.zv-shard-staging",
            "--scheduler-address", client.scheduler.address]
    result: dict = {}
    job = threading.Thread(target=lambda: result.update(rc=zv_main(argv)), daemon=True)
    job.start()
    held = wait_for(lambda: (faults / "held").exists() and (faults / "held").read_text(), timeout=120,
                    what="a shard write to be held")
    return job, result, int(held.split()[0]), faults


def test_a_worker_killed_in_the_shard_stage_names_the_stage(tmp_path, fragile_cluster, capsys):
    capsys.readouterr()
    job, result, pid, faults = build_holding_a_shard_write(tmp_path, fragile_cluster)
    assert pid in set(fragile_cluster.run(os.getpid).values())
    os.kill(pid, signal.SIGKILL)
    job.join(timeout=120)
    (faults / "release").touch()
    assert not job.is_alive() and result["rc"] == 1
    assert_one_failure_line(capsys.readouterr().err, "shard", "KilledWorker", "Attempted to run task ")
    assert journal(tmp_path / "s.zv")["stages"]["shard"]["error_type"] == "KilledWorker"


def test_a_cancelled_shard_task_names_the_stage(tmp_path, fragile_cluster, capsys):
    from distributed import Future

    capsys.readouterr()
    job, result, _, faults = build_holding_a_shard_write(tmp_path, fragile_cluster)
    running = wait_for(lambda: [k for keys in fragile_cluster.processing().values() for k in keys
                                if str(k).startswith("_pack_task")], timeout=60, what="the pack task")
    fragile_cluster.cancel([Future(k, fragile_cluster) for k in running], force=True)
    job.join(timeout=120)
    (faults / "release").touch()
    assert not job.is_alive() and result["rc"] == 1
    # pack tasks run one per worker thread: the line names whichever cancelled one the runner saw first
    err = capsys.readouterr().err
    line = next((ln for ln in err.splitlines() if ln.startswith("zv build:")), err)
    named = [k for k in running if f"FutureCancelledError: {k} cancelled" in line]
    assert len(named) == 1, (running, err)
    assert_one_failure_line(err, "shard", "FutureCancelledError", f"{named[0]} cancelled")
    assert journal(tmp_path / "s.zv")["stages"]["shard"]["status"] == "failed"


# ---------------------------------------------------------------------------
# (b) a worker process killed in the middle of the write stage
# ---------------------------------------------------------------------------
@pytest.fixture
def own_cluster():
    """A dedicated 2-worker cluster: this test kills one of its workers."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster, set_as_default=False) as client:
        yield client


def test_a_worker_killed_during_the_write_stage(tmp_path, own_cluster, monkeypatch):
    rng = np.random.default_rng(43)
    n = 1_000_000
    pos = rng.uniform(0, 1000, (n, 3)).astype(np.float32)
    df = pd.DataFrame({"x": pos[:, 0], "y": pos[:, 1], "z": pos[:, 2], "w": np.arange(n, dtype=np.int64)})
    src = write_parquet_parts(df, tmp_path / "in.parquet", parts=12)
    out = tmp_path / "s.zv"
    argv = ["build", "points", str(src), str(out), "--chunk-shape", "125", "--json",
            "--scheduler-address", own_cluster.scheduler.address]
    result: dict = {}
    job = threading.Thread(target=lambda: result.update(rc=zv_main(argv)), daemon=True)
    job.start()

    def writing_worker():
        for worker, keys in own_cluster.processing().items():
            if any(str(k).startswith("write_owner") for k in keys):
                return worker
        assert job.is_alive(), "the build finished before a write task was seen"
        return None

    victim = wait_for(writing_worker, timeout=120, interval=0.005, what="a write_owner task to run")
    pids = own_cluster.run(os.getpid)
    os.kill(pids[victim], signal.SIGKILL)  # the worker process dies mid-task; its nanny starts a new one
    job.join(timeout=300)
    assert not job.is_alive()
    wait_for(lambda: victim not in own_cluster.scheduler_info()["workers"], 30, what="the scheduler to drop the worker")
    state = journal(out)
    if result["rc"] != 0:  # distributed could not recover the stage: --resume must
        assert state["stages"]["write"]["status"] == "failed"
        assert zv_main(argv + ["--resume"]) == 0
        state = journal(out)
    assert state["status"] == "done" and state["stages"]["write"]["num_vertices"] == n
    assert validate(str(out), 5).ok
    data = zv.read(str(out))
    assert len(data) == n
    order = np.argsort(data.attributes["w"])  # w is the input row: every record back, exactly once
    np.testing.assert_array_equal(data.attributes["w"][order], np.arange(n))
    np.testing.assert_array_equal(data.positions[order], pos)


# ---------------------------------------------------------------------------
# (c) an interrupted reconcile
# ---------------------------------------------------------------------------
class Crash(RuntimeError):
    pass


def crash_on_call(monkeypatch, owner, name: str, call: int, writer=None):
    """Make ``owner.name`` raise Crash on its ``call``-th call (1-based); earlier calls run.

    A crash stands for the process being killed there, so the ``writer`` module's clean-up of a
    failed write (``removed_if_unfinished``), which a killed process never runs, is switched off."""
    if writer is not None:
        monkeypatch.setattr(writer, "removed_if_unfinished", lambda storage: contextlib.nullcontext())
    real = getattr(owner, name)
    calls = {"n": 0}

    def wrapper(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == call:
            raise Crash(f"{owner.__name__}.{name}: simulated crash (call {call})")
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)
    return calls


def capture_reconcile(monkeypatch, module):
    """Record the reconcile task's arguments (its inputs: the owners' summaries) when it runs."""
    real = module._reconcile
    captured: dict = {}

    def recording(*args):
        captured["args"] = args
        return real(*args)

    monkeypatch.setattr(module, "_reconcile", recording)
    return real, captured


CRASH_POINTS = {
    "between presence lists": (GridArray, "set_nonempty_chunks", 2),
    "before level metadata": (Level, "write_metadata", 1),
}


def write_points_store(url):
    df = points_frame(4000, seed=44, objects=12)
    return zv.write_points(
        url, df[["x", "y", "z"]].to_numpy(), chunk_shape=20, object_ids=df["object_id"].to_numpy(),
        attributes={"intensity": df["intensity"].to_numpy()},
        object_attributes={"size": np.arange(12, dtype=np.float32)},
    )


def write_graph_store(url, overwrite=False):
    g = graph_frames(500, 1200, seed=45)
    index = {v: i for i, v in enumerate(g.vertices["id"].tolist())}
    edges = np.asarray([[index[a], index[b]] for a, b in g.edges[["src", "dst"]].itertuples(index=False)])
    return zv.write_graph(url, g.vertices[["x", "y", "z"]].to_numpy(), edges, chunk_shape=25,
                          edge_attributes={"weight": g.edges["weight"].to_numpy()},
                          attributes={"mass": g.vertices["mass"].to_numpy()}, overwrite=overwrite)


# A linked write's vertex presence lists are written beside its link writes, before its
# reconcile step (whose own presence lists, the links family's, go out in one batch):
# for the graph that crash point is the next test's.
@pytest.mark.parametrize("kind, write, module, crash", [
    ("points", write_points_store, points, "between presence lists"),
    ("points", write_points_store, points, "before level metadata"),
    ("graph", write_graph_store, linked, "before level metadata"),
])  # fmt: skip
def test_an_interrupted_reconcile_rerun_gives_the_same_store(tmp_path, monkeypatch, kind, write, module, crash):
    clean = tmp_path / "clean" / "s.zv"
    write(str(clean))  # local threads: monkeypatches below reach the tasks
    expected = tree(clean)

    store = tmp_path / "crashed" / "s.zv"
    real, captured = capture_reconcile(monkeypatch, module)
    with monkeypatch.context() as patch:
        owner, name, call = CRASH_POINTS[crash]  # (create_store sends level 0's first document in a batch)
        calls = crash_on_call(patch, owner, name, call, writer=module)
        # One task at a time: the reconcile's parts run side by side on threads, and a
        # part already running when another crashes would make further calls.
        with pytest.raises(Crash), dask.config.set(scheduler="synchronous"):
            write(str(store))
        assert calls["n"] == call
    crashed = tree(store)
    assert crashed != expected  # the crash left a store that is not the finished one
    assert not validate(str(store), 3).ok

    real(*captured["args"])  # re-run the interrupted reconcile with the same inputs
    assert tree(store) == expected
    real(*captured["args"])  # and once more: reconcile is safe to run twice
    assert tree(store) == expected
    assert validate(str(store), 5).ok


def test_a_linked_write_interrupted_between_its_vertex_presence_lists_reruns_to_the_same_store(tmp_path, monkeypatch):
    clean = tmp_path / "clean" / "s.zv"
    write_graph_store(str(clean))
    expected = tree(clean)

    store = tmp_path / "crashed" / "s.zv"
    _, captured = capture_reconcile(monkeypatch, linked)
    with monkeypatch.context() as patch:
        owner, name, call = CRASH_POINTS["between presence lists"]
        calls = crash_on_call(patch, owner, name, call, writer=linked)
        with pytest.raises(Crash), dask.config.set(scheduler="synchronous"):
            write_graph_store(str(store))
        assert calls["n"] == call
    assert "args" not in captured  # the crash came before the reconcile step
    assert not validate(str(store), 3).ok
    write_graph_store(str(store), overwrite=True)  # the write again, over what the crash left
    assert tree(store) == expected
    assert validate(str(store), 5).ok


def test_a_store_that_stops_answering_fails_the_command_not_its_input(tmp_path, cli, monkeypatch):
    """A StorageRequestError is a failed stage or job (exit 1, one line), never "bad input" (exit 2),
    though it is a ZarrVectorsError and an OSError, which the input checks catch."""
    from pipeline import jobs
    from zarr_vectors.errors import StorageRequestError

    out = tmp_path / "s.zv"
    zv.write_points(str(out), np.random.default_rng(3).uniform(0, 100, (500, 3)), chunk_shape=50.0)

    def gone(*args, **kwargs):
        raise StorageRequestError("store 's3://b/s.zv': GenericError: Error performing GET … [Connection refused]")

    monkeypatch.setattr(zv, "build_pyramid", gone)
    run = cli("pyramid", out, "--factor", "2")
    assert run.rc == 1, run.err
    assert run.err.strip().splitlines()[-1] == ("zv pyramid: stage 'pyramid' failed: StorageRequestError: store "
                                                "'s3://b/s.zv': GenericError: Error performing GET … [Connection refused]")
    src = tmp_path / "in.parquet"
    points_frame(200, seed=4).to_parquet(src, index=False)
    monkeypatch.setattr(jobs, "run_build", gone)  # e.g. the journal's save at a stage's start
    run = cli("build", "points", src, tmp_path / "t.zv", "--chunk-shape", "25")
    assert run.rc == 1, run.err
    assert run.err.strip().splitlines()[-1].endswith("failed: StorageRequestError: store 's3://b/s.zv': "
                                                     "GenericError: Error performing GET … [Connection refused]")
    assert "zv build: job " in run.err and "error:" not in run.err
    monkeypatch.setattr(zv, "open_store", gone)  # a command without stages: still a failure, not bad input
    run = cli("info", out)
    assert run.rc == 1 and run.err.strip().splitlines()[-1].startswith("zv info: StorageRequestError: store "), run.err
