"""Jobs outside one attached command: ``--detach`` + ``zv status``, and ``--resume`` after a killed run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from file_tree import tree
from pipeline_helpers import journal, sorted_rows, wait_for, write_parquet_parts

import zarr_vectors as zv
from zarr_vectors.validation import validate

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


def big_points(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    pos = rng.uniform(0, 1000, (n, 3)).astype(np.float32)
    return pd.DataFrame({"x": pos[:, 0], "y": pos[:, 1], "z": pos[:, 2],
                         "w": rng.integers(0, 1 << 30, n).astype(np.int32)})


def assert_every_row_reads_back(out: Path, df: pd.DataFrame) -> None:
    data = zv.read(str(out))
    assert len(data) == len(df)
    got = sorted_rows(data.positions, data.attributes["w"])
    np.testing.assert_array_equal(got, sorted_rows(df[["x", "y", "z"]].to_numpy(), df["w"].to_numpy()))


def cluster_idle(client) -> bool:
    return not any(client.processing().values())


def test_detach_returns_a_job_id_and_status_follows_it(tmp_path, cli, scheduler, local_cluster):
    df = big_points(600_000, seed=1)
    src = write_parquet_parts(df, tmp_path / "in.parquet", parts=4)
    out = tmp_path / "detached.zv"
    t0 = time.time()
    run = cli("build", "points", src, out, "--chunk-shape", "250", "--bin-shape", "125", "--validate", "5",
              "--detach", "--json", "--scheduler-address", scheduler)
    returned = time.time()
    assert run.rc == 0, run.err
    submitted = run.json()
    job = submitted["job_id"]
    assert submitted == {"job_id": job, "store": str(out)}
    assert returned - t0 < 10

    seen: list[str] = []

    def finished():
        status = cli("status", job, "--json")
        state = status.json()
        if state["status"] == "pending":  # the job has not written its journal yet (it said "error", exit 2)
            assert status.rc == 3, status
            return False
        seen.append(state["status"])
        assert status.rc == {"done": 0, "failed": 1}.get(state["status"], 3)
        assert state["status"] != "failed", state.get("error")
        return state if state["status"] == "done" else False

    state = wait_for(finished, timeout=60, interval=0.2, what=f"detached job {job}")
    assert "running" in seen  # the command returned while the job was still running
    assert state["finished"] > returned
    assert state["store"] == str(out) and state["planned"] == ["write", "validate"]
    assert state["stages"]["write"]["num_vertices"] == 600_000
    assert state["stages"]["validate"] == {**state["stages"]["validate"], "status": "done", "errors": 0, "level": 5}
    text = cli("status", job)
    assert text.rc == 0 and text.out.startswith(f"job {job}: done")
    assert validate(str(out), 5).ok
    assert_every_row_reads_back(out, df)
    wait_for(lambda: cluster_idle(local_cluster), 30, what="the cluster to go idle")


def test_detach_refuses_usage_errors_before_submitting(tmp_path, cli, scheduler):
    run = cli("build", "points", tmp_path / "missing.parquet", tmp_path / "s.zv", "--detach",
              "--scheduler-address", scheduler)
    assert run.rc == 2 and "input not found" in run.err
    assert not list((tmp_path / "home").rglob("*.json"))  # no job was remembered
    embedded = cli("build", "points", tmp_path / "missing.parquet", tmp_path / "s.zv", "--detach")
    assert embedded.rc == 2 and "--detach needs a running cluster" in embedded.err


# ---------------------------------------------------------------------------
# --resume after the job's own process was killed
# ---------------------------------------------------------------------------
def start_build(args: list, log: Path) -> subprocess.Popen:
    env = dict(os.environ)
    return subprocess.Popen([sys.executable, "-m", "pipeline.cli", "build", *map(str, args)],
                            stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env, cwd=str(Path.cwd()))


def kill_when(proc: subprocess.Popen, out: Path, predicate, timeout: float = 90) -> dict:
    def ready():
        assert proc.poll() is None, f"the build ended before it could be killed (exit {proc.returncode})"
        try:
            state = journal(out)
        except (FileNotFoundError, ValueError):
            return False
        return state if predicate(state) else False

    state = wait_for(ready, timeout, interval=0.02, what="the stage to kill the build in")
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    return state


@pytest.mark.slow
def test_resume_after_the_build_process_is_killed_during_write(tmp_path, cli, scheduler, local_cluster):
    df = big_points(2_000_000, seed=2)
    src = write_parquet_parts(df, tmp_path / "in.parquet", parts=8)
    out = tmp_path / "s.zv"
    args = ["points", src, out, "--chunk-shape", "250", "--validate", "5", "--scheduler-address", scheduler]
    proc = start_build(args, tmp_path / "first.log")
    kill_when(proc, out, lambda s: s["stages"].get("write", {}).get("step") == "write vertices")
    wait_for(lambda: cluster_idle(local_cluster), 60, what="the killed client's tasks to drain")
    state = journal(out)
    assert state["status"] == "running" and state["stages"]["write"]["status"] == "running"
    assert "validate" not in state["stages"]
    job = state["job_id"]
    status = cli("status", out)  # the journal still says "running"; its process is gone from this host
    assert status.rc == 1 and status.out.startswith(f"job {job}: interrupted"), status

    run = cli("build", *args, "--resume", "--json")
    assert run.rc == 0, run.err
    summary = run.json()
    assert summary["job_id"] == job  # the same job, finished
    state = journal(out)
    assert state["status"] == "done"
    assert [state["stages"][s]["status"] for s in ("write", "validate")] == ["done", "done"]
    assert validate(str(out), 5).ok
    assert_every_row_reads_back(out, df)


@pytest.mark.slow
def test_resume_skips_the_stages_done(tmp_path, cli, scheduler, local_cluster):
    df = big_points(1_500_000, seed=3)
    src = write_parquet_parts(df, tmp_path / "in.parquet", parts=6)
    out = tmp_path / "s.zv"
    args = ["points", src, out, "--chunk-shape", "250", "--bin-shape", "50", "--validate", "5",
            "--scheduler-address", scheduler]
    proc = start_build(args, tmp_path / "first.log")
    killed = kill_when(proc, out, lambda s: s["stages"].get("validate", {}).get("status") == "running")
    wait_for(lambda: cluster_idle(local_cluster), 60, what="the killed client's tasks to drain")
    assert killed["stages"]["write"]["status"] == "done"
    written = tree(out)
    stamps = {p: os.stat(p).st_mtime_ns for p in out.rglob("*") if p.is_file()}

    run = cli("build", *args, "--resume")
    assert run.rc == 0, run.err
    state = journal(out)
    assert state["status"] == "done" and state["job_id"] == killed["job_id"]
    assert state["stages"]["write"] == killed["stages"]["write"]  # skipped: same record, not re-run
    assert state["stages"]["validate"]["status"] == "done"
    assert tree(out) == written
    assert {p: os.stat(p).st_mtime_ns for p in out.rglob("*") if p.is_file()} == stamps  # nothing rewritten
    assert_every_row_reads_back(out, df)


def test_resume_refuses_other_arguments_and_missing_journals(tmp_path, cli, scheduler, local_cluster):
    df = big_points(2000, seed=4)
    src = tmp_path / "in.parquet"
    df.to_parquet(src, index=False)
    out = tmp_path / "s.zv"
    nothing = cli("build", "points", src, out, "--resume", "--scheduler-address", scheduler)
    assert nothing.rc == 2 and "nothing to resume" in nothing.err
    assert cli("build", "points", src, out, "--chunk-shape", "100", "--scheduler-address", scheduler).rc == 0
    other = cli("build", "points", src, out, "--chunk-shape", "50", "--resume", "--scheduler-address", scheduler)
    assert other.rc == 2 and "chunk_shape=100.0 (now 50.0)" in other.err
    same = cli("build", "points", src, out, "--chunk-shape", "100", "--resume", "--scheduler-address", scheduler)
    assert same.rc == 0  # a finished job resumes to "done" without running anything
    assert journal(out)["status"] == "done"
    # detached, a resume is known by the journalled job's id (it printed a new id that status never found)
    detached = cli("build", "points", src, out, "--chunk-shape", "100", "--resume", "--detach", "--json",
                   "--scheduler-address", scheduler)
    assert detached.rc == 0 and detached.json()["job_id"] == journal(out)["job_id"], detached
    # refused on the worker (other arguments): it left no trace but the worker's log (hunt)
    job = journal(out)["job_id"]
    wait_for(lambda: cluster_idle(local_cluster) and journal(out)["status"] == "done", 30, what="the resumed job")
    refused = cli("build", "points", src, out, "--chunk-shape", "50", "--resume", "--detach", "--json",
                  "--scheduler-address", scheduler)
    assert refused.rc == 0 and refused.json()["job_id"] == job
    wait_for(lambda: journal(out).get("refused"), 30, what="the refusal in the journal")
    status = cli("status", job)
    assert status.rc == 0 and "a later run was refused: InputError: --resume: the job journalled" in status.out


def test_concurrent_jobs_hear_only_their_own_progress(tmp_path):
    """Progress callbacks are per thread: two jobs running at once in one process (as detached
    jobs do on a worker) each journal their own steps, not each other's."""
    import threading

    from zarr_vectors.execution.runner import callbacks

    class Recorder:
        def __init__(self):
            self.starts: list[str] = []
            self.ends: list[str] = []

        def on_stage_start(self, stage, tasks):
            self.starts.append(stage)

        def on_task_end(self, stage):
            pass

        def on_stage_end(self, stage):
            self.ends.append(stage)

    both_registered, both_written = threading.Barrier(2), threading.Barrier(2)
    recorders = {"points": Recorder(), "graph": Recorder()}
    errors = []

    def job(kind):
        try:
            rng = np.random.default_rng(len(kind))
            pos = rng.uniform(0, 100, (3000, 3))
            with callbacks(recorders[kind]):
                both_registered.wait(30)  # both registered before either runs a step
                if kind == "points":
                    zv.write_points(str(tmp_path / "p.zv"), pos, chunk_shape=25)
                else:
                    zv.write_graph(str(tmp_path / "g.zv"), pos, np.stack([np.arange(2999), np.arange(1, 3000)], 1),
                                   chunk_shape=25)
                both_written.wait(60)  # and still registered until both are done
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            both_registered.abort()
            both_written.abort()

    threads = [threading.Thread(target=job, args=(k,)) for k in recorders]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert recorders["points"].starts == recorders["points"].ends == ["scan", "write vertices", "reconcile"]
    graph = recorders["graph"].starts
    assert graph == recorders["graph"].ends
    assert graph[:2] == ["scan", "write vertices"] and "write links" in graph and graph[-1] == "reconcile"
