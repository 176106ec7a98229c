"""The storage layer opens only regular files inside the store root (store/localfs.py).

Every read entry point (get, get_ranges, get_many, get_decoded) refuses a symbolic link
(the object or any directory on the way), a FIFO, a device, a directory where a file
belongs, with ``StorageObjectError`` naming the key, before opening; listings list such
objects as keys but never descend a linked directory; writes never go through one.
"""

from __future__ import annotations

import os
import pickle
import stat
import threading
from pathlib import Path

import dask
import pytest

from zarr_vectors.errors import ResourceLimitError, StorageObjectError
from zarr_vectors.store.backend import LocalStorage, RangeRequest, Storage
from zarr_vectors.store.fsspec_backend import MemoryStorage


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, LocalStorage]:
    root = tmp_path / "store"
    (root / "a/b").mkdir(parents=True)
    (root / "a/b/cell").write_bytes(b"0123456789")
    (root / "zarr.json").write_bytes(b"{}")
    outside = tmp_path / "outside"
    (outside / "b").mkdir(parents=True)
    (outside / "b/cell").write_bytes(b"OUTSIDE")
    (outside / "secret").write_bytes(b"SECRET")
    return root, LocalStorage(str(root))


def _all_reads(storage: Storage, key: str) -> list:
    return [
        lambda: storage.get(key),
        lambda: storage.get_ranges([RangeRequest(key, 0, 4)]),
        lambda: storage.get_ranges([RangeRequest(key, -2, None), RangeRequest("a/b/cell", 0, 1)]),
        lambda: storage.get_many([key, "a/b/cell"]),
        lambda: storage.get_decoded([key, "a/b/cell"], lambda i, raw: raw),
    ]


def _assert_refused(storage: Storage, key: str) -> None:
    for read in _all_reads(storage, key):
        with pytest.raises(StorageObjectError) as info:
            read()
        assert info.value.key == key and key in str(info.value)


def test_regular_files_read_as_before(store) -> None:  # noqa: ANN001
    _, s = store
    assert s.get("a/b/cell") == b"0123456789"
    assert s.get_ranges([RangeRequest("a/b/cell", 2, 5), ("a/b/cell", -3, None), ("a/b/cell", 8, 100),
                         ("a/b/cell", 20, None)]) == [b"234", b"789", b"89", b""]
    assert s.get_many(["a/b/cell", "zarr.json", "missing"]) == [b"0123456789", b"{}", None]
    assert s.get("nowhere/at/all") is None and s.get_ranges([("nowhere/x", 0, 1)]) == [None]


def test_symlinked_file_is_refused(store, tmp_path) -> None:  # noqa: ANN001
    root, s = store
    (root / "a/b/cell").unlink()
    (root / "a/b/cell").symlink_to(tmp_path / "outside/b/cell")
    _assert_refused(s, "a/b/cell")


@pytest.mark.parametrize("target", ["/etc/passwd", "/proc/self/environ", "/dev/zero", "/nonexistent/x", "cell"],
                         ids=["passwd", "environ", "dev-zero", "dangling", "loop"])
def test_links_anywhere_are_refused_not_followed(store, target) -> None:  # noqa: ANN001
    root, s = store
    (root / "a/b/cell").unlink()
    (root / "a/b/cell").symlink_to(target)
    _assert_refused(s, "a/b/cell")
    assert "a/b/cell" in s.object_sizes() and s.scan().special["a/b/cell"] == "symbolic link"
    assert s.exists("a/b/cell")


def test_symlinked_directory_on_the_way_is_refused(store, tmp_path) -> None:  # noqa: ANN001
    root, s = store
    (root / "a/b/cell").unlink()
    (root / "a/b").rmdir()
    (root / "a/b").symlink_to(tmp_path / "outside/b")  # a "valid" cell behind a linked directory
    _assert_refused(s, "a/b/cell")
    with pytest.raises(StorageObjectError):
        s.exists("a/b/cell")


def test_directory_checks_are_remembered_per_instance(store) -> None:  # noqa: ANN001
    """A verified directory is not looked at again: a few syscalls per object."""
    _, s = store
    s.get("a/b/cell")
    assert {"", "a", "a/b"} <= s._fs._dirs


def test_link_cycle_in_directories_is_refused(store) -> None:  # noqa: ANN001
    root, s = store
    (root / "x").symlink_to("y")
    (root / "y").symlink_to("x")
    _assert_refused(s, "x/cell")
    assert s.scan().special == {"x": "symbolic link", "y": "symbolic link"}


@pytest.mark.timeout(30)
def test_fifo_is_refused_without_blocking(store) -> None:  # noqa: ANN001
    root, s = store
    os.mkfifo(root / "a/b/fifo")
    done = threading.Event()

    def reads() -> None:
        _assert_refused(s, "a/b/fifo")
        done.set()

    thread = threading.Thread(target=reads, daemon=True)
    thread.start()
    thread.join(10)
    if not done.is_set():  # unblock the stuck reader so the suite goes on, then fail
        os.close(os.open(root / "a/b/fifo", os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("reading a FIFO blocked")
    assert s.scan().special == {"a/b/fifo": "FIFO"}


def test_socket_is_refused(store) -> None:  # noqa: ANN001
    import socket

    root, s = store
    sock = socket.socket(socket.AF_UNIX)
    cwd = os.getcwd()
    try:
        os.chdir(root / "a/b")  # AF_UNIX paths are short; bind relative to the directory
        sock.bind("sock")
    finally:
        os.chdir(cwd)
    try:
        _assert_refused(s, "a/b/sock")
        assert s.scan().special == {"a/b/sock": "socket"}
    finally:
        sock.close()


def test_device_is_refused(store) -> None:  # noqa: ANN001
    root, s = store
    try:
        os.mknod(root / "a/b/dev", 0o600 | stat.S_IFCHR, os.makedev(1, 5))
    except (PermissionError, AttributeError) as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    _assert_refused(s, "a/b/dev")
    assert s.scan().special == {"a/b/dev": "device"}


def test_directory_where_a_file_belongs_is_refused(store) -> None:  # noqa: ANN001
    root, s = store
    (root / "a/b/dir").mkdir()
    _assert_refused(s, "a/b/dir")
    assert "a/b/dir" in s.scan().dirs


def test_file_where_a_directory_belongs_is_refused(store) -> None:  # noqa: ANN001
    _, s = store
    _assert_refused(s, "a/b/cell/inner")


@pytest.mark.parametrize("key", ["../outside/secret", "a/../../outside/secret", "a//b/cell", "a/./b/cell", "/etc/passwd"])
def test_keys_leading_outside_are_refused(store, key) -> None:  # noqa: ANN001
    _, s = store
    with pytest.raises(StorageObjectError):
        s.get(key)
    with pytest.raises(StorageObjectError):
        s.put(key, b"x")


def test_memory_storage_refuses_keys_leading_outside() -> None:
    s = Storage("memory://hostile/root")
    assert isinstance(s, MemoryStorage)
    s.put("a/cell", b"x")
    for key in ("../root/a/cell", "a/../a/cell", "a//cell"):
        with pytest.raises(StorageObjectError):
            s.get(key)
    assert s.get("a/cell") == b"x"


def test_listings_list_special_objects_but_never_descend_links(store, tmp_path) -> None:  # noqa: ANN001
    root, s = store
    (root / "a/up").symlink_to("/")
    (root / "a/out").symlink_to(tmp_path / "outside")
    (root / "a/file-link").symlink_to(tmp_path / "outside/secret")
    sizes = s.object_sizes()
    assert set(sizes) == {"zarr.json", "a/b/cell", "a/up", "a/out", "a/file-link"}
    assert sizes["a/b/cell"] == 10
    assert s.list_files("a") == ["a/b/cell", "a/file-link", "a/out", "a/up"]
    assert s.list_dir("a") == ["b", "file-link", "out", "up"]
    listing = s.scan()
    assert listing.special == {"a/up": "symbolic link", "a/out": "symbolic link", "a/file-link": "symbolic link"}
    assert sorted(listing.dirs) == ["a", "a/b"]
    for prefix in ("a/up", "a/out"):
        with pytest.raises(StorageObjectError):
            s.list_dir(prefix)
        with pytest.raises(StorageObjectError):
            s.list_files(prefix)


def test_writes_never_go_through_a_linked_directory(store, tmp_path) -> None:  # noqa: ANN001
    root, s = store
    (root / "w").symlink_to(tmp_path / "outside")
    before = {p: p.read_bytes() for p in (tmp_path / "outside").rglob("*") if p.is_file()}
    with pytest.raises(StorageObjectError):
        s.put("w/new", b"x")
    with pytest.raises(StorageObjectError):
        s.put("w/b/cell", b"overwritten")
    with pytest.raises(StorageObjectError):
        s.move_many([("a/b/cell", "w/moved")])
    with pytest.raises(StorageObjectError):
        s.move_many([("w/secret", "a/stolen")])
    with pytest.raises(StorageObjectError):
        s.delete("w/secret")
    with pytest.raises(StorageObjectError):
        s.delete_prefix("w/b")
    s.remove_empty_dirs(["w/b"], floor="")
    after = {p: p.read_bytes() for p in (tmp_path / "outside").rglob("*") if p.is_file()}
    assert after == before and s.get("a/b/cell") == b"0123456789"


def test_put_over_a_link_replaces_the_link_not_its_target(store, tmp_path) -> None:  # noqa: ANN001
    root, s = store
    (root / "a/b/cell").unlink()
    (root / "a/b/cell").symlink_to(tmp_path / "outside/secret")
    s.put("a/b/cell", b"new")
    assert not (root / "a/b/cell").is_symlink() and s.get("a/b/cell") == b"new"
    assert (tmp_path / "outside/secret").read_bytes() == b"SECRET"


def test_delete_prefix_of_a_link_removes_the_link_only(store, tmp_path) -> None:  # noqa: ANN001
    root, s = store
    (root / "a/out").symlink_to(tmp_path / "outside")
    s.delete_prefix("a/out")
    assert not os.path.lexists(root / "a/out") and (tmp_path / "outside/secret").exists()


def test_symlinked_root_is_allowed(store, tmp_path) -> None:  # noqa: ANN001
    root, _ = store
    (tmp_path / "alias").symlink_to(root)
    s = LocalStorage(str(tmp_path / "alias"))
    assert s.get("a/b/cell") == b"0123456789"
    s.put("a/new", b"n")
    assert (root / "a/new").read_bytes() == b"n"
    assert set(s.object_sizes()) == {"zarr.json", "a/b/cell", "a/new"}


def test_root_as_one_object(tmp_path) -> None:
    """Key "" is the root itself: a job journal is a one-file store."""
    s = LocalStorage(str(tmp_path / "job/x.zvjob.json"))
    assert s.get("") is None
    s.put("", b"{}")
    assert s.get("") == b"{}" and (tmp_path / "job/x.zvjob.json").read_bytes() == b"{}"
    with pytest.raises(StorageObjectError):
        LocalStorage(str(tmp_path)).get("")  # a store root is a directory, not an object


def test_missing_root_reads_nothing(tmp_path) -> None:
    s = LocalStorage(str(tmp_path / "absent"))
    assert s.get("zarr.json") is None and s.object_sizes() == {} and s.list_dir("") == [] and not s.exists("")
    s.put("zarr.json", b"{}")  # writing creates the root
    assert s.get("zarr.json") == b"{}"


def test_object_larger_than_the_decoded_ceiling_is_not_read(store) -> None:  # noqa: ANN001
    _, s = store
    with dask.config.set({"zarr_vectors.limits.max-decoded-bytes": 4}):
        with pytest.raises(ResourceLimitError):
            s.get("a/b/cell")
        assert s.get_ranges([("a/b/cell", 0, 4)]) == [b"0123"]


def test_storage_object_error_survives_pickling() -> None:
    """Distributed workers ship the error back: key and message intact."""
    exc = pickle.loads(pickle.dumps(StorageObjectError("a FIFO", key="0/vertices/c/0/0/0")))
    assert isinstance(exc, StorageObjectError) and exc.key == "0/vertices/c/0/0/0"
    assert str(exc) == "0/vertices/c/0/0/0: a FIFO"
