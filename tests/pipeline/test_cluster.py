"""The cluster: worker processes get the allocator setting the design relies on; relative paths
and ``memory://`` stores mean the same on every worker as in the client (issue 13)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace

import dask
import numpy as np
import pytest
from distributed import Client, LocalCluster, get_task_stream
from pipeline_helpers import graph_frames, points_frame, rows, wait_for

import zarr_vectors as zv
from pipeline.cluster import WORKER_ENVIRON, local_cluster
from zarr_vectors.errors import InputError
from zarr_vectors.execution import runner
from zarr_vectors.store.backend import Storage

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

REPO = Path(__file__).resolve().parents[2]


def test_local_cluster_workers_get_the_worker_environment():
    with local_cluster(workers=1, memory_limit="1GiB") as cluster, Client(cluster) as client:
        seen = client.run(lambda: {k: os.environ.get(k) for k in WORKER_ENVIRON})
        assert list(seen.values()) == [WORKER_ENVIRON]
        assert client.dashboard_link.startswith("http")


def test_a_stage_whose_embedded_workers_are_all_gone_fails_within_the_bound(zv_config):
    """Regression: workers that left with their nannies (here retired; in the run that found it, a
    task their process could not unpickle made the scheduler drop both) left the stage waiting
    for a worker that could never come: the suite's 600 s timeout ended it."""
    import threading
    import time

    from distributed.scheduler import NoWorkerError

    zv_config("cli.no-workers-timeout", "2s")
    zv_config("task-retries", 0)
    with local_cluster(workers=1, memory_limit="1GiB") as cluster, Client(cluster):
        assert cluster.scheduler.no_workers_timeout == 2
        slow = [dask.delayed(time.sleep, pure=False)(1.5) for _ in range(3)]
        threading.Timer(0.5, cluster.scale, (0,)).start()
        started = time.monotonic()
        with pytest.raises(NoWorkerError, match="without any running workers"):
            runner.compute("stage", *slow)
        assert time.monotonic() - started < 30
    with dask.config.set({"distributed.scheduler.no-workers-timeout": "7s"}), \
            local_cluster(workers=1, memory_limit="1GiB") as theirs:  # distributed's own setting wins
        assert theirs.scheduler.no_workers_timeout == 7


# ---------------------------------------------------------------------------
# a real `dask scheduler` / `dask worker` started in another working directory
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory):
    """A scheduler and two worker processes (the ``dask`` command line), whose working directory
    is not the client's: a relative path a worker resolved itself would land in ``cwd``."""
    base = tmp_path_factory.mktemp("elsewhere")
    cwd = base / "workers-cwd"
    cwd.mkdir()
    scheduler_file = base / "scheduler.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO), str(REPO / "tests" / "pipeline"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    dask_cli = str(Path(sys.executable).with_name("dask"))
    procs = []
    try:
        for role, extra in (("scheduler", ["--host", "127.0.0.1", "--port", "0"]),
                            ("worker", ["--nworkers", "2", "--nthreads", "1", "--memory-limit", "1GiB"])):
            with open(base / f"{role}.log", "w") as log:  # the child keeps its own descriptor
                procs.append(subprocess.Popen([dask_cli, role, "--scheduler-file", str(scheduler_file),
                                               "--no-dashboard", *extra], cwd=cwd, env=env, stdout=log,
                                              stderr=subprocess.STDOUT))
            if role == "scheduler":
                wait_for(lambda: scheduler_file.exists() and scheduler_file.stat().st_size, 60, what="the scheduler")
        with Client(scheduler_file=str(scheduler_file)) as client:
            client.wait_for_workers(2, timeout=120)
            assert set(client.run(os.getcwd).values()) == {str(cwd)}  # the premise of every test here
        yield SimpleNamespace(scheduler_file=str(scheduler_file), cwd=cwd)
    finally:
        stop(procs)


def stop(procs: list[subprocess.Popen]) -> None:
    """Terminate cluster processes, workers first (they close their nannies' processes)."""
    for proc in reversed(procs):
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def nothing_written_where_the_workers_run(cwd: Path) -> None:
    assert not [p for p in cwd.rglob("*") if "dask-scratch-space" not in p.parts], sorted(cwd.rglob("*"))


@pytest.mark.slow
def test_relative_store_paths_reach_workers_started_elsewhere(tmp_path, monkeypatch, cli, elsewhere):
    """Regression (issue 13): validate, pyramid and shard sent the raw relative path to workers,
    which resolved it in their own directory (133 false errors, a pyramid written elsewhere)."""
    monkeypatch.chdir(tmp_path)
    Path("data").mkdir()
    df = points_frame(4000, seed=71, objects=9)
    df.to_parquet("data/pts.parquet", index=False)
    on = ["--scheduler-file", elsewhere.scheduler_file]
    built = cli("build", "points", "data/pts.parquet", "rel.zv", "--chunk-shape", "25", "--json", *on)
    assert built.rc == 0, built.err
    assert built.json()["stages"]["write"]["num_vertices"] == 4000
    pyramid = cli("pyramid", "rel.zv", "--factor", "2", *on)
    assert pyramid.rc == 0, pyramid.err
    shard = cli("shard", "rel.zv", "--shard-shape", "2", *on)
    assert shard.rc == 0, shard.err
    assert "repacked into shards of [2, 2, 2]" in shard.out
    check = cli("validate", "rel.zv", "--level", "5", "--json", *on)
    assert check.rc == 0, check.out + check.err
    assert check.json()["ok"] is True and check.json()["errors"] == []
    assert cli("consolidate", "rel.zv").rc == 0

    nothing_written_where_the_workers_run(elsewhere.cwd)
    store = zv.open_store(str(tmp_path / "rel.zv"))
    assert store.level_numbers() == [0, 1]
    assert "sharding_indexed" in (tmp_path / "rel.zv" / "0" / "vertices" / "zarr.json").read_text()
    data = zv.read(str(tmp_path / "rel.zv"))
    assert rows(data.positions) == rows(df[["x", "y", "z"]].to_numpy())
    coarse = zv.read(str(tmp_path / "rel.zv"), level=1)
    assert 0 < len(coarse) <= len(df)
    assert zv.validate(str(tmp_path / "rel.zv"), 5).ok


@pytest.mark.slow
def test_the_api_resolves_relative_paths_in_the_client(tmp_path, monkeypatch, elsewhere):
    monkeypatch.chdir(tmp_path)
    g = graph_frames(600, 1500, seed=72)
    index = {v: i for i, v in enumerate(g.vertices["id"].tolist())}
    edges = np.array([[index[a], index[b]] for a, b in g.edges[["src", "dst"]].itertuples(index=False)])
    positions = g.vertices[["x", "y", "z"]].to_numpy()
    with Client(scheduler_file=elsewhere.scheduler_file) as client, get_task_stream(client) as stream:
        zv.write_graph("api.zv", positions, edges, chunk_shape=25, attributes={"mass": g.vertices["mass"].to_numpy()})
        zv.build_pyramid("api.zv", factors=[(2.0, 1.0)])
        zv.shard_store("api.zv", 2)
        assert zv.consolidate_store("api.zv") > 0
        result = zv.validate("api.zv", 5)
        assert result.ok, result.errors
        data = zv.read("api.zv")
    assert len({t["worker"] for t in stream.data}) == 2  # the tasks ran on both workers over there
    nothing_written_where_the_workers_run(elsewhere.cwd)
    assert len(data) == len(positions) and len(data.edges) == len(edges)
    assert zv.open_store(str(tmp_path / "api.zv")).level_numbers() == [0, 1]


def test_a_relative_local_path_is_pickled_resolved(tmp_path, monkeypatch):
    """A Storage shipped to a task names the client's directory, whatever the task's cwd."""
    import pickle

    (tmp_path / "client").mkdir()
    (tmp_path / "worker").mkdir()
    monkeypatch.chdir(tmp_path / "client")
    shipped = [pickle.dumps(Storage(url)) for url in ("rel.zv", "file://rel.zv", "./a/../rel.zv")]
    monkeypatch.chdir(tmp_path / "worker")
    for raw in shipped:
        again = pickle.loads(raw)
        assert again.root == str(tmp_path / "client" / "rel.zv")
        assert Storage(again.url).root == again.root  # and so is every Storage rebuilt from it


# ---------------------------------------------------------------------------
# memory:// stores live in one process
# ---------------------------------------------------------------------------
def small_points(n: int = 2000) -> np.ndarray:
    return points_frame(n, seed=73)[["x", "y", "z"]].to_numpy()


def test_memory_store_is_refused_under_a_client_with_worker_processes(local_cluster):
    """Regression (issue 13): write_points reported success into the workers' memory, read found 0 vertices."""
    url = f"memory://zv-refused-{uuid.uuid4().hex[:8]}"
    with local_cluster.as_current():
        with pytest.raises(InputError, match=r"memory:// lives in this process only.*2 worker\(s\) in other processes"
                           ) as refused:
            zv.write_points(url, small_points(), chunk_shape=25)
        assert url in str(refused.value)
    assert Storage(url).list_dir("") == []  # refused before anything was written, here too
    zv.write_points(url, small_points(), chunk_shape=25)  # on threads: fine
    with local_cluster.as_current():
        for call in (lambda: zv.read(url), lambda: zv.validate(url), lambda: zv.build_pyramid(url, factors=[(2.0, 1.0)]),
                     lambda: zv.shard_store(url, 2), lambda: zv.consolidate_store(url)):
            with pytest.raises(InputError, match="memory:// lives in this process only"):
                call()
        with dask.config.set(scheduler="threads"):  # a scheduler named in dask.config wins over the client
            assert len(zv.read(url)) == 2000


@pytest.mark.parametrize("scheduler", ["threads", "synchronous"])
def test_memory_store_works_on_local_schedulers(scheduler):
    url = f"memory://zv-local-{uuid.uuid4().hex[:8]}"
    with dask.config.set(scheduler=scheduler):
        zv.write_points(url, small_points(), chunk_shape=25)
        zv.build_pyramid(url, factors=[(2.0, 1.0)])
        assert zv.validate(url, 5).ok
        assert len(zv.read(url)) == 2000


def test_memory_store_works_on_an_in_process_cluster():
    url = f"memory://zv-inproc-{uuid.uuid4().hex[:8]}"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster) as client, get_task_stream(client) as stream:
        zv.write_points(url, small_points(), chunk_shape=25)
        zv.shard_store(url, 2)
        assert zv.validate(url, 5).ok
        assert len(zv.read(url)) == 2000
    assert any(str(t["key"]).startswith("write_owner") for t in stream.data)  # the tasks ran on that cluster


def test_zv_build_into_memory_on_a_cluster_is_refused(tmp_path, cli, scheduler):
    src = tmp_path / "in.parquet"
    points_frame(500, seed=74).to_parquet(src, index=False)
    run = cli("build", "points", src, "memory://zv-cli-refused", "--scheduler-address", scheduler)
    assert run.rc == 2
    assert "memory:// lives in this process only" in run.err and "other processes" in run.err


def test_a_build_spec_resolves_its_local_paths_in_the_client(tmp_path, monkeypatch):
    """The spec a detached job ships to a worker names the client's files (URLs stay as given)."""
    import pickle

    from pipeline.jobs import BuildSpec

    monkeypatch.chdir(tmp_path)
    spec = BuildSpec(kind="points", inputs=["in/*.parquet", "s3://bucket/t.parquet"], out="out.zv", chunk_shape=25)
    # a relative file:// URL was shipped as written: a detached job read and wrote the worker's directory (hunt)
    urls = BuildSpec(kind="points", inputs=["file://in/a.parquet"], out="local://out.zv", chunk_shape=25)
    monkeypatch.chdir("/")
    again = pickle.loads(pickle.dumps(spec))
    assert again.inputs == [str(tmp_path / "in" / "*.parquet"), "s3://bucket/t.parquet"]
    assert again.out == str(tmp_path / "out.zv")
    assert (urls.inputs, urls.out) == ([f"file://{tmp_path}/in/a.parquet"], f"local://{tmp_path}/out.zv")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # '~' as the shell reads it; '--out=~/x' is not expanded
    home = BuildSpec(kind="points", inputs=["~/a.csv"], out="~/b.zv", chunk_shape=25)
    assert (home.inputs, home.out) == ([str(tmp_path / "home/a.csv")], str(tmp_path / "home/b.zv"))
    from pipeline.jobs import _check_output
    from zarr_vectors.errors import InputError

    (tmp_path / "home").mkdir(exist_ok=True)
    (tmp_path / "home/b.zv").write_text("a file")  # 'file://~/b.zv' is checked where the store would go (review)
    with pytest.raises(InputError, match="is a file, not a store directory"):
        _check_output(BuildSpec(kind="points", inputs=["a.csv"], out="file://~/b.zv", chunk_shape=25))


def test_both_local_schemes_are_checked_and_read_as_local_files(tmp_path):
    """Regression: the job's checks knew ``file://`` only, so a ``local://`` output that is a file
    passed preflight, an input given as a URL inside the output was not seen there, and a small
    ``local://`` CSV took the dataframe path, as a remote file would."""
    from pipeline.columns import local_csv
    from pipeline.jobs import BuildSpec, _check_output, _input_size
    from zarr_vectors.errors import InputError
    from zarr_vectors.io import registry

    (tmp_path / "d").mkdir()
    table = tmp_path / "d" / "in.csv"
    table.write_text("x,y,z\n1,2,3\n")
    (tmp_path / "afile").write_text("not a store")
    with pytest.raises(InputError, match="is a file, not a store directory"):
        _check_output(BuildSpec(kind="points", inputs=[str(table)], out=f"local://{tmp_path}/afile", chunk_shape=25))
    for scheme in ("file", "local"):
        inside = BuildSpec(kind="points", inputs=[f"{scheme}://{table}"], out=f"local://{tmp_path}/d", chunk_shape=25)
        with pytest.raises(InputError, match="lies inside the output"):
            _check_output(inside)
        assert local_csv(f"{scheme}://{table}")
        assert _input_size(f"{scheme}://{table}", {"anon": False}) == table.stat().st_size
        assert registry.format_for(f"{scheme}://{tmp_path}/d").name == "parquet"  # a dataset directory (review)
    assert not local_csv(f"memory://{table}")


@pytest.mark.parametrize("case", ["missing-file", "empty-file", "not-json", "not-an-address"])
def test_a_scheduler_that_cannot_be_reached_is_bad_input_naming_it(tmp_path, case):
    """Regression (hunt): a missing ``--scheduler-file`` hung forever (distributed waits for it),
    one without an address raised a bare ``AssertionError``, and an address without a port a
    ``ValueError`` traceback.  Now an InputError naming the file or the address (exit 2)."""
    from pipeline.cluster import connect
    from zarr_vectors.errors import InputError

    path = tmp_path / "scheduler.json"
    if case == "empty-file":
        path.write_text("{}")
    elif case == "not-json":
        path.write_text("tcp://")
    kwargs = {"scheduler_address": "notaurl"} if case == "not-an-address" else {"scheduler_file": str(path)}
    named = "'notaurl'" if case == "not-an-address" else repr(str(path))
    with dask.config.set({"distributed.comm.timeouts.connect": "0.3s"}), \
            pytest.raises(InputError, match=re.escape(named)):
        with connect(**kwargs):
            pass
    # and the failed client is not left as the process's client (a dead scheduler for every later graph)
    assert runner.current_client() is None and dask.config.get("scheduler", None) is None


def test_a_scheduler_file_written_while_the_job_starts_is_waited_for(tmp_path):
    """Review: the scheduler writes its file in place, so a job started with it may find it
    empty or partial for a moment; distributed waits for it, and so do we (not an error)."""
    import threading
    import time

    from pipeline.cluster import _address_in

    path = tmp_path / "scheduler.json"
    path.write_text("")

    def finish() -> None:
        time.sleep(0.2)
        path.write_text('{"address": "tcp://127.0.0.1:8786"')
        time.sleep(0.2)
        path.write_text('{"address": "tcp://127.0.0.1:8786", "type": "Scheduler"}')

    writer = threading.Thread(target=finish)
    writer.start()
    try:
        with dask.config.set({"distributed.comm.timeouts.connect": "10s"}):
            assert _address_in(str(path)) == "tcp://127.0.0.1:8786"
    finally:
        writer.join()


def _start(tmp_path: Path, role: str, mode: str | None, *args: str) -> subprocess.Popen:
    """A real ``dask scheduler`` or ``dask worker`` on ``tmp_path/scheduler.json``, in ``tmp_path``: this
    environment's (``mode`` None), or one without this package or at another version
    (``foreign_env.py``)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    wrapper = str(REPO / "tests" / "pipeline" / "foreign_env.py")
    dask_cli = str(Path(sys.executable).with_name("dask"))
    command = [sys.executable, wrapper, mode, role] if mode else [dask_cli, role]
    with open(tmp_path / f"{role}-{uuid.uuid4().hex[:8]}.log", "w") as log:
        return subprocess.Popen([*command, "--scheduler-file", str(tmp_path / "scheduler.json"), "--no-dashboard",
                                 *args], cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)


@pytest.fixture(params=["scheduler-missing", "worker-other-version"])
def foreign(request, tmp_path):
    """A real scheduler and two real workers (no nanny), one of them foreign: the scheduler's
    environment lacks this package, or one worker reports version 0.0.1.  Yields the scheduler
    file and what the refusal must name."""
    scheduler_file = tmp_path / "scheduler.json"
    scheduler_mode, worker_mode = ("missing", None) if request.param == "scheduler-missing" else (None, "0.0.1")
    procs: list[subprocess.Popen] = []
    try:
        procs.append(_start(tmp_path, "scheduler", scheduler_mode, "--host", "127.0.0.1", "--port", "0"))
        wait_for(lambda: scheduler_file.exists() and scheduler_file.stat().st_size, 60, what="the scheduler")
        procs.append(_start(tmp_path, "worker", None, "--nthreads", "1", "--no-nanny"))
        procs.append(_start(tmp_path, "worker", worker_mode, "--nthreads", "1", "--no-nanny"))
        with Client(scheduler_file=str(scheduler_file)) as client:
            client.wait_for_workers(2, timeout=120)
            odd = [w for w, v in client.run(lambda: __import__("importlib.metadata").metadata.version(
                "zarr-vectors-dask"), on_error="return").items() if v == "0.0.1"]
        expected = "the scheduler: not installed" if scheduler_mode else f"worker {odd[0]}: 0.0.1"
        yield SimpleNamespace(scheduler_file=str(scheduler_file), expected=expected)
    finally:
        stop(procs)


def test_a_cluster_without_this_package_at_the_clients_version_is_refused_naming_it(foreign):
    """A scheduler without the package refused every graph with distributed's "Error during
    deserialization of the task graph" inside the first stage; a worker of another version would
    compute with other code.  Both are now refused on connecting, naming who has what."""
    from pipeline.cluster import connect

    with pytest.raises(InputError, match=re.escape(foreign.expected)) as raised:
        with connect(scheduler_file=foreign.scheduler_file):
            raise AssertionError("connected to a cluster that cannot run the job")
    assert "Install zarr-vectors-dask==" in str(raised.value) and foreign.scheduler_file in str(raised.value)
    assert runner.current_client() is None  # the refused client is closed, not left as the process's


def test_a_notebooks_own_client_on_such_a_cluster_is_refused_before_its_first_graph(tmp_path, foreign):
    """The API under a user's own Client: the first graph (or scattered value) asks, nothing is
    written, and the same client is refused again on the next call, not let through."""
    with Client(scheduler_file=foreign.scheduler_file) as client, client.as_current():
        for attempt in range(2):
            with pytest.raises(InputError, match=re.escape(foreign.expected)):
                zv.write_points(str(tmp_path / "out.zv"), np.random.default_rng(1).uniform(0, 9, (500, 3)),
                                chunk_shape=3)
            assert not (tmp_path / "out.zv").exists(), attempt
            # nothing reached the cluster: no task was ever submitted, no input scattered
            assert client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes)) == []


class _Watchable:
    """What a check watches a cluster through, as the scheduler and distributed's client would: the
    plugin is kept, the workers there when the watch begins are ``present`` and the joins already
    logged ``logged``; :meth:`joins` is the scheduler numbering and logging a join (pushed to the
    subscribed handler unless the client is ``away``) and :meth:`leaves` a departure (in the log
    ``get_events`` reads); :meth:`reconnect` is a new connection, to a new scheduler if asked."""

    present: tuple = ()
    id = "client-1"
    handler = None
    count = 0
    away = False
    scheduler_id = "scheduler-1"
    logged: list | None = None
    departed: list | None = None
    scheduler_comm = None

    def register_plugin(self, plugin, name=None):  # noqa: ANN001, ANN202
        self.plugin = plugin
        self.logged = self.logged if self.logged is not None else []
        self.departed = self.departed if self.departed is not None else []

    def subscribe_topic(self, topic, handler):  # noqa: ANN001, ANN202
        self.handler = handler

    def subscribed(self, function, client):  # noqa: ANN001, ANN202
        from zarr_vectors.execution.arrivals import subscribe

        assert function is subscribe and client == self.id
        assert self.handler is not None  # the handler is in place before the scheduler pushes anything
        self.away = False
        return self.scheduler_id, list(self.present), tuple(self.logged)

    def joins(self, worker: str) -> None:
        self.count += 1
        event = (0.0, {"worker": worker, "n": self.count})
        self.logged.append(event)
        if not self.away and self.handler is not None:
            self.handler(event)

    def leaves(self, worker: str) -> None:
        self.count += 1
        self.departed.append((0.0, {"worker": worker, "n": self.count}))

    def reconnect(self, *, restarted: bool = False) -> None:
        self.scheduler_comm = object()
        if restarted:
            self.scheduler_id, self.count, self.logged, self.departed = "scheduler-2", 0, [], []

    def get_events(self, topic):  # noqa: ANN001, ANN202
        from zarr_vectors.execution.arrivals import LEFT

        assert topic == LEFT
        self.read_departures = getattr(self, "read_departures", 0) + 1
        return list(self.departed)


@pytest.mark.slow
def test_a_worker_of_another_version_joining_a_running_cluster_is_refused_before_the_next_graph(tmp_path):
    """Real processes: a scheduler and a worker pass the check; a worker at another version joins
    (an adaptive cluster scaling up from another image); the client's next graph is refused naming
    it, and so is every later one, before anything is submitted."""
    scheduler_file = tmp_path / "scheduler.json"
    procs = [_start(tmp_path, "scheduler", None, "--host", "127.0.0.1", "--port", "0")]
    try:
        wait_for(lambda: scheduler_file.exists() and scheduler_file.stat().st_size, 60, what="the scheduler")
        procs.append(_start(tmp_path, "worker", None, "--nthreads", "1", "--no-nanny"))
        with Client(scheduler_file=str(scheduler_file)) as client, client.as_current():
            client.wait_for_workers(1, timeout=120)
            assert runner.compute("before", dask.delayed(sum)([1, 2])) == [3]
            first = set(client.scheduler_info(n_workers=-1)["workers"])
            procs.append(_start(tmp_path, "worker", "0.0.1", "--nthreads", "1", "--no-nanny"))
            client.wait_for_workers(2, timeout=120)
            (late,) = set(client.scheduler_info(n_workers=-1)["workers"]) - first

            def refusal() -> InputError | None:  # the scheduler's event reaches the client just after the join
                try:
                    runner.compute("after", dask.delayed(sum)([1, 2]))
                except InputError as exc:
                    return exc
                return None

            error = str(wait_for(refusal, 30, what="the refusal"))
            assert f"worker {late}: 0.0.1" in error and "joined after its check" in error
            keys = client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))
            with pytest.raises(InputError, match=re.escape(f"worker {late}: 0.0.1")):
                zv.write_points(str(tmp_path / "out.zv"), np.zeros((10, 3)), chunk_shape=1)
            assert not (tmp_path / "out.zv").exists()
            assert client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) == keys
    finally:
        stop(procs)


class _Answers(_Watchable):
    """A client whose scheduler and workers answer ``run`` / ``run_on_scheduler`` as given."""

    def __init__(self, scheduler: object, workers: object) -> None:
        self.scheduler, self.workers = scheduler, workers

    def run_on_scheduler(self, function, *args, callback_timeout=None, **kwargs):  # noqa: ANN001, ANN202
        if kwargs:
            return self.subscribed(function, **kwargs)
        if isinstance(self.scheduler, BaseException):
            raise self.scheduler
        return self.scheduler

    def run(self, function, *args, on_error=None, callback_timeout=None):  # noqa: ANN001, ANN202
        if isinstance(self.workers, BaseException):
            raise self.workers
        return self.workers


def test_only_answers_refuse_a_cluster_and_silence_is_a_warning_naming_who():
    """Review: a worker killed just before the check (its answer a closed connection) refused a healthy
    cluster with an install hint, and one too busy to answer refused it naming no worker."""
    import importlib.metadata

    from zarr_vectors.execution.environment import DISTRIBUTION, check_cluster

    mine = importlib.metadata.version(DISTRIBUTION)
    gone = OSError("connection closed")
    with pytest.warns(UserWarning, match=r"worker tcp://b \(OSError\)"):
        check_cluster(_Answers(mine, {"tcp://a": mine, "tcp://b": gone}), "the scheduler at 'x'")
    with pytest.warns(UserWarning, match=r"the workers \(TimeoutError\)"):
        check_cluster(_Answers(mine, TimeoutError()), "the scheduler at 'x'")
    missing = importlib.metadata.PackageNotFoundError(DISTRIBUTION)
    with pytest.raises(InputError, match=r"worker tcp://a: not installed; worker tcp://c: 0\.0\.1"):
        check_cluster(_Answers(mine, {"tcp://a": missing, "tcp://b": gone, "tcp://c": "0.0.1"}), "x")
    with pytest.raises(InputError, match="the scheduler: not installed"):
        check_cluster(_Answers(missing, {}), "x")


def test_a_check_that_did_not_finish_or_found_no_worker_is_asked_again_and_a_second_thread_waits():
    """Review: the verdict was written before asking, so a second thread passed while the first still
    asked, an interrupted check passed for good, and a cluster with no worker yet was never asked again."""
    import importlib.metadata
    import threading
    import time

    from zarr_vectors.execution.environment import DISTRIBUTION, check_once

    mine = importlib.metadata.version(DISTRIBUTION)

    outcomes: list[str] = []

    def second() -> None:
        time.sleep(0.1)
        try:
            check_once(client)
            outcomes.append("passed")
        except InputError:
            outcomes.append("refused")

    client = _Client(mine, None, run=lambda: (time.sleep(0.3), {"tcp://w": "0.0.1"})[1])
    thread = threading.Thread(target=second)
    thread.start()
    with pytest.raises(InputError, match="worker tcp://w: 0.0.1"):
        check_once(client)
    thread.join()
    assert outcomes == ["refused"]

    interrupted = _Client(mine, None, run=lambda: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        check_once(interrupted)
    interrupted.answer = lambda: {"tcp://w": "0.0.1"}
    with pytest.raises(InputError):
        check_once(interrupted)  # asked again, not passed

    starting = _Client(mine, None, run=lambda: {})
    check_once(starting)  # no worker yet: passes for now ...
    starting.answer = lambda: {"tcp://w": "0.0.1"}
    with pytest.raises(InputError):
        check_once(starting)  # ... and is asked again once one has joined


class _Client(_Watchable):
    """A client for :func:`check_once`: a scheduler that answers ``scheduler``, workers that answer ``run()``."""

    def __init__(self, scheduler: object, workers: object, *, run) -> None:  # noqa: ANN001
        self.answer, self.scheduler_version = run, scheduler
        self.scheduler = SimpleNamespace(address="tcp://scheduler")

    def run_on_scheduler(self, function, *args, callback_timeout=None, **kwargs):  # noqa: ANN001, ANN202
        return self.subscribed(function, **kwargs) if kwargs else self.scheduler_version

    def run(self, function, *args, workers=None, on_error=None, callback_timeout=None):  # noqa: ANN001, ANN202
        self.asked = workers
        return self.answer()


def test_workers_that_join_after_the_check_are_asked_before_the_next_graph():
    """A cluster that grows while a job runs (adaptive scaling) brought workers no check had asked:
    one of another version computed with other code.  The scheduler pushes its log of joins to
    the client, and before each graph the workers that joined and are still there are asked; one
    that joined and left is not, one silent is warned of, one there when the log began that the
    check did not ask is asked too."""
    import importlib.metadata

    from zarr_vectors.execution.arrivals import WorkerArrivals
    from zarr_vectors.execution.environment import DISTRIBUTION, check_once

    mine = importlib.metadata.version(DISTRIBUTION)
    client = _Client(mine, None, run=lambda: {"tcp://a": mine})
    client.present = ("tcp://a", "tcp://early")  # there when the log began, not among the check's answers
    check_once(client)
    assert isinstance(client.plugin, WorkerArrivals) and WorkerArrivals.idempotent
    client.answer = lambda: {"tcp://early": mine}
    check_once(client)
    assert client.asked == ["tcp://early"]
    client.answer = lambda: pytest.fail("asked with no worker joined")
    check_once(client)  # nothing joined: nothing asked

    def join(address: str, answer: object) -> None:
        client.joins(address)
        client.answer = lambda: {address: answer}

    join("tcp://later", mine)
    client.answer = lambda: pytest.fail("asked before a scattered value")
    check_once(client, joined=False)  # a scattered value runs no code: nobody asked
    client.answer = lambda: {"tcp://later": mine}
    check_once(client)
    assert client.asked == ["tcp://later"]
    join("tcp://gone", "0.0.1")
    client.leaves("tcp://gone")
    client.answer = lambda: pytest.fail("asked a worker that left")
    check_once(client)  # joined and left: nothing to ask
    reads = client.read_departures
    check_once(client)
    assert client.read_departures == reads  # and not read again: no request while nobody joins
    client.joins("tcp://gone")  # a worker restarted at the same address is another worker
    client.answer = lambda: {"tcp://gone": mine}
    check_once(client)
    assert client.asked == ["tcp://gone"]
    join("tcp://silent", OSError("Timed out trying to connect"))
    with pytest.warns(UserWarning, match=r"workers that joined after its check.*worker tcp://silent \(OSError\)"):
        check_once(client)
    join("tcp://same", mine)
    check_once(client)
    assert client.asked == ["tcp://same"]
    join("tcp://old", "0.0.1")
    for _ in range(2):  # refused, and refused again without asking
        with pytest.raises(InputError, match=r"joined after its check.*worker tcp://old: 0\.0\.1.*Install"):
            check_once(client)
        client.answer = lambda: pytest.fail("a refused client asked again")


def test_the_log_of_joins_begins_before_the_workers_are_asked_and_counts_what_it_held():
    """Review: the log was read after the workers answered, and its joins taken as asked, so a worker
    restarted at the same address in between passed unasked.  Now the log begins before the question;
    joins it already held (another client's plugin) are not asked again, later ones are, and a worker
    there when it began that left before the question is not asked."""
    import importlib.metadata

    from zarr_vectors.execution.environment import DISTRIBUTION, check_once

    mine = importlib.metadata.version(DISTRIBUTION)
    client = _Client(mine, None, run=lambda: pytest.fail("the workers asked before the log began"))
    client.register_plugin(None)
    client.joins("tcp://a")  # logged before this client's check (another client's plugin)
    client.joins("tcp://b")
    client.present = ("tcp://a", "tcp://b")

    def question() -> dict:
        assert client.plugin is not None and client.handler is not None
        client.leaves("tcp://b")  # ... between the log's start and the question
        return {"tcp://a": mine}

    client.handler, client.plugin, client.answer = None, None, question
    check_once(client)
    client.answer = lambda: pytest.fail("asked again: a join from before the question, or a worker that left")
    check_once(client)
    client.joins("tcp://a")  # restarted at the same address after the question
    client.answer = lambda: {"tcp://a": "0.0.1"}
    with pytest.raises(InputError, match="worker tcp://a: 0.0.1"):
        check_once(client)


def test_after_a_reconnection_the_joins_the_client_missed_are_asked():
    """Review: the scheduler drops pushes while a client's connection is down, and nothing read the log
    again, so a worker that joined meanwhile was never asked.  After a reconnection the client asks the
    scheduler again and takes a new snapshot; from a restarted scheduler, every worker there is asked."""
    import importlib.metadata

    from zarr_vectors.execution.environment import DISTRIBUTION, check_once

    mine = importlib.metadata.version(DISTRIBUTION)
    client = _Client(mine, None, run=lambda: {"tcp://a": mine})
    client.present = ("tcp://a",)
    check_once(client)
    client.away = True
    client.joins("tcp://b")  # not pushed: the connection is down
    client.answer = lambda: pytest.fail("asked with no join pushed")
    check_once(client)  # the same connection: nothing known
    client.reconnect()
    client.answer = lambda: {"tcp://b": mine}
    check_once(client)
    assert client.asked == ["tcp://b"]
    client.reconnect(restarted=True)
    client.present = ("tcp://a", "tcp://c")
    client.answer = lambda: {"tcp://a": mine, "tcp://c": mine}
    check_once(client)
    assert client.asked == ["tcp://a", "tcp://c"]
    client.joins("tcp://d")  # the new scheduler's count starts again
    client.answer = lambda: {"tcp://d": mine}
    check_once(client)
    assert client.asked == ["tcp://d"]
    client.reconnect(restarted=True)
    client.scheduler_version = "0.0.1"  # restarted from another image
    with pytest.raises(InputError, match=r"after a reconnection.*the scheduler: 0\.0\.1"):
        check_once(client)


def test_an_interrupted_question_to_joined_workers_is_asked_again():
    """Review: the workers that joined were marked asked before the question, so a Ctrl-C during it
    let them pass for good."""
    import importlib.metadata

    from zarr_vectors.execution.environment import DISTRIBUTION, check_once

    mine = importlib.metadata.version(DISTRIBUTION)
    client = _Client(mine, None, run=lambda: {"tcp://a": mine})
    client.present = ("tcp://a",)
    check_once(client)
    client.joins("tcp://old")
    client.answer = lambda: (_ for _ in ()).throw(KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        check_once(client)
    client.answer = lambda: {"tcp://old": "0.0.1"}
    with pytest.raises(InputError, match="worker tcp://old: 0.0.1"):
        check_once(client)


def test_the_scheduler_side_subscription_pushes_every_later_join_and_returns_the_log_so_far():
    """``arrivals.subscribe`` on a real scheduler, with no subscription sent from the client: it
    subscribes the client itself (a subscription sent on its own starts later) and returns the
    scheduler's id, its workers and the log so far; a join logged after it is pushed."""
    from zarr_vectors.execution.arrivals import JOINED, JoinLog, subscribe

    def log_join(worker: str, n: int) -> None:
        client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.log_event(JOINED, {"worker": worker, "n": n}))

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        log_join("tcp://before", 1)
        log = JoinLog()
        client._event_handlers[JOINED] = log.pushed  # the handler alone, as subscribe_topic sets it, nothing sent
        scheduler, workers, events = client.run_on_scheduler(subscribe, client=client.id)
        assert scheduler == cluster.scheduler.id and workers == list(cluster.scheduler.workers)
        log.add(events)
        assert log.joins() == {"tcp://before": 1}
        log_join("tcp://after", 2)
        wait_for(lambda: log.joins().get("tcp://after") == 2, 30, what="the pushed join")
        del client._event_handlers[JOINED]


def test_joins_are_kept_by_number_whatever_order_they_arrive_in():
    """The scheduler pushes every join logged after the subscription, and a push can reach the
    client before the answer carrying the log so far: the log keeps each worker's latest join by
    the plugin's count, not by a clock that may step back."""
    from zarr_vectors.execution.arrivals import JoinLog, latest

    log = JoinLog()
    log.pushed((1.0, {"worker": "tcp://a", "n": 3}))
    log.pushed((3.0, "not an entry of ours"))
    log.add([(2.0, {"worker": "tcp://a", "n": 1}), (0.5, {"worker": "tcp://b", "n": 2}),
             (1.0, {"worker": "tcp://c", "n": "2"}), (1.0, {"worker": "tcp://d", "n": True})])
    assert log.joins() == {"tcp://a": 3, "tcp://b": 2}
    assert latest([(5.0, {"worker": 7, "n": 4}), (4.0, {"worker": "7", "n": 5})]) == {"7": 5}


def test_a_client_run_from_a_source_tree_warns_that_the_cluster_is_not_checked(monkeypatch):
    """Review: a client whose own distribution is not installed (PYTHONPATH on a checkout) crashed with a traceback."""
    import importlib.metadata

    from zarr_vectors.execution.environment import check_cluster

    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    with pytest.warns(UserWarning, match="not checked"):
        check_cluster(_Answers(AssertionError("not asked"), AssertionError("not asked")), "x")
