"""The job journal saves in the background: the client never waits for a save, the newest
state wins, and a failed save is raised, never dropped."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from pipeline.jobs import BuildSpec
from pipeline.journal import Journal


class _GatedStorage:
    """Stands in for the journal's storage: records what is written; the first write waits for a gate."""

    def __init__(self, fail: bool = False) -> None:
        self.written: list[dict] = []
        self.entered, self.gate = threading.Event(), threading.Event()
        self.fail = fail

    def put(self, key: str, data: bytes) -> None:
        self.entered.set()
        assert self.gate.wait(10), "the test never opened the gate"
        if self.fail:
            raise OSError("the bucket went away")
        self.written.append(json.loads(data))


@pytest.fixture
def journal(tmp_path):
    j = Journal(BuildSpec(kind="points", inputs=[], out=str(tmp_path / "s.zv"), chunk_shape=1.0))
    yield j
    if isinstance(j.storage, _GatedStorage):
        j.storage.gate.set()  # a failed test leaves no thread waiting
    j._writer._pool.shutdown(wait=True)


def test_saves_return_while_a_write_is_in_flight_and_the_newest_state_wins(journal):
    journal.storage = storage = _GatedStorage()
    journal.update("write", status="running")
    assert storage.entered.wait(10)  # the first save is being written, and blocks there
    for i in range(5):  # none of these waits for storage
        journal.update("write", step=f"step {i}")
    assert storage.written == []
    storage.gate.set()
    journal.flush()
    assert [d["stages"]["write"].get("step") for d in storage.written] == [None, "step 4"]


def test_a_failed_save_is_raised_by_the_next_flush(journal):
    journal.storage = storage = _GatedStorage(fail=True)
    journal.update("write", status="running")
    storage.gate.set()
    with pytest.raises(OSError, match="the bucket went away"):
        journal.flush()


def test_close_leaves_the_last_state_on_storage(tmp_path):
    out = tmp_path / "s.zv"
    j = Journal(BuildSpec(kind="points", inputs=[], out=str(out), chunk_shape=1.0))
    for i in range(20):
        j.update("write", tasks_done=i)
    j.set_status("done")
    j.close()
    saved = Journal.load(str(out))
    assert saved["status"] == "done" and saved["stages"]["write"]["tasks_done"] == 19
    assert 1 <= j.requests.counts.puts <= 21  # counted by the journal itself; superseded saves are not written


class _FlakyStorage:
    """Records what is written; fails the writes whose number (from 1) is in ``failing``."""

    def __init__(self, failing: set[int]) -> None:
        self.failing, self.calls, self.written = failing, 0, []

    def put(self, key: str, data: bytes) -> None:
        self.calls += 1
        if self.calls in self.failing:
            raise OSError(f"write {self.calls} failed")
        self.written.append(json.loads(data))


def test_a_failed_save_superseded_by_a_written_one_is_not_raised(journal):
    journal.storage = storage = _FlakyStorage({1})
    journal.update("write", status="running")
    journal._writer._pool.submit(lambda: None).result()  # the first write has failed
    journal.update("write", status="done")  # saves never raise
    journal.flush()
    assert storage.written[-1]["stages"]["write"]["status"] == "done"


def test_the_newest_save_failing_is_raised_once(journal):
    journal.storage = _FlakyStorage({2})
    journal.update("write", status="running")
    journal.flush()
    journal.update("write", status="done")
    with pytest.raises(OSError, match="write 2 failed"):
        journal.flush()
    journal.flush()  # raised once: nothing newer failed


def test_close_raises_a_failed_last_save(tmp_path):
    j = Journal(BuildSpec(kind="points", inputs=[], out=str(tmp_path / "s.zv"), chunk_shape=1.0))
    j.storage = _FlakyStorage({1})
    j.set_status("done")
    with pytest.raises(OSError, match="write 1 failed"):
        j.close()


def _stages(seen: dict, out, fail: str | None = None):
    """Stage functions that record the journal on storage as each one starts."""

    def stage(name):
        def run() -> dict:
            seen[name] = Journal.load(str(out))
            if name == fail:
                raise RuntimeError(f"{name} broke")
            return {}

        return run

    return lambda spec: {name: stage(name) for name in spec.stages()}


def test_each_stage_starts_with_the_journal_on_storage_saying_so(tmp_path, monkeypatch):
    """The previous stage's done and this one's running are written before a stage touches the
    store, and so is an overwrite's new job: a crash never leaves "done" beside a half-built store."""
    from pipeline import jobs

    out = tmp_path / "s.zv"
    seen: dict = {}
    monkeypatch.setattr(jobs, "_stage_functions", _stages(seen, out))
    spec = BuildSpec(kind="points", inputs=[], out=str(out), chunk_shape=1.0, pyramid=[(2.0, 1.0)], overwrite=True)
    monkeypatch.setattr(jobs, "preflight", lambda spec, resume: None)
    real = Journal._put

    def slow(self, data: bytes) -> None:  # an object store's round trip: a stage that does not wait sees it
        time.sleep(0.05)
        real(self, data)

    monkeypatch.setattr(Journal, "_put", slow)
    jobs.run_build(spec)
    first_id = Journal.load(str(out))["job_id"]
    assert seen["write"]["status"] == "running" and seen["write"]["stages"]["write"]["status"] == "running"
    assert seen["pyramid"]["stages"]["write"]["status"] == "done"
    assert seen["pyramid"]["stages"]["pyramid"]["status"] == "running"
    again = BuildSpec(kind="points", inputs=[], out=str(out), chunk_shape=1.0, overwrite=True)
    jobs.run_build(again)
    assert again.job_id != first_id and seen["write"]["job_id"] == again.job_id  # not the finished job's journal


def test_a_failed_progress_save_does_not_fail_the_job(tmp_path, monkeypatch):
    """A step's progress save that fails is superseded by the stage's next save: the job goes on."""
    import dask

    from pipeline import jobs
    from zarr_vectors.execution import runner

    out = tmp_path / "s.zv"
    failed = threading.Event()

    def write() -> dict:
        runner.compute("a step", dask.delayed(int)(1))  # its start and end are progress saves
        assert failed.wait(10), "no progress save was attempted"
        return {}

    monkeypatch.setattr(jobs, "_stage_functions", lambda spec: {"write": write})
    monkeypatch.setattr(jobs, "preflight", lambda spec, resume: None)
    real = Journal._put

    def flaky(self, data: bytes) -> None:
        state = json.loads(data)
        if "step" in state["stages"].get("write", {}) and not failed.is_set():
            failed.set()
            raise OSError("the bucket hiccuped")
        real(self, data)

    monkeypatch.setattr(Journal, "_put", flaky)
    with dask.config.set(scheduler="synchronous"):
        result = jobs.run_build(BuildSpec(kind="points", inputs=[], out=str(out), chunk_shape=1.0))
    assert result.ok
    saved = Journal.load(str(out))
    assert saved["status"] == "done" and saved["stages"]["write"]["status"] == "done"


def test_a_stage_failure_is_raised_with_the_journal_that_could_not_record_it(tmp_path, monkeypatch):
    from pipeline import jobs
    from zarr_vectors.errors import StageFailedError

    out = tmp_path / "s.zv"
    monkeypatch.setattr(jobs, "_stage_functions", _stages({}, out, fail="write"))
    monkeypatch.setattr(jobs, "preflight", lambda spec, resume: None)
    real = Journal._put

    def refuse_failed(self, data: bytes) -> None:
        if json.loads(data)["status"] == "failed":
            raise OSError("the bucket went away")
        real(self, data)

    monkeypatch.setattr(Journal, "_put", refuse_failed)
    with pytest.raises(StageFailedError, match="write broke") as failed:
        jobs.run_build(BuildSpec(kind="points", inputs=[], out=str(out), chunk_shape=1.0))
    assert any("could not be saved" in note and "the bucket went away" in note for note in failed.value.__notes__)


def test_zv_build_reports_a_journal_it_could_not_save_on_one_line(tmp_path, cli, monkeypatch):
    from pipeline import jobs
    from pipeline_helpers import points_frame

    table, out = tmp_path / "pts.parquet", tmp_path / "s.zv"
    points_frame(200, seed=5).to_parquet(table, index=False)
    monkeypatch.setattr(jobs, "_stage_functions", _stages({}, out, fail="write"))
    real = Journal._put

    def refuse_failed(self, data: bytes) -> None:
        if json.loads(data)["status"] == "failed":
            raise OSError("the bucket went away\n  while saving\n")  # object stores' errors span lines
        real(self, data)

    monkeypatch.setattr(Journal, "_put", refuse_failed)
    run = cli("build", "points", table, out, "--chunk-shape", "25")
    assert run.rc == 1
    lines = run.err.strip().splitlines()
    assert any(line.startswith("zv build: stage 'write' failed: RuntimeError: write broke") for line in lines)
    note = [line for line in lines if "could not be saved" in line]
    assert len(note) == 1 and note[0].endswith("OSError: the bucket went away; while saving"), lines


@pytest.mark.parametrize("content", [b"not json", b"[]", b"{}", b'{"job_id": "a", "status": "done", "spec": {}, '
                                     b'"stages": {"write": 3}}', b"[" * 100_000 + b"]" * 100_000],
                         ids=["text", "list", "empty", "bad-stage", "nested-past-the-parser"])
def test_a_damaged_journal_is_bad_input_naming_it(tmp_path, content):
    """Regression (hunt): ``zv status`` on a damaged journal ended in a JSONDecodeError, TypeError
    or KeyError traceback, and ``--resume`` in "job failed" (exit 1)."""
    import os
    import subprocess
    import sys

    from zarr_vectors.errors import InputError

    (tmp_path / "s.zv.zvjob.json").write_bytes(content)
    with pytest.raises(InputError, match=r"the job journal .*s\.zv\.zvjob\.json' is damaged"):
        Journal.load(str(tmp_path / "s.zv"))
    env = {**os.environ, "HOME": str(tmp_path)}
    run = subprocess.run([sys.executable, "-m", "pipeline.cli", "status", str(tmp_path / "s.zv")],
                         capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 2 and "is damaged" in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_an_existing_store_suggests_resume_only_for_a_job_that_did_not_finish(tmp_path, cli):
    """Regression (new-user trial): a finished store was refused with '(or --resume to finish the job
    that was writing it)'; only a journal that says a job stopped earns the hint."""
    from pipeline_helpers import points_frame

    table, out = tmp_path / "pts.parquet", tmp_path / "s.zv"
    points_frame(200, seed=5).to_parquet(table, index=False)
    assert cli("build", "points", table, out, "--chunk-shape", "25").rc == 0
    again = cli("build", "points", table, out, "--chunk-shape", "25")
    assert again.rc == 2 and "already exists; pass --overwrite to replace it" in again.err
    assert "--resume" not in again.err, again.err
    journal = tmp_path / "s.zv.zvjob.json"
    state = json.loads(journal.read_bytes())
    state["status"], state["stages"]["write"]["status"] = "failed", "failed"
    journal.write_text(json.dumps(state))
    stopped = cli("build", "points", table, out, "--chunk-shape", "25")
    assert stopped.rc == 2
    assert f"(or --resume to finish job {state['job_id']}, whose journal says failed in its write stage)" in stopped.err
    journal.write_bytes(b"not json")  # damaged: the refusal says only what is certain
    damaged = cli("build", "points", table, out, "--chunk-shape", "25")
    assert damaged.rc == 2 and "already exists" in damaged.err and "--resume" not in damaged.err


def test_a_killed_job_is_reported_interrupted_not_running(tmp_path, cli):
    """Regression (hunt): a build killed mid-way left its journal saying "running", and ``zv status``
    said so (exit 3, "still running") for good.  The journal records the job's process; on its host
    a process that is gone makes the job ``interrupted`` (exit 1), and a new build names it."""
    import os
    import socket
    import subprocess
    import sys
    import textwrap

    from pipeline_helpers import points_frame

    from pipeline.journal import process_gone, this_process

    table, out = tmp_path / "pts.parquet", tmp_path / "s.zv"
    points_frame(500, seed=5).to_parquet(table, index=False)
    child = textwrap.dedent(f"""
        import os
        from zarr_vectors import reconcile
        from pipeline.cli import main
        reconcile.finish_level = lambda *args, **kwargs: os._exit(9)  # killed in its write stage
        main(["build", "points", {str(table)!r}, {str(out)!r}, "--chunk-shape", "25"])
    """)
    run = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=180, check=False)
    assert run.returncode == 9, run.stderr[-2000:]
    state = json.loads((tmp_path / "s.zv.zvjob.json").read_bytes())
    assert state["status"] == "running" and state["process"]["host"] == socket.gethostname()
    status = cli("status", out)
    assert status.rc == 1, status
    assert status.out.startswith(f"job {state['job_id']}: interrupted")
    assert f"its process ({state['process']['pid']} on {socket.gethostname()}) is gone" in status.out
    again = cli("build", "points", table, out, "--chunk-shape", "25")
    assert again.rc == 2 and "whose journal says running in its write stage; its process is gone)" in again.err
    assert not process_gone(this_process())  # a live process, and one another host ran, are not known gone
    assert not process_gone({"host": socket.gethostname() + ".elsewhere", "pid": state["process"]["pid"]})
    assert not process_gone(None) and not process_gone({"host": socket.gethostname(), "pid": "1"})
    assert not process_gone({"host": socket.gethostname(), "pid": 2**40})  # a damaged pid: no OverflowError (review)
    me = this_process()
    assert not process_gone({**me, "pidns": -1})  # another container's pid is not ours to ask (review)
    assert process_gone({**me, "start": me["start"] + 1})  # our pid, reused by a later process
    assert os.path.isdir(out)


def test_a_second_job_on_a_store_a_live_job_writes_is_refused(tmp_path, cli, monkeypatch):
    """Regression (hunt): ``--overwrite`` or ``--resume`` while another job wrote the store ran as a
    second writer: the store was deleted, or left without level 0 under a journal saying done.
    A journal saying running with a process not known to be gone refuses both, touching nothing;
    the journalled job's own id (its task re-run by the scheduler) is not refused, nor is a job
    whose process is gone.  ``zv status`` of a job that has not journalled yet says pending."""
    from pipeline_helpers import points_frame

    from pipeline.jobs import BuildSpec, preflight
    from pipeline.journal import this_process

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    table, out = tmp_path / "pts.parquet", tmp_path / "s.zv"
    points_frame(300, seed=2).to_parquet(table, index=False)
    assert cli("build", "points", table, out, "--chunk-shape", "25").rc == 0
    journal = tmp_path / "s.zv.zvjob.json"
    state = json.loads(journal.read_bytes())
    state["status"], state["process"] = "running", this_process()  # a live process: this one
    journal.write_text(json.dumps(state))
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    for flag in ("--overwrite", "--resume"):
        run = cli("build", "points", table, out, "--chunk-shape", "25", flag)
        assert run.rc == 2, run
        assert f"is being written by job {state['job_id']} (pid {os.getpid()} on " in run.err, run.err
    assert cli("build", "points", table, out, "--chunk-shape", "25", "--overwrite", "--dry-run").rc == 0  # no write
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert json.loads(journal.read_bytes()) == state
    own = BuildSpec(kind="points", inputs=[str(table)], out=str(out), chunk_shape=25.0, overwrite=True,
                    job_id=state["job_id"])
    preflight(own)  # the running job's own task, retried: not refused

    index = tmp_path / "home" / ".cache" / "zv" / "jobs" / "newjob.json"
    index.parent.mkdir(parents=True, exist_ok=True)  # the builds above recorded their jobs there
    index.write_text(json.dumps({"store": str(out), "storage_options": {}}))
    status = cli("status", "newjob")
    assert status.rc == 3 and status.out.startswith("job newjob: pending -- not started"), status
    assert f"is job {state['job_id']}'s (running)" in status.out

    state["process"] = {**state["process"], "start": state["process"]["start"] + 1}  # its pid, reused since
    journal.write_text(json.dumps(state))
    assert cli("build", "points", table, out, "--chunk-shape", "25", "--overwrite").rc == 0

    # another host's job cannot be asked: its journal's heartbeat says whether it still holds the store
    # (review: a job killed on another node -- a Slurm time limit, a new container -- blocked --resume for good)
    import time

    state = json.loads(journal.read_bytes())
    state.update(status="running", process={"host": "worker-7.elsewhere", "pid": 4242}, heartbeat=time.time())
    journal.write_text(json.dumps(state))
    run = cli("build", "points", table, out, "--chunk-shape", "25", "--resume")
    assert run.rc == 2 and "(pid 4242 on worker-7.elsewhere), whose journal says running, last saved" in run.err
    state["heartbeat"] = time.time() - 121  # four heartbeats of 30 s missed
    journal.write_text(json.dumps(state))
    resumed = cli("build", "points", table, out, "--chunk-shape", "25", "--resume")
    assert resumed.rc == 0, resumed.err
    assert json.loads(journal.read_bytes())["status"] == "done"


def test_a_running_job_beats_while_a_task_runs_for_long(tmp_path, zv_config):
    """While no step saves (one long task), the heartbeat does: on the last state saved."""
    import time

    from pipeline.jobs import BuildSpec

    zv_config("jobs.heartbeat", 0.05)
    j = Journal(BuildSpec(kind="points", inputs=[], out=str(tmp_path / "s.zv"), chunk_shape=1.0))
    j.update("write", status="running", step="write vertices")
    j.flush()
    first = json.loads((tmp_path / "s.zv.zvjob.json").read_bytes())
    j.state["stages"]["write"]["step"] = "changed, not saved"  # a beat saves the last state saved, not this
    with j.beating():
        time.sleep(0.3)
    j.close()
    last = json.loads((tmp_path / "s.zv.zvjob.json").read_bytes())
    assert last["heartbeat"] > first["heartbeat"] + 0.1
    assert last["stages"] == first["stages"]


def test_credentials_in_storage_options_stay_out_of_the_journal(tmp_path, cli, monkeypatch):
    """Regression (hunt): ``--storage-option key=... secret=...`` went into the journal beside the
    store (a bucket others may read) in clear, and into a world-readable job index.  The journal
    keeps the option's name with ``<redacted>``; the index, which ``zv status JOB`` reads the
    options from, is this user's alone."""
    import stat

    from pipeline.jobs import BuildSpec
    from pipeline.journal import Journal, journalled_spec

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    options = {"key": "AKIA123", "secret": "s3cr3t", "endpoint_url": "http://x:1",
               "client_kwargs": {"aws_session_token": "tok", "region_name": "eu"}}
    spec = BuildSpec(kind="points", inputs=[], out=str(tmp_path / "s.zv"), chunk_shape=1.0, storage_options=options)
    kept = journalled_spec(spec)["storage_options"]
    assert kept == {"key": "<redacted>", "secret": "<redacted>", "endpoint_url": "http://x:1",
                    "client_kwargs": {"aws_session_token": "<redacted>", "region_name": "eu"}}
    assert Journal(spec).state["spec"]["storage_options"] == kept
    assert spec.storage_options == options  # the job itself still has them
    from pipeline_helpers import points_frame

    table = tmp_path / "pts.parquet"
    points_frame(100, seed=1).to_parquet(table, index=False)
    run = cli("build", "points", table, tmp_path / "p.zv", "--chunk-shape", "25", "--json",
              "--storage-option", "secret_note=hush")
    assert run.rc == 0, run.err
    journal = (tmp_path / "p.zv.zvjob.json").read_text()
    assert "hush" not in journal and '"secret_note": "<redacted>"' in journal
    index = tmp_path / "home" / ".cache" / "zv" / "jobs" / f"{run.json()['job_id']}.json"
    assert "hush" in index.read_text() and stat.S_IMODE(index.stat().st_mode) == 0o600


def test_a_detached_job_refused_before_it_journalled_says_so(tmp_path, cli, monkeypatch):
    """Regression (hunt): a detached job refused on its worker before it journalled (its input gone
    since the command checked it) left ``zv status JOB`` saying "no job journal" (exit 2) for good,
    the answer it gave while the job was queued.  Queued is now ``pending`` (exit 3); refused, the
    journal it leaves says why (exit 1).  Beside a store without a journal nothing is written: a
    failed journal there would invite a ``--resume`` that replaces the store."""
    from pipeline.jobs import BuildSpec, record_refusal
    from zarr_vectors.errors import InputError

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    out = tmp_path / "s.zv"
    spec = BuildSpec(kind="points", inputs=[str(tmp_path / "gone.parquet")], out=str(out), chunk_shape=25.0)
    index = tmp_path / "home" / ".cache" / "zv" / "jobs" / f"{spec.job_id}.json"
    index.parent.mkdir(parents=True)
    index.write_text(json.dumps({"store": str(out), "storage_options": {}}))
    queued = cli("status", spec.job_id)
    assert queued.rc == 3 and queued.out.startswith(f"job {spec.job_id}: pending -- not started"), queued
    record_refusal(spec, InputError("input not found: 'gone.parquet'"))
    refused = cli("status", spec.job_id)
    assert refused.rc == 1 and f"job {spec.job_id}: failed" in refused.out, refused
    assert "error: refused: InputError: input not found: 'gone.parquet'" in refused.out
    (tmp_path / "s.zv.zvjob.json").unlink()
    out.mkdir()
    (out / "zarr.json").write_text("{}")  # somebody's store, without a journal
    record_refusal(spec, InputError("x"))
    assert not (tmp_path / "s.zv.zvjob.json").exists()
