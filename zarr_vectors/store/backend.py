"""Whole-object key/value access to a store root over fsspec.

Every write is a whole object: a local file is written to a temporary name and
renamed into place, an S3 PUT is atomic.  That is what makes a retried Dask task
(or a task re-run after a killed worker) leave exactly the same store, and why the
project does its own cell I/O instead of going through zarr-python's array API,
which read-modify-writes metadata on every write.
"""

from __future__ import annotations

import os
import posixpath
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import fsspec

from zarr_vectors.errors import InputError, StoreNotFoundError

_IO_THREADS = 16
_POOL: ThreadPoolExecutor | None = None
_OVERLAP_POOL: ThreadPoolExecutor | None = None
T = TypeVar("T")
R = TypeVar("R")


def io_pool() -> ThreadPoolExecutor:
    """The process-wide pool for concurrent object reads (created on first use).

    One shared pool: reads happen per array and per cell batch, and starting a pool
    per call was the dominant cost of reading stores with many small arrays.
    """
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(_IO_THREADS, thread_name_prefix="zv-io")
    return _POOL


def _overlap_pool() -> ThreadPoolExecutor:
    """A pool for :meth:`Storage.overlap`, apart from :func:`io_pool`: its calls read
    through the I/O pool themselves, and nesting them in it could starve it."""
    global _OVERLAP_POOL
    if _OVERLAP_POOL is None:
        _OVERLAP_POOL = ThreadPoolExecutor(_IO_THREADS, thread_name_prefix="zv-overlap")
    return _OVERLAP_POOL


def _split_url(url: str | os.PathLike[str]) -> tuple[str, str]:
    """Return ``(protocol, root path)`` for a local path or an fsspec URL."""
    text = os.fspath(url)
    if not text:
        raise InputError("store URL is empty")
    if "://" not in text:
        return "file", os.path.abspath(text)
    protocol, rest = text.split("://", 1)
    protocol = protocol.lower()
    if protocol == "file":
        return "file", os.path.abspath(rest)
    if protocol in ("s3", "s3a"):
        rest = rest.strip("/")
        if not rest:
            raise InputError(f"store URL {text!r} names no bucket")
        return "s3", rest
    if protocol == "memory":
        return "memory", "/" + rest.strip("/")
    return protocol, rest.rstrip("/")


class Storage:
    """A store root: an fsspec filesystem plus the root path under it.

    Picklable by URL and storage options, so the same object can be shipped to
    Dask workers, which rebuild their own filesystem instance.
    """

    def __init__(
        self, url: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None
    ) -> None:
        self.url = os.fspath(url)
        self.storage_options = dict(storage_options or {})
        self.protocol, self.root = _split_url(self.url)
        fs_options = dict(self.storage_options)
        if self.protocol == "s3":
            # listings must show what other tasks just wrote (reconcile, exists checks)
            fs_options.setdefault("use_listings_cache", False)
            # With max_concurrency > 1 (its default), s3fs (2026.2+) HEADs every object
            # before a whole-object GET, to split large ones into ranged parts.  Ours are cells and
            # documents read many at a time: the HEAD doubled the requests (zv.read of a
            # 200k-vertex graph on a loopback S3 server: 59.5 s -> 33.8 s without it).
            fs_options.setdefault("max_concurrency", 1)
        self.fs = fsspec.filesystem(self.protocol, **fs_options)
        self._local = self.protocol == "file"
        self._made_dirs: set[str] = set()  # local directories known to exist

    def __reduce__(self) -> tuple[Any, ...]:
        return (Storage, (self.url, self.storage_options))

    def __repr__(self) -> str:
        return f"Storage({self.url!r})"

    # -- paths -------------------------------------------------------------
    @property
    def is_remote(self) -> bool:
        """Whether requests are network round trips worth overlapping on threads.

        Not for a local directory (measured slower) nor for ``memory://``, whose
        filesystem is a plain dict: a listing on one thread while another writes
        fails with "dictionary changed size during iteration".
        """
        return self.protocol not in ("file", "memory")

    def overlap(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """``[fn(x) for x in items]``, overlapped when each call is a few remote round trips.

        The one place callers choose between one-after-the-other (local, ``memory://``;
        see :attr:`is_remote`) and concurrent calls; ``fn`` may itself read concurrently.
        """
        todo = list(items)
        if not self.is_remote or len(todo) < 2:
            return [fn(x) for x in todo]
        return list(_overlap_pool().map(fn, todo))

    def full_path(self, key: str) -> str:
        return posixpath.join(self.root, key) if key else self.root

    @property
    def bucket(self) -> str | None:
        return self.root.split("/", 1)[0] if self.protocol == "s3" else None

    # -- reads -------------------------------------------------------------
    def get(self, key: str) -> bytes | None:
        """The object's bytes, or None when it does not exist."""
        path = self.full_path(key)
        if self._local:
            try:
                with open(path, "rb") as f:
                    return f.read()
            except (FileNotFoundError, NotADirectoryError):
                return None
        try:
            return self.fs.cat_file(path)
        except FileNotFoundError:
            return None

    def get_many(self, keys: Iterable[str]) -> list[bytes | None]:
        """Concurrent :meth:`get` of many keys, in order."""
        keys = list(keys)
        if len(keys) <= 1:
            return [self.get(k) for k in keys]
        if getattr(self.fs, "async_impl", False):
            paths = [self.full_path(k) for k in keys]
            found = self.fs.cat(paths, on_error="return")
            out: list[bytes | None] = []
            for p in paths:
                value = found.get(p)
                if isinstance(value, FileNotFoundError):
                    out.append(None)
                elif isinstance(value, BaseException):
                    raise value
                else:
                    out.append(value)
            return out
        return list(io_pool().map(self.get, keys))

    def exists(self, key: str) -> bool:
        return self.fs.exists(self.full_path(key))

    def list_dir(self, prefix: str) -> list[str]:
        """Names of the direct children of ``prefix`` (files and directories)."""
        path = self.full_path(prefix)
        try:
            entries = self.fs.ls(path, detail=False, refresh=True) if not self._local else os.listdir(path)
        except (FileNotFoundError, NotADirectoryError):
            return []
        names = [posixpath.basename(str(e).rstrip("/")) for e in entries]
        return sorted(n for n in names if n and not n.startswith(".tmp-"))

    def list_dirs(self, prefixes: Iterable[str]) -> list[list[str]]:
        """:meth:`list_dir` of many prefixes, in order; concurrent on remote stores."""
        prefixes = list(prefixes)
        if not self.is_remote or len(prefixes) <= 1:
            return [self.list_dir(p) for p in prefixes]
        return list(io_pool().map(self.list_dir, prefixes))

    def _memory_keys(self, path: str) -> list[str]:
        """Keys of a ``memory://`` store at or below ``path``.

        fsspec's own walks (find, rm) iterate the live dict, which fails ("dictionary
        changed size during iteration") while a task on another thread writes;
        ``list(dict)`` copies the keys atomically.
        """
        below = path.rstrip("/") + "/"
        return [k for k in list(self.fs.store) if k.startswith(below) or k == path]

    def list_files(self, prefix: str) -> list[str]:
        """Keys of every object below ``prefix``, relative to the store root."""
        path = self.full_path(prefix)
        if self._local:
            out = []
            for dirpath, _, files in os.walk(path):
                rel = os.path.relpath(dirpath, self.root).replace(os.sep, "/")
                out.extend(
                    f if rel == "." else f"{rel}/{f}" for f in files if not f.startswith(".tmp-")
                )
            return sorted(out)
        if self.protocol == "memory":
            found = self._memory_keys(path)
        else:
            try:
                self.fs.invalidate_cache(path)  # s3fs caches listings: a reconcile must see what tasks just wrote
                found = self.fs.find(path)
            except FileNotFoundError:
                return []
        root = self.root.rstrip("/") + "/"
        return sorted(p[len(root):] if p.startswith(root) else p for p in (str(x) for x in found))

    def object_sizes(self) -> dict[str, int]:
        """Every object key below the store root with its size in bytes (one listing)."""
        out: dict[str, int] = {}
        if self._local:
            if not os.path.isdir(self.root):
                return out
            prefix = os.path.join(self.root, "")
            stack = [self.root]
            while stack:
                directory = stack.pop()
                try:
                    entries = list(os.scandir(directory))
                except (FileNotFoundError, NotADirectoryError):
                    continue
                for entry in entries:
                    if entry.name.startswith(".tmp-"):
                        continue
                    if entry.is_dir(follow_symlinks=True):
                        stack.append(entry.path)
                    else:
                        rel = entry.path[len(prefix) :].replace(os.sep, "/")  # scandir paths extend root
                        out[rel] = entry.stat().st_size
            return out
        base = self.root.rstrip("/")
        try:
            found = self.fs.find(base, detail=True)
        except FileNotFoundError:
            return out
        strip = base + "/"
        for path, info in found.items():
            p = str(path)
            if self.protocol == "memory" and not p.startswith("/"):
                p = "/" + p
            if not p.startswith(strip):
                continue
            rel = p[len(strip) :]
            if rel and info.get("type", "file") != "directory":
                out[rel] = int(info.get("size") or 0)
        return out

    # -- writes ------------------------------------------------------------
    def put(self, key: str, data: bytes) -> None:
        """Write a whole object atomically (temp + rename locally)."""
        path = self.full_path(key)
        if self._local:
            directory = os.path.dirname(path)
            if directory not in self._made_dirs:
                os.makedirs(directory, exist_ok=True)
                self._made_dirs.add(directory)
            tmp = os.path.join(directory, f".tmp-{uuid.uuid4().hex}")
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileNotFoundError:  # the directory was removed since we made it
                os.makedirs(directory, exist_ok=True)
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.replace(tmp, path)
            return
        self.fs.pipe_file(path, data)

    def put_many(self, items: Mapping[str, bytes]) -> None:
        """Write many whole objects.

        Locally one after the other: measured here, creating files from several
        threads of one process is slower than sequentially (the file system
        serialises on the directories); remote stores take one concurrent batch.
        """
        if self._local or len(items) <= 1:
            for k, v in items.items():
                self.put(k, v)
            return
        if getattr(self.fs, "async_impl", False):
            self.fs.pipe({self.full_path(k): v for k, v in items.items()})
            return
        list(io_pool().map(lambda kv: self.put(*kv), items.items()))

    def delete(self, key: str) -> None:
        path = self.full_path(key)
        try:
            self.fs.rm_file(path)
        except FileNotFoundError:
            pass

    def delete_prefix(self, prefix: str) -> None:
        """Remove everything below ``prefix`` (the prefix itself included)."""
        path = self.full_path(prefix)
        self._made_dirs.clear()
        if self.protocol == "memory":  # fsspec's rm would walk the live dict, and rmdir what it derived from it
            for key in self._memory_keys(path):
                self.fs.store.pop(key, None)
            below = path.rstrip("/") + "/"
            self.fs.pseudo_dirs[:] = [d for d in list(self.fs.pseudo_dirs) if not (d == path or d.startswith(below))]
            return
        if self.fs.exists(path):
            self.fs.rm(path, recursive=True)

    # -- reachability ------------------------------------------------------
    def check_reachable(self) -> None:
        """Fail early, naming the bucket, when the store's location cannot be used."""
        if self.protocol != "s3":
            return
        bucket = self.bucket
        try:
            # not fs.exists(): s3fs swallows every error there, so an unreachable
            # endpoint would read as a missing bucket.  HEAD the bucket and tell them apart.
            self.fs.call_s3("head_bucket", Bucket=bucket)
            ok = True
        except FileNotFoundError:
            ok = False
        except PermissionError:  # may not HEAD it but may still use it: s3fs's own probes decide
            ok = self.fs.exists(bucket)
        except Exception as exc:  # network / credentials: say where we tried
            endpoint = (
                self.storage_options.get("endpoint_url")
                or getattr(self.fs, "endpoint_url", None)
                or os.environ.get("AWS_ENDPOINT_URL", "the default AWS endpoint")
            )
            raise StoreNotFoundError(
                f"cannot reach bucket {bucket!r} for store {self.url!r} at {endpoint}: {exc}"
            ) from exc
        if not ok:
            raise StoreNotFoundError(f"bucket {bucket!r} of store {self.url!r} does not exist")
