"""Request economy on S3: what a write and a read-all ask the server, through either S3 backend.

The server counts requests by method (tests/s3server.py); the store's own listing gives
how many objects there are.  A read-all that reads an object twice, or probes with a
HEAD what a listing it already made could answer, is the defect class these pin.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import dask
import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.store.backend import Storage
from zarr_vectors.store.fsspec_backend import FsspecStorage
from zarr_vectors.store.obstore_backend import ObstoreStorage

pytestmark = [pytest.mark.s3, pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")]

BACKENDS = {"obstore": ObstoreStorage, "s3fs": FsspecStorage}


def _graph(n: int = 600, seed: int = 5):
    rng = np.random.default_rng(seed)
    pos = rng.uniform(0, 100, (n, 3)).astype("f4")
    edges = rng.integers(0, n, (3 * n, 2))
    return pos, edges, {"weight": rng.random(3 * n).astype("f4")}, np.repeat(np.arange(n // 10), 10)


@pytest.fixture(params=sorted(BACKENDS))
def backend(request):
    with dask.config.set({"zarr_vectors.s3.backend": request.param}):
        yield request.param


def test_s3_backend_follows_the_setting(backend, s3_bucket):
    bucket, options = s3_bucket
    assert type(Storage(f"s3://{bucket}/x.zv", options)) is BACKENDS[backend]


def test_graph_read_reads_no_object_twice_and_never_heads(backend, s3_server, s3_bucket):
    """Every array document was read four times and every attribute array HEADed before its GET."""
    bucket, options = s3_bucket
    url = f"s3://{bucket}/g.zv"
    pos, edges, eattrs, ids = _graph()
    zv.write_graph(url, pos, edges, chunk_shape=50.0, bounds=[[0, 0, 0], [100, 100, 100]], object_ids=ids,
                   edge_attributes=eattrs, storage_options=options)
    objects = len(Storage(url, options).object_sizes())
    s3_server.reset()
    got = zv.read(url, storage_options=options)
    counts = s3_server.requests()
    assert len(got) == len(pos) and len(got.edges) == len(edges) and len(got.edge_attributes["weight"]) == len(edges)
    assert counts.get("HEAD", 0) <= 1, counts  # the bucket check, nothing per node
    # a GET is an object read or a listing: each object at most once, one listing per group
    assert counts.get("GET", 0) <= objects + 12, (counts, objects)


def test_fresh_graph_write_does_not_probe_each_link_array(backend, s3_server, s3_bucket):
    """Creating a family's arrays HEADed each one first (and s3fs followed each 404 with a listing)."""
    bucket, options = s3_bucket
    pos, edges, eattrs, ids = _graph()
    s3_server.reset()
    zv.write_graph(f"s3://{bucket}/w.zv", pos, edges, chunk_shape=50.0, bounds=[[0, 0, 0], [100, 100, 100]],
                   object_ids=ids, edge_attributes=eattrs, storage_options=options)
    counts = s3_server.requests()
    arrays = len([k for k in Storage(f"s3://{bucket}/w.zv", options).object_sizes() if k.endswith("zarr.json")])
    assert counts.get("HEAD", 0) < arrays // 4, (counts, arrays)


def test_missing_object_is_one_head(backend, s3_server, s3_bucket):
    """s3fs's exists() follows a 404 with a listing (is it a directory?): two round trips per probe."""
    bucket, options = s3_bucket
    storage = Storage(f"s3://{bucket}/e.zv", options)
    storage.put("a/zarr.json", b"{}")
    s3_server.reset()
    assert storage.exists("a/zarr.json") and not storage.exists("b/zarr.json")
    assert s3_server.requests() == {"HEAD": 2}


def test_obstore_ranges_and_listings_match_the_contract(s3_bucket):
    """The obstore backend answers the Storage contract as the others do (ranges fsspec-style, None when missing)."""
    bucket, options = s3_bucket
    storage = ObstoreStorage(f"s3://{bucket}/r.zv", options)
    storage.put_many({"a/c/0": b"0123456789", "a/zarr.json": b"{}", "b": b"x"})
    assert storage.get_ranges([("a/c/0", 2, 5), ("a/c/0", -3, None), ("a/c/0", 4, None), ("a/c/0", 8, 20),
                               ("nope", 0, 2), ("a/c/0", 3, 3)]) == [b"234", b"789", b"456789", b"89", None, b""]
    assert storage.get_many(["b", "nope"]) == [b"x", None]
    assert storage.list_dir("") == ["a", "b"] and storage.list_dirs(["a", "none"]) == [["c", "zarr.json"], []]
    assert storage.list_files("a") == ["a/c/0", "a/zarr.json"]
    storage.move_many([("b", "d")])
    assert sorted(storage.object_sizes()) == ["a/c/0", "a/zarr.json", "d"]
    storage.delete_prefix("a")
    assert storage.object_sizes() == {"d": 1}


def test_obstore_refuses_an_option_it_cannot_honour(s3_bucket):
    bucket, options = s3_bucket
    with pytest.raises(zv.errors.InputError, match="not understood by the obstore"):
        ObstoreStorage(f"s3://{bucket}/x.zv", {**options, "profile": "dev"})


def test_obstore_single_object_storage_uses_its_root_as_the_key(s3_bucket):
    """A job journal is a storage whose URL names one object, read and written at key "": the
    obstore backend first refused "" as a key, so `zv build` into S3 failed before any stage."""
    bucket, options = s3_bucket
    journal = ObstoreStorage(f"s3://{bucket}/out.zv.zvjob.json", options)
    assert journal.get("") is None
    journal.put("", b"{}")
    assert journal.get("") == b"{}" and journal.exists("")
    assert ObstoreStorage(f"s3://{bucket}", options).list_dir("") == ["out.zv.zvjob.json"]
    journal.delete_prefix("")  # what is below its root: nothing (its root may be a store's neighbour)
    assert journal.get("") == b"{}"
    journal.delete("")
    assert journal.get("") is None


def _waves(log: str, latency_s: float) -> list[list[str]]:
    """The server's request log (time, method, path) cut into waves of "METHOD path".  A request
    that waited for another's answer arrives a latency after it at the earliest, so a wave is
    what arrives within most of a latency of its first request: a client stalled under load
    for less than that (CI ran two suites beside this one) does not split a wave, as a cut at
    any gap did.  The lines of answers that were not successes are left out."""
    waves: list[list[str]] = []
    start = None
    for line in log.splitlines():
        at, request = line.split(" ", 1)
        if " -> " in request:
            continue
        if start is None or float(at) - start >= 0.9 * latency_s:
            waves.append([])
            start = float(at)
        waves[-1].append(request)
    return waves


LATENCY_MS = 400.0  # one wave's requests go out together; waves are a latency apart


def _waves_of(prepare, run) -> list[list[str]]:
    """The waves of ``run(url, options)`` on a slow server, after ``prepare(url, options)``
    (at no latency: its waves are not looked at)."""
    import io

    from tests.conftest import _bucket
    from tests.s3server import S3Server

    log = io.StringIO()
    server = S3Server(latency_ms=0, log=log).start()
    try:
        bucket, options = _bucket(server.endpoint)
        url = f"s3://{bucket}/p.zv"
        prepare(url, options)
        log.seek(0)
        log.truncate()
        server.middleware.latency_s = LATENCY_MS / 1000
        run(url, options)
        return _waves(log.getvalue(), latency_s=LATENCY_MS / 1000)
    finally:
        server.stop()


def _write_points(url, options):
    pos = np.random.default_rng(0).uniform(0, 100, (400, 3)).astype("f4")
    zv.write_points(url, pos, chunk_shape=50.0, bounds=[[0, 0, 0], [100, 100, 100]],
                    attributes={"value": pos[:, 0].copy()}, storage_options=options)
    return pos


def test_points_read_asks_its_metadata_in_three_waves(backend):
    """The reachability probe went before the root and the level's walk: 4 waves of
    metadata before the cells.  The probe, the root and the level's walk overlap
    (probe and root checked first): root + level, the level's children, the attribute arrays."""
    written, got = {}, {}
    waves = _waves_of(lambda url, o: written.update(pos=_write_points(url, o)),
                      lambda url, o: got.update(read=zv.read(url, storage_options=o)))
    pos, read = written["pos"], got["read"]
    assert len(read) == len(pos) and np.array_equal(np.sort(read.attributes["value"]), np.sort(pos[:, 0]))
    cells = next(i for i, wave in enumerate(waves) if any("/c/" in p for p in wave))
    assert cells == 3, waves
    assert any(p.endswith("/p.zv/zarr.json") for p in waves[0]) and any("p.zv%2F0%2F" in p for p in waves[0]), waves[0]


def test_points_write_reaches_its_cells_in_three_waves(backend):
    """A write probed the bucket twice (the writer, then create_store), and put the root's,
    level 0's and the arrays' documents in three waves of their own: six waves before the
    first cell.  Now one probe, the listing that refuses an existing store, one batch of
    documents.  (s3fs's own listing added a wave: a prefix that lists empty, it lists the
    parent; the s3fs backend's page loop does not.)"""
    waves = _waves_of(lambda url, o: None, _write_points)
    cells = next(i for i, wave in enumerate(waves) if any("/c/" in p for p in wave))
    assert cells == 3, waves
    probe, listing = waves[:2]  # obstore probes with a LIST of the store, s3fs with a HEAD of the bucket
    assert len(probe) == 1 and (probe[0].startswith("HEAD ") if backend == "s3fs" else "prefix=p.zv%2F" in probe[0])
    assert len(listing) == 1 and parse_qs(urlsplit(listing[0]).query)["prefix"] == ["p.zv/"], listing
    documents = waves[2]
    assert all(p.startswith("PUT ") and p.endswith("/zarr.json") for p in documents), documents
    assert any(p.endswith("/p.zv/zarr.json") for p in documents) and any(p.endswith("/p.zv/0/zarr.json")
                                                                          for p in documents), documents


def test_pyramid_lists_the_root_in_its_first_wave(backend):
    """The plan listed the root (which levels a build replaces) a wave of its own after
    checking level 0's arrays; now it rides with the root's read and level 0's walk."""
    def root_listings(wave):
        return [p for p in wave if "list-type" in p and parse_qs(urlsplit(p).query).get("prefix") == ["p.zv/"]]

    waves = _waves_of(_write_points, lambda url, o: zv.build_pyramid(url, factors=[2], storage_options=o))
    assert len(root_listings(waves[0])) == (1 if backend == "s3fs" else 2), waves[0]  # obstore's probe is one too
    assert not any(root_listings(w) for w in waves[1:]), waves


def test_shard_lists_beside_the_root_and_deletes_beside_the_moves(backend):
    """The sharder listed its staging area, then the root's levels, each after the root's read
    (three waves where one does), and deleted the cells its shards replace in a wave of its
    own before the shards' moves started.  Now the listings go with the root's read and the
    delete with the moves' first requests (their keys are disjoint)."""
    written, got = {}, {}

    def shard_then_read(url, options):
        zv.shard_store(url, shard_shape=2, storage_options=options)
        got["read"] = zv.read(url, storage_options=options)  # after the waves looked at

    waves = _waves_of(lambda url, o: written.update(pos=_write_points(url, o)), shard_then_read)
    assert np.array_equal(np.sort(got["read"].attributes["value"]), np.sort(written["pos"][:, 0]))
    first = waves[0]
    listed = {parse_qs(urlsplit(p).query).get("prefix", [None])[0] for p in first}
    assert any(p.endswith("/p.zv/zarr.json") for p in first), first
    assert {"p.zv/", "p.zv/.zv-shard-staging/"} <= listed, first  # the levels, the staging area
    journals = next(i for i, w in enumerate(waves) if any(p.endswith("/commit.json") for p in w))
    after = waves[journals + 1]  # the stale cells' bulk delete, and the moves' first requests
    deletes = [p for p in after if p.startswith("POST ") and p.endswith("?delete")]
    assert deletes and len(deletes) < len(after), waves


def test_the_test_server_at_rest_does_not_spin():
    """waitress casts its loop timeout to int: 0.2 s became 0, a poll that never waited, and the
    server's loop thread took a core (and the server's GIL) from start to stop, under every
    S3 test and benchmark figure.  Thread CPU of the loop over one idle second."""
    import os
    import time

    from tests.s3server import S3Server

    server = S3Server().start()
    try:
        tid = server._thread.native_id
        stat = f"/proc/{os.getpid()}/task/{tid}/stat"

        def cpu() -> float:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

        before = cpu()
        time.sleep(1.0)
        assert cpu() - before < 0.2, "the server's loop thread is busy with no request to serve"
    finally:
        server.stop()


def test_the_test_server_stops_when_the_process_that_started_it_is_gone(tmp_path):
    """A server whose benchmark was killed used to serve (and once spin a core) for the rest
    of the session.  Started from a shell that exits once the server is up, it must stop."""
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    out = tmp_path / "endpoint"
    shell = subprocess.run(
        ["sh", "-c", f'"{sys.executable}" -m tests.s3server > "{out}" 2>/dev/null & echo $!; '
                     f'n=0; while [ ! -s "{out}" ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n+1)); done'],
        cwd=repo, capture_output=True, text=True, timeout=120, check=True,
    )
    pid = int(shell.stdout.split()[0])
    assert out.read_text().startswith("http://127.0.0.1:"), "the server never came up"

    def running(pid: int) -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        return state != "Z"

    def stops(pid: int, what: str) -> None:
        deadline = time.monotonic() + 20
        while running(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if running(pid):
            os.kill(pid, 9)
            raise AssertionError(f"the server was still serving 20 s after {what}")

    stops(pid, "its parent exited")
    # a starter that may be gone before the server's interpreter is up names itself
    gone = subprocess.Popen(["true"])
    gone.wait()
    server = subprocess.Popen([sys.executable, "-m", "tests.s3server", "--parent-pid", str(gone.pid)], cwd=repo,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout.readline().startswith("http://127.0.0.1:")
        stops(server.pid, "the process it was told to outlive was gone")
    finally:
        server.kill()
        server.wait()


def test_the_test_server_stops_even_when_its_wake_up_pipe_is_gone():
    """Once in CI ``stop()`` met EBADF writing to the loop's wake-up pipe and the test failed
    in its teardown.  The pipe closed under the server, the server still stops."""
    import os

    from tests.s3server import S3Server

    server = S3Server().start()
    wake = server._server.trigger
    pipe = wake.trigger
    wake.trigger = -1  # as a stray close of its descriptor leaves it: writing to it is EBADF
    wake._fds = [wake._fds[0]]  # its own close must not close the real descriptor's number twice
    os.close(pipe)
    server.stop()
    assert not server._thread.is_alive()
