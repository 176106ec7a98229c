"""Request accounting (store/accounting.py, execution/requests.py): each contract call counted
once by the rule, on every backend, whichever thread or process issues it."""

from __future__ import annotations

import threading
import uuid

import dask
import numpy as np
import pytest
from file_tree import tree

import zarr_vectors as zv
from zarr_vectors.execution.requests import CLIENT, count_requests
from zarr_vectors.store.accounting import RequestCounts, pop_tagged
from zarr_vectors.store.backend import LocalStorage, Storage, io_pool
from zarr_vectors.store.fsspec_backend import MemoryStorage

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


@pytest.fixture(params=["local", "memory"])
def storage(request, tmp_path) -> Storage:
    url = str(tmp_path / "s") if request.param == "local" else f"memory://acct-{uuid.uuid4().hex}"
    return Storage(url)


def counted(fn) -> RequestCounts:
    with count_requests() as tally:
        fn()
    return tally.counts


def test_each_contract_call_counts_by_the_rule(storage):
    """Local disk and memory count like an object store: one request per object, bytes as moved."""
    assert counted(lambda: storage.put("a/x", b"12345")) == RequestCounts(puts=1, bytes_written=5)
    assert counted(lambda: storage.put_many({"a/y": b"1", "a/z": b"22", "b/w": b"333"})) == RequestCounts(
        puts=3, bytes_written=6
    )
    assert counted(lambda: storage.get("a/x")) == RequestCounts(gets=1, bytes_read=5)
    assert counted(lambda: storage.get("a/missing")) == RequestCounts(gets=1)  # a miss is a request too
    assert counted(lambda: storage.get_many(["a/x", "a/y", "a/missing"])) == RequestCounts(gets=3, bytes_read=6)
    assert counted(lambda: storage.get_ranges([("a/x", 1, 3), ("a/z", 0, None)])) == RequestCounts(
        gets=2, bytes_read=4
    )
    decoded = RequestCounts(gets=2, bytes_read=7)  # through get / get_many: the bytes are known there
    assert counted(lambda: storage.get_decoded(["a/x", "a/z"], lambda i, raw: len(raw))) == decoded
    assert counted(lambda: storage.exists("a/x")) == RequestCounts(heads=1)
    assert counted(lambda: storage.list_dir("a")) == RequestCounts(lists=1)
    assert counted(lambda: storage.list_dirs(["a", "b", "c"])) == RequestCounts(lists=3)
    assert counted(lambda: storage.list_files("")) == RequestCounts(lists=1)
    assert counted(lambda: storage.object_sizes()) == RequestCounts(lists=1)
    assert counted(lambda: storage.scan()) == RequestCounts(lists=1)
    assert counted(lambda: storage.delete("a/x")) == RequestCounts(deletes=1)
    assert counted(lambda: storage.delete_many(["a/y", "a/z"])) == RequestCounts(deletes=2)


def test_batched_reads_on_io_threads_are_counted_once(tmp_path):
    """The base get_many reads through get on the I/O pool: each object once, not twice, not lost."""
    storage = LocalStorage(str(tmp_path / "s"))
    keys = [f"c/{i}" for i in range(40)]
    storage.put_many({k: b"x" * (i + 1) for i, k in enumerate(keys)})
    with count_requests() as tally:
        storage.get_many(keys)
        list(io_pool().map(storage.get, keys[:10]))  # a caller's own use of the pool
    assert tally.counts == RequestCounts(gets=50, bytes_read=sum(range(1, 41)) + sum(range(1, 11)))


def test_a_new_backend_is_counted_without_code_of_its_own():
    class Wrapped(MemoryStorage):
        """A backend defining its own get: counted through the contract, once."""

        def get(self, key: str) -> bytes | None:
            return super().get(key)

    storage = Wrapped(f"memory://acct-{uuid.uuid4().hex}")
    storage.put("k", b"abc")
    assert counted(lambda: storage.get("k")) == RequestCounts(gets=1, bytes_read=3)
    assert counted(lambda: storage.get_many(["k", "k"])) == RequestCounts(gets=2, bytes_read=6)


def test_requests_outside_a_count_are_not_recorded(storage):
    storage.put("k", b"abc")
    with count_requests() as tally:
        pass
    storage.get("k")
    assert tally.counts == RequestCounts()
    assert pop_tagged(tally.token) == {}


def test_nested_counts_add_to_the_outer_one(storage):
    with count_requests() as outer:
        storage.put("k", b"ab")
        with count_requests() as inner:
            storage.get("k")
    assert inner.counts == RequestCounts(gets=1, bytes_read=2)
    assert outer.counts == RequestCounts(gets=1, puts=1, bytes_read=2, bytes_written=2)


def test_counts_of_concurrent_threads_stay_apart(tmp_path):
    """Two jobs in one process (detached jobs share a worker): each counts only its own requests."""
    storage = LocalStorage(str(tmp_path / "s"))
    storage.put("k", b"abcd")
    out: dict[int, RequestCounts] = {}

    def job(n: int) -> None:
        with count_requests() as tally:
            storage.get_many(["k"] * n)
        out[n] = tally.counts

    threads = [threading.Thread(target=job, args=(n,)) for n in (3, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == {3: RequestCounts(gets=3, bytes_read=12), 7: RequestCounts(gets=7, bytes_read=28)}


def _points(n: int = 4000):
    return np.random.default_rng(5).uniform(0, 100, (n, 3))


def test_local_threads_tasks_counted_by_stage(tmp_path, zv_config):
    zv_config("write.block-rows", 1000)
    zv_config("write.min-rows-per-task", 800)
    out = tmp_path / "s.zv"
    with dask.config.set(scheduler="threads"), count_requests() as tally:
        zv.write_points(str(out), _points(), chunk_shape=25)
    files = tree(out)
    stages = tally.by_stage
    cells = [k for k in files if k.startswith("0/vertices/c/")]
    assert stages["write vertices"].puts >= len(cells) > 1  # the cells: written by the tasks, on dask's threads
    assert tally.counts.puts >= len(files)  # metadata is rewritten by reconcile: never fewer PUTs than objects
    assert tally.counts.bytes_written >= sum(len(v) for v in files.values())
    assert CLIENT in stages and stages[CLIENT].puts > 0  # the store's skeleton, written here


def test_cluster_tasks_are_counted_on_their_workers(tmp_path, local_cluster, zv_config):
    """The same write on two worker processes counts exactly what it counts on local threads."""
    zv_config("write.block-rows", 1000)
    zv_config("write.min-rows-per-task", 800)
    pos = _points()
    with dask.config.set(scheduler="threads"), count_requests() as here:
        zv.write_points(str(tmp_path / "a.zv"), pos, chunk_shape=25)
    with local_cluster.as_current(), count_requests() as there:
        zv.write_points(str(tmp_path / "b.zv"), pos, chunk_shape=25)
        read_back = zv.read(str(tmp_path / "b.zv"))
    assert len(read_back) == len(pos)
    written = {k: v for k, v in there.by_stage.items() if k != "read"}
    assert here.by_stage["write vertices"] == written["write vertices"]
    assert here.by_stage["write vertices"].puts > 1
    assert here.by_stage["reconcile"] == written["reconcile"]
    # no task's requests stay behind on a worker once the count has ended
    assert all(v == {} for v in local_cluster.run(pop_tagged, there.token).values())


def test_pyramid_coordinator_threads_are_counted(tmp_path):
    """The pyramid's coordinator step reads and writes on its own threads: counted with its task."""
    a, b = str(tmp_path / "a.zv"), str(tmp_path / "b.zv")
    for out in (a, b):
        zv.write_points(out, _points(), chunk_shape=25)
    with dask.config.set(scheduler="synchronous"), count_requests() as sync:
        zv.build_pyramid(a, factors=[(2, 1)])
    with dask.config.set(scheduler="threads"), count_requests() as threads:
        zv.build_pyramid(b, factors=[(2, 1)])
    assert sync.counts.puts > 0 and sync.counts.gets > 0
    assert threads.counts == sync.counts


@pytest.mark.slow
def test_a_worker_lost_with_its_counts_makes_the_tally_incomplete(tmp_path, zv_config):
    """Regression: a worker killed after recording requests was restarted by its nanny, the count
    gathered from the new one and reported a smaller total as if complete."""
    import os
    import signal
    import time

    from distributed import Client, LocalCluster

    from zarr_vectors.execution.tagging import topic

    zv_config("write.block-rows", 1000)
    zv_config("write.min-rows-per-task", 800)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as client:  # fmt: skip
        with count_requests() as whole:
            zv.write_points(str(tmp_path / "a.zv"), _points(), chunk_shape=25)
        assert whole.incomplete == [] and whole.by_stage["write vertices"].puts > 1
        with count_requests() as cut:
            zv.write_points(str(tmp_path / "b.zv"), _points(), chunk_shape=25)
            recorded = sorted(m["worker"] for _, m in client.get_events(topic(cut.token)))  # their addresses
            victim = recorded[0]
            os.kill(client.run(os.getpid, workers=[victim])[victim], signal.SIGKILL)
            deadline = time.monotonic() + 60
            while client.run_on_scheduler(lambda dask_scheduler: victim in dask_scheduler.workers):
                assert time.monotonic() < deadline, "the scheduler never saw the worker go"
                time.sleep(0.05)
            client.wait_for_workers(2, timeout=60)  # its nanny starts another in its place
        assert cut.incomplete == [f"worker {victim} recorded requests of this count and left before it ended: "
                                  "they are not counted"]
        assert cut.to_json()["incomplete"] == cut.incomplete


def test_a_tally_that_lost_a_worker_reads_back_and_prints_saying_so():
    """Regression (hunt): a build that lost a worker journalled ``incomplete`` beside its counts,
    and reading them back called ``int()`` on that list: the finished build, and every later
    ``zv info`` of its store, ended in a ``TypeError`` traceback."""
    from pipeline.cli import _requests_line
    from zarr_vectors.store.accounting import RequestCounts

    lost = "worker tcp://127.0.0.1:1 recorded requests of this count and left before it ended: 3 requests"
    doc = {**RequestCounts(gets=2, puts=3, bytes_written=9).to_json(), "by_stage": {}, "incomplete": [lost]}
    assert RequestCounts.from_json(doc) == RequestCounts(gets=2, puts=3, bytes_written=9)
    line = _requests_line({"requests": doc})
    assert line.startswith("2 GET, 3 PUT, 0 LIST, 0 HEAD, 0 DELETE; 0 B read, 9 B written")
    assert line.endswith(f"(incomplete: {lost})")
