"""Hostile file trees: links in and out of the store, loops, FIFOs, devices, directories for files.

Stores are data from elsewhere.  Each named regression test plants one special object in a
valid store and runs the three ways a user meets it -- ``validate(level=5)``, ``zv.read``
and ``zv validate --json`` in a subprocess -- asserting an ``L1_STORAGE_OBJECT`` finding
naming the key (never an exception out of ``validate`` nor ``*_CHECK_CRASHED``), a
``StorageObjectError`` naming the key from the reader, exit 1 with valid JSON from the
command line, and (a Python audit hook on ``open``) no file outside the store opened.
FIFO cases run under a guard that unblocks a stuck reader so a regression fails instead
of hanging the suite.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import zarr_vectors as zv
from zarr_vectors.errors import StorageObjectError
from zarr_vectors.store.backend import LocalStorage
from zarr_vectors.store.localfs import Listing
from zarr_vectors.validation import validate

REPO = Path(__file__).resolve().parents[2]
CHUNK = "0/vertices/c/0/0/0"
LINK_CHUNK = "0/links/0/0.0.0/c/0/0/0"

# -- the audit hook: every path opened or listed by this process while recording --------
_OPENED: list[tuple[str, str]] | None = None
_OPEN_EVENTS = frozenset({"open", "os.listdir", "os.scandir"})


#: the threads validate and read run on here: this one, dask's local pool, the package's I/O pools
#: (not the session LocalCluster's threads in this process, which read /proc for their monitors)
_OUR_THREADS = ("MainThread", "ThreadPoolExecutor-", "zv-")


#: distributed's hook on full garbage collections reads this process's memory (psutil), in
#: whichever thread the collection happens to run
_GC_DIAGNOSIS = f"/proc/{os.getpid()}/statm"


def _audit(event: str, args: tuple) -> None:
    if _OPENED is not None and event in _OPEN_EVENTS and args and isinstance(args[0], (str, bytes, os.PathLike)):
        name = threading.current_thread().name
        if name.startswith(_OUR_THREADS) and os.fsdecode(args[0]) != _GC_DIAGNOSIS:
            _OPENED.append((name, os.fsdecode(args[0])))


sys.addaudithook(_audit)  # hooks cannot be removed: it records only inside ``_recording``


@contextmanager
def _recording() -> Iterator[list[tuple[str, str]]]:
    global _OPENED
    _OPENED = seen = []
    try:
        yield seen
    finally:
        _OPENED = None


@contextmanager
def _fifo_guard(fifos: list[Path], seconds: float = 30.0) -> Iterator[None]:
    """After ``seconds``, open each FIFO's write end: that unblocks a reader stuck in open()
    (and says one was, failing the test) instead of hanging the suite."""
    stop, unblocked = threading.Event(), []

    def watch() -> None:
        if stop.wait(seconds):
            return
        while not stop.is_set():
            for fifo in fifos:
                try:
                    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO unless a reader waits
                except OSError:
                    continue
                unblocked.append(str(fifo))
                os.close(fd)
            stop.wait(0.5)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
    assert not unblocked, f"a reader blocked opening the FIFO {unblocked}"


_WARMED: set[str] = set()


# -- the three ways in --------------------------------------------------------------------
def _warm(store: Path) -> None:
    """Import everything validate and read use, so the audit sees the store's opens only."""
    validate(str(store), 5)
    zv.read(str(store))


def _cli_validate(store: Path, scheduler: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", "validate", str(store), "--json",
                           "--scheduler-address", scheduler], capture_output=True, text=True, timeout=120, env=env,
                          cwd=str(store.parent))  # fmt: skip
    assert proc.returncode == 1, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    return json.loads(proc.stdout)


def _storage_findings(findings: list, key: str) -> list:
    return [f for f in findings if f["code"] == "L1_STORAGE_OBJECT" and key in f["message"]]


def assert_refused(store: Path, key: str, scheduler: str, *, read_raises: bool = True,
                   outside: Path | None = None) -> None:
    """validate, read and ``zv validate --json`` all report ``key``; nothing outside the store is opened."""
    fifos = [p for p in store.rglob("*") if p.is_fifo()]
    root = os.path.realpath(store)
    with _fifo_guard(fifos), _recording() as seen:
        result = validate(str(store), 5)
        if read_raises:
            with pytest.raises(StorageObjectError) as info:
                zv.read(str(store))
            assert key in str(info.value) and info.value.key.startswith(key.rpartition("/")[0]), info.value
        else:
            zv.read(str(store))
    assert not result.ok, result.summary()
    assert _storage_findings([f.as_dict() for f in result.findings], key), result.summary()
    assert not [c for c in result.codes() if c.endswith("_CHECK_CRASHED")], result.summary()
    assert any(p.startswith(root + os.sep) for t, p in seen if t != "MainThread"), "the audit saw no pool thread"
    escaped = [(t, p) for t, p in seen if not os.path.realpath(p).startswith(root + os.sep) and os.path.realpath(p) != root]
    assert not escaped, f"opened outside the store: {escaped[:10]}"
    if outside is not None:
        assert not [p for _, p in seen if p.startswith(str(outside))]
    with _fifo_guard(fifos):
        doc = _cli_validate(store, scheduler)
    assert doc["ok"] is False and _storage_findings(doc["findings"], key), doc["errors"]


@pytest.fixture
def scheduler(local_cluster) -> str:  # noqa: ANN001
    return local_cluster.scheduler.address


@pytest.fixture
def hostile(copy_store: Callable[[str], Path], base_stores: dict[str, Path]) -> Callable[[str], Path]:
    """A copy of a valid base store, after validate and read ran once on the original."""

    def make(name: str) -> Path:
        if name not in _WARMED:
            _warm(base_stores[name])
            _WARMED.add(name)
        return copy_store(name)

    return make


def _replace_with_link(store: Path, key: str, target: str | Path) -> None:
    path = store / key
    shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    path.symlink_to(target)


# -- links out of the store ------------------------------------------------------------------
@pytest.mark.parametrize(("base", "key"), [("points", CHUNK), ("graph", LINK_CHUNK), ("points_sharded", CHUNK)],
                         ids=["vertex-cell", "link-cell", "shard"])
def test_symlinked_chunk_to_valid_outside_copy_is_refused(hostile, base_stores, tmp_path, scheduler, base,
                                                           key) -> None:  # noqa: ANN001
    outside = tmp_path / "outside"
    shutil.copytree(base_stores[base], outside)  # a valid copy: following the link would validate ok
    store = hostile(base)
    _replace_with_link(store, key, outside / key)
    assert_refused(store, key, scheduler, outside=outside)


@pytest.mark.parametrize("key", ["zarr.json", "0/zarr.json", "0/vertices/zarr.json"])
def test_symlinked_zarr_json_outside_is_refused(hostile, base_stores, tmp_path, scheduler, key) -> None:  # noqa: ANN001
    outside = tmp_path / "outside"
    shutil.copytree(base_stores["points"], outside)
    store = hostile("points")
    _replace_with_link(store, key, outside / key)
    assert_refused(store, key, scheduler, outside=outside)


def test_link_to_etc_passwd_is_refused(hostile, scheduler) -> None:  # noqa: ANN001
    store = hostile("points")
    _replace_with_link(store, CHUNK, "/etc/passwd")
    assert_refused(store, CHUNK, scheduler)


def test_link_to_proc_self_environ_is_refused(hostile, scheduler) -> None:  # noqa: ANN001
    store = hostile("points")
    _replace_with_link(store, "0/vertices/zarr.json", "/proc/self/environ")
    assert_refused(store, "0/vertices/zarr.json", scheduler)


def test_chunk_linked_to_dev_zero_is_refused(hostile, scheduler) -> None:  # noqa: ANN001
    store = hostile("points")
    _replace_with_link(store, CHUNK, "/dev/zero")
    assert_refused(store, CHUNK, scheduler)


def test_directory_symlink_to_root_is_never_walked(hostile, scheduler) -> None:  # noqa: ANN001
    """A link to / in place of a directory of cells."""
    store = hostile("points")
    _replace_with_link(store, "0/vertices/c/0", "/")
    assert_refused(store, "0/vertices/c/0", scheduler)


@pytest.mark.parametrize(("key", "read_raises"), [("0/vertex_attributes/elsewhere", True), ("elsewhere", False)],
                         ids=["where-the-reader-lists", "where-nothing-reads"])
def test_extra_directory_symlink_to_root_is_reported_not_walked(hostile, scheduler, key,
                                                                read_raises) -> None:  # noqa: ANN001
    """An added link to /: the reader refuses it where it lists nodes and is untouched elsewhere."""
    store = hostile("points")
    (store / key).symlink_to("/")
    assert_refused(store, key, scheduler, read_raises=read_raises)


# -- links that lead nowhere -----------------------------------------------------------------
@pytest.mark.parametrize("shape", ["self", "pair"])
def test_symlink_loop_is_a_finding_not_an_exception(hostile, scheduler, shape) -> None:  # noqa: ANN001
    store = hostile("points")
    if shape == "self":
        _replace_with_link(store, CHUNK, Path(CHUNK).name)
    else:
        _replace_with_link(store, CHUNK, "other")
        (store / CHUNK).parent.joinpath("other").symlink_to(Path(CHUNK).name)
    assert_refused(store, CHUNK, scheduler)


def test_dangling_symlink_is_a_finding_not_an_exception(hostile, scheduler) -> None:  # noqa: ANN001
    store = hostile("points")
    _replace_with_link(store, CHUNK, "/nonexistent/zv-cell")
    assert_refused(store, CHUNK, scheduler)


# -- special files -----------------------------------------------------------------------------
@pytest.mark.timeout(240)
def test_fifo_in_place_of_chunk_never_blocks(hostile, scheduler) -> None:  # noqa: ANN001
    store = hostile("points")
    (store / CHUNK).unlink()
    os.mkfifo(store / CHUNK)
    assert_refused(store, CHUNK, scheduler)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("key", ["zarr.json", "0/vertices/zarr.json"])
def test_fifo_in_place_of_zarr_json_never_blocks(hostile, scheduler, key) -> None:  # noqa: ANN001
    store = hostile("points")
    (store / key).unlink()
    os.mkfifo(store / key)
    assert_refused(store, key, scheduler)


def test_directory_in_place_of_chunk_file_is_refused(hostile, scheduler) -> None:  # noqa: ANN001
    store = hostile("points")
    (store / CHUNK).unlink()
    (store / CHUNK).mkdir()
    assert_refused(store, CHUNK, scheduler)


def test_directory_in_place_of_zarr_json_is_refused(hostile, scheduler) -> None:  # noqa: ANN001
    store = hostile("points")
    (store / "0/vertices/zarr.json").unlink()
    (store / "0/vertices/zarr.json").mkdir()
    assert_refused(store, "0/vertices/zarr.json", scheduler)


def test_device_in_place_of_chunk_is_refused(hostile, scheduler) -> None:  # noqa: ANN001
    store = hostile("points")
    (store / CHUNK).unlink()
    try:
        os.mknod(store / CHUNK, 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # what /dev/zero is
    except (PermissionError, AttributeError) as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    assert_refused(store, CHUNK, scheduler)


# -- met after the walk ---------------------------------------------------------------------
class _BlindListing(LocalStorage):
    """A listing that does not see special objects: as when one appears after the walk."""

    def scan(self) -> Listing:
        listing = super().scan()
        return Listing(listing.sizes, {}, listing.dirs)


@pytest.mark.parametrize("key", [CHUNK, LINK_CHUNK])
def test_storage_object_met_after_the_walk_is_that_finding_not_a_crash(copy_store, tmp_path, key) -> None:  # noqa: ANN001
    store = copy_store("graph")
    _replace_with_link(store, key, "/etc/passwd")
    result = validate(_BlindListing(str(store)), 5)
    assert not result.ok
    assert [f for f in result.findings if f.code == "L1_STORAGE_OBJECT" and key in f.message], result.summary()
    assert not [c for c in result.codes() if c.endswith("_CHECK_CRASHED")], result.summary()
