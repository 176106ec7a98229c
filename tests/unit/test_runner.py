"""The runner's client-side helpers: the frozen heap around a job, and owner shares."""

from __future__ import annotations

import gc

import dask
import pytest

from zarr_vectors.execution import runner


def test_the_heap_is_frozen_inside_a_job_and_given_back_after_the_last():
    assert gc.get_freeze_count() == 0
    with runner.frozen_heap():
        frozen = gc.get_freeze_count()
        assert frozen > 1000  # the modules, classes and functions alive at the start
        # (frozen objects can still be freed: the count only falls by those)
        with runner.frozen_heap():  # a nested job (zv build inside zv) ...
            assert gc.get_freeze_count() > frozen // 2
        assert gc.get_freeze_count() > frozen // 2  # ... does not thaw the outer one
    assert gc.get_freeze_count() == 0


def test_the_heap_is_given_back_when_the_job_fails():
    try:
        with runner.frozen_heap():
            raise KeyError("stage")
    except KeyError:
        pass
    assert gc.get_freeze_count() == 0


def test_freeze_heap_false_leaves_the_collector_alone(zv_config):
    zv_config("freeze-heap", False)
    with runner.frozen_heap():
        assert gc.get_freeze_count() == 0


def test_a_nested_job_freezes_what_the_outer_one_made_since():
    """A command enters before it starts its cluster, its job after: the job's entry
    freezes the cluster's and the client's objects too."""
    with runner.frozen_heap():
        made_since = [[] for _ in range(50)]  # containers: tracked by the collector
        assert _collected(made_since) == len(made_since)
        with runner.frozen_heap():
            # checked by identity: the frozen count also falls whenever any thread
            # frees a frozen object, so comparing counts races with other threads
            assert _collected(made_since) == 0
    assert gc.get_freeze_count() == 0
    assert _collected(made_since) == len(made_since)


def _collected(objects: list) -> int:
    """How many of ``objects`` the collector still scans (frozen ones it skips)."""
    scanned = {id(o) for o in gc.get_objects()}
    return sum(id(o) in scanned for o in objects)


def test_a_heap_the_process_froze_itself_is_left_as_it_is():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with runner.frozen_heap():
            extra = [[] for _ in range(5000)]
            assert gc.get_freeze_count() <= frozen  # not ours: nothing added ...
        assert gc.get_freeze_count() > 0 and extra  # ... and nothing thawed
    finally:
        gc.unfreeze()


def test_the_command_line_freezes_during_the_command_and_gives_the_heap_back(tmp_path, monkeypatch):
    import pipeline.cli as cli

    seen = []
    monkeypatch.setattr(cli, "_info", lambda args: seen.append(gc.get_freeze_count()) or 0)
    assert cli.main(["info", str(tmp_path / "any.zv")]) == 0
    assert seen and seen[0] > 1000
    assert gc.get_freeze_count() == 0


def test_a_detached_job_leaves_the_workers_heap_alone(monkeypatch):
    """``run_detached`` runs inside a worker, whose process holds other tasks' data."""
    import contextlib

    import distributed

    import pipeline.jobs as jobs

    seen = []
    client = type("Client", (), {"as_current": lambda self: contextlib.nullcontext()})()
    monkeypatch.setattr(distributed, "worker_client", lambda: contextlib.nullcontext(client))
    monkeypatch.setattr(jobs, "run_build", lambda spec, resume: seen.append(gc.get_freeze_count()) or _Result())
    jobs.run_detached(None)
    assert seen == [0]


class _Result:
    def to_json(self) -> dict:
        return {}


def test_on_local_threads_every_owner_takes_the_parts_as_they_are():
    parts = [dask.delayed(lambda i=i: [i * 10 + j for j in range(3)])() for i in range(2)]
    shares = runner.shares(parts, lambda routed, j: routed[j], 3)
    assert len(shares) == 3 and all(s == parts for s in shares)  # no task per share: nothing moves


def _per_owner_sums(parts):
    def owner_sum(scale, j, *given):  # one result per call, summed over calls: owner j's items of the parts given
        return [(j, scale * sum(p[j] for p in given), len(given))]

    made = runner.per_owner(owner_sum, parts, 3, 10)
    return made, [row for rows in dask.compute(*made) for row in rows]


def test_per_owner_on_local_threads_is_one_task_per_owner_with_every_part():
    parts = [dask.delayed(lambda i=i: [i * 10 + j for j in range(3)])() for i in range(2)]
    made, rows = _per_owner_sums(parts)
    assert len(made) == 3 and rows == [(0, 100, 2), (1, 120, 2), (2, 140, 2)]


def test_per_owner_under_a_client_is_one_task_per_owner_and_part(local_cluster):
    with local_cluster.as_current():
        parts = runner.persist("parts", *[dask.delayed(lambda i=i: [i * 10 + j for j in range(3)])() for i in range(2)])
        made, rows = _per_owner_sums(parts)
    assert len(made) == 6 and all(n == 1 for *_, n in rows)  # each task takes one part, where it is
    totals = {j: sum(v for o, v, _ in rows if o == j) for j in range(3)}
    assert totals == {0: 100, 1: 120, 2: 140}  # what one task per owner gives


def test_calls_are_one_layer_and_give_what_delayed_calls_give():
    import numpy as np

    parts = [dask.delayed(lambda i=i: i * 10)() for i in range(3)]
    shared = runner.share(np.array([7, 8]))

    def owner(table, k, scale, cells, *values):
        return (int(table[k % 2]), k, scale, cells.tolist(), sum(values))

    # numpy integers pass as numbers (a slice's start may be one); None, floats and arrays too
    args = [(shared, np.int64(k) if k % 2 else k, None if k else 2.5, np.arange(k), *parts) for k in range(4)]
    made = runner.calls(owner, args)
    graph = made[0].__dask_graph__()
    holding = [layer for layer in graph.layers.values() if made[0].key in layer]
    assert len(holding) == 1 and all(d.key in holding[0] for d in made)  # one layer of the four tasks
    assert dask.compute(*made) == dask.compute(*[dask.delayed(owner)(*a) for a in args])
    assert all(dask.utils.key_split(d.key) == "owner" for d in made)  # named as dask.delayed names tasks


def test_calls_merge_a_shared_value_once_however_many_tasks_take_it(monkeypatch):
    import numpy as np

    merged = []
    build = runner.HighLevelGraph.from_collections
    monkeypatch.setattr(runner.HighLevelGraph, "from_collections",
                        lambda name, layer, dependencies=(): merged.append((name, len(dependencies)))
                        or build(name, layer, dependencies))
    shared = runner.share(np.arange(3))  # a leaf: its graph is made anew on every access

    def pick_row(table, k):
        return int(table[k])

    made = runner.calls(pick_row, [(shared, k) for k in range(3)])
    assert [n for name, n in merged if name.startswith("pick_row")] == [1]
    assert dask.compute(*made) == (0, 1, 2)


def test_calls_refuse_an_argument_the_graph_could_read_as_a_key():
    import numpy as np
    import pytest

    with pytest.raises(TypeError, match="neither a graph reference nor a number or array"):
        runner.calls(print, [("write_owner-1",)])
    holding_a_reference = np.empty(1, dtype=object)
    holding_a_reference[0] = dask.delayed(print)()
    with pytest.raises(TypeError, match="neither a graph reference nor a number or array"):
        runner.calls(print, [(holding_a_reference,)])
    in_a_field = np.empty(1, dtype=[("n", np.int64), ("ref", object)])  # the hunt: passed as a literal
    in_a_field[0] = (1, dask.delayed(print)())
    with pytest.raises(TypeError, match="neither a graph reference nor a number or array"):
        runner.calls(print, [(in_a_field,)])


class _StageLog:
    def __init__(self, log: list) -> None:
        self.log = log

    def on_stage_start(self, stage: str, tasks: int) -> None:
        self.log.append(("start", stage, tasks))

    def on_task_end(self, stage: str) -> None:
        pass

    def on_stage_end(self, stage: str) -> None:
        self.log.append(("end", stage))


def test_on_local_threads_started_work_runs_once_beside_the_stage_that_takes_it():
    log: list = []

    def background() -> int:
        log.append("background ran")
        return 5

    started = runner.start(dask.delayed(background)())
    assert log == []  # local threads: start runs nothing by itself
    with runner.callbacks(_StageLog(log)), dask.config.set(scheduler="threads"):
        (own,), (late,) = runner.persist_beside("links", [dask.delayed(lambda: 1)()], started)
        assert log == [("start", "links", 2), "background ran", ("end", "links")]
        total = runner.compute("reconcile", dask.delayed(lambda a, b: a + b)(own, late))
    assert total == [6] and log.count("background ran") == 1  # persisted: the later stage reuses it


def test_under_a_client_started_work_comes_back_from_persist_beside_as_it_is(local_cluster):
    with local_cluster.as_current():
        started = runner.start(dask.delayed(sum)([2, 3]))
        (own,), late = runner.persist_beside("links", [dask.delayed(sum)([1])], started)
        assert late == started and late[0] is started[0]  # already running: not submitted again
        assert runner.compute("reconcile", dask.delayed(lambda a, b: a + b)(own, late[0])) == [6]


@pytest.mark.parametrize("counted", [False, True], ids=["plain", "counted"])
@pytest.mark.parametrize("keep", [False, True], ids=["compute", "persist"])
def test_a_failed_graph_on_local_threads_raises_once_the_tasks_it_started_ended(tmp_path, counted, keep):
    """Regression (hunt): dask's threaded scheduler raised at the first failed task while the
    others went on -- a failed write kept writing cells behind its error (512 PUTs 5 s after
    it raised at 8).  Both tasks start at once; the raise waits for the slow one."""
    import time
    from contextlib import nullcontext

    from zarr_vectors import count_requests

    def slow() -> int:
        time.sleep(0.5)
        (tmp_path / "late").write_text("written")
        return 1

    def fail() -> int:
        time.sleep(0.05)
        raise ValueError("refused")

    run = runner.persist if keep else runner.compute
    with dask.config.set(num_workers=2), count_requests() if counted else nullcontext():
        with pytest.raises(ValueError, match="refused"):
            run("stage", dask.delayed(slow)(), dask.delayed(fail)())
        assert (tmp_path / "late").read_text() == "written"
    assert run("stage", dask.delayed(slow)())[0] is not None  # the pool still runs graphs after a failure


def _marking(folder, seconds: float):
    """A task that marks its start and its end in ``folder``."""
    import time

    def task(i: int) -> int:
        (folder / f"start-{i}").touch()
        time.sleep(seconds)
        (folder / f"end-{i}").touch()
        return i

    return task


def _marks(folder) -> tuple[set[str], set[str]]:
    return tuple({p.name.split("-")[1] for p in folder.glob(f"{mark}-*")} for mark in ("start", "end"))


@pytest.mark.parametrize("keep", [False, True], ids=["compute", "persist"])
def test_a_failed_graph_under_a_client_stops_and_raises_once_its_started_tasks_ended(
        tmp_path, local_cluster, zv_config, keep):
    """A failed graph under a client was raised only after every other task of it had run: a
    long build went on for its whole length behind its first failure.  Now the rest is
    cancelled and the error raised once the tasks already running (they run on after a
    cancel) have ended -- on two one-thread workers, a handful of 40 tasks, not all 40."""
    import time

    def fail() -> int:
        time.sleep(0.2)
        raise ValueError("refused")

    zv_config("task-retries", 0)
    tasks = [dask.delayed(_marking(tmp_path, 0.3), pure=False)(i) for i in range(40)]
    run = runner.persist if keep else runner.compute
    with local_cluster.as_current(), pytest.raises(ValueError, match="refused"):
        run("stage", dask.delayed(fail)(), *tasks)
    started, ended = _marks(tmp_path)
    assert started == ended and 0 < len(started) < 20, (started, ended)
    time.sleep(1.0)
    assert _marks(tmp_path) == (started, ended)  # nothing of it ran after the raise


def test_a_failed_graph_under_a_client_waits_for_a_task_that_never_ends_only_so_long(
        tmp_path, local_cluster, zv_config):
    """``zarr_vectors.failed-graph-wait`` bounds the wait: a hung task does not hold the error back."""
    def fail() -> int:
        import time

        time.sleep(0.5)
        raise ValueError("refused")

    zv_config("task-retries", 0)
    zv_config("failed-graph-wait", "1s")
    with local_cluster.as_current(), pytest.raises(ValueError, match="refused"):
        runner.compute("stage", dask.delayed(fail)(), dask.delayed(_marking(tmp_path, 6.0), pure=False)(0))
    assert _marks(tmp_path) == ({"0"}, set())  # started, raised while it still ran


def test_a_failed_graph_under_a_client_waits_for_the_work_started_beside_it(tmp_path, local_cluster, zv_config):
    """Review: work handed to :func:`runner.start` (a linked write's reconcile) that the failed
    step does not take ran on after the raise, writing to the store the error was about."""
    def fail() -> int:
        import time

        time.sleep(0.2)
        raise ValueError("refused")

    zv_config("task-retries", 0)
    with local_cluster.as_current():
        started = runner.start(dask.delayed(_marking(tmp_path, 1.0), pure=False)(0))
        with pytest.raises(ValueError, match="refused"):
            runner.compute("stage", dask.delayed(fail)())
        assert _marks(tmp_path) == ({"0"}, {"0"})  # ended before the raise
        assert runner.compute("after", started[0]) == [0]  # still the caller's: not released


def test_a_failed_graph_under_a_client_is_raised_within_the_bound_beside_a_task_holding_the_gil(
        tmp_path, local_cluster, zv_config):
    """Review: the polls had no timeout, and a worker whose event loop a GIL-holding task starves
    does not answer: a 1 s bound held the error for 9.6 s, until the task ended."""
    def fail() -> int:
        import time

        time.sleep(0.5)
        raise ValueError("refused")

    def hog() -> int:
        total = sum(range(3 * 10**8))  # C code that keeps the GIL: the worker cannot answer meanwhile
        (tmp_path / "hog-ended").touch()
        return total

    zv_config("task-retries", 0)
    zv_config("failed-graph-wait", "0.5s")
    first, second = sorted(local_cluster.nthreads())
    with local_cluster.as_current(), pytest.raises(ValueError, match="refused"):
        with dask.annotate(workers=[first], allow_other_workers=False):
            failing = dask.delayed(fail)()
        with dask.annotate(workers=[second], allow_other_workers=False):
            hogging = dask.delayed(hog, pure=False)()
        runner.compute("stage", failing, hogging)
    assert not (tmp_path / "hog-ended").exists()
    local_cluster.run(lambda: None)  # the worker answers again once the task ended: later tests get it back


def test_a_task_still_on_its_way_to_a_worker_is_waited_for(tmp_path, zv_config):
    """Review: the poll's request can overtake the scheduler's stream to a worker, so a task
    sent before the release but not yet arrived was in no poll and started after the raise
    (here the stream to one worker is a second late).  A no-op task sent after it on the same
    stream now confirms a clean poll."""
    import asyncio
    import time

    from distributed import Client, LocalCluster

    def slow() -> int:
        time.sleep(1.0)
        (tmp_path / "slow-ended").touch()
        return 1

    def behind(value: int) -> int:
        (tmp_path / f"behind-{time.time():.3f}").touch()  # stands for a store write
        return value

    def fail() -> int:
        while not (tmp_path / "slow-ended").exists():
            time.sleep(0.005)
        time.sleep(0.03)
        raise ValueError("refused")

    zv_config("task-retries", 0)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster, set_as_default=False) as client:
        first, second = sorted(client.nthreads())
        stream = cluster.scheduler.stream_comms[second].comm
        write = stream.write

        async def late(*args, **kwargs):
            await asyncio.sleep(1.0)
            return await write(*args, **kwargs)

        stream.write = late
        with client.as_current(), pytest.raises(ValueError, match="refused"):
            with dask.annotate(workers=[first], allow_other_workers=False):
                failing = dask.delayed(fail)()
            with dask.annotate(workers=[second], allow_other_workers=False):
                last = dask.delayed(behind, pure=False)(dask.delayed(slow, pure=False)())
            runner.compute("stage", failing, last)
        raised = time.time()
        time.sleep(2.0)
    started = [float(p.name.split("-", 1)[1]) for p in tmp_path.glob("behind-*")]
    assert started and all(at < raised for at in started), [at - raised for at in started]


def test_a_graph_on_local_threads_runs_in_the_callers_context():
    """Review: the runner's own pools ran tasks outside the caller's context unless requests were
    counted (dask's threads carry it): a context variable, ``np.errstate``, read as unset."""
    import contextvars

    import numpy as np

    var: contextvars.ContextVar[str] = contextvars.ContextVar("zv_test_context", default="unset")
    token = var.set("caller")
    try:
        assert runner.compute("stage", dask.delayed(var.get)(), dask.delayed(var.get)()) == ["caller", "caller"]
    finally:
        var.reset(token)
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError):
        runner.compute("stage", dask.delayed(np.divide)(np.ones(1), np.zeros(1)))
