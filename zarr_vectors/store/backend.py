"""Whole-object key/value access to a store root: one contract, one class per backend.

Every write is a whole object: a local file is written to a temporary name and
renamed into place, an S3 PUT is atomic.  That is what makes a retried Dask task
(or a task re-run after a killed worker) leave exactly the same store, and why the
project does its own cell I/O instead of going through zarr-python's array API,
which read-modify-writes metadata on every write.

:class:`Storage` states the contract; ``Storage(url, storage_options)`` returns the
backend for the URL's protocol -- :class:`LocalStorage` (a directory, plain os calls),
:class:`~zarr_vectors.store.fsspec_backend.MemoryStorage` (``memory://``),
:class:`~zarr_vectors.store.fsspec_backend.FsspecStorage` (S3 through s3fs, any other fsspec
filesystem) or :class:`~zarr_vectors.store.obstore_backend.ObstoreStorage` (S3, the default)
-- so callers never branch on where the bytes live.
"""

from __future__ import annotations

import math
import os
import posixpath
import shutil
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import wraps
from typing import Any, NamedTuple, TypeVar

from zarr_vectors import config
from zarr_vectors.errors import (
    InputError,
    ResourceLimitError,
    StorageObjectError,
    StorageRequestError,
    ZarrVectorsError,
)
from zarr_vectors.format.paths import TEMP_PREFIX
from zarr_vectors.store.accounting import ContextExecutor, count_contract
from zarr_vectors.store.localfs import Listing, SafeRoot

T = TypeVar("T")
R = TypeVar("R")

_POOLS: dict[str, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _pool(name: str) -> ThreadPoolExecutor:
    with _POOLS_LOCK:
        pool = _POOLS.get(name)
        if pool is None:
            pool = _POOLS[name] = ContextExecutor(int(config.get("io.threads")), thread_name_prefix=name)
        return pool


def io_pool() -> ThreadPoolExecutor:
    """The process-wide pool for leaf object requests (sized by ``io.threads`` when first used).

    One shared pool: reads happen per array and per cell batch, and starting a pool
    per call was the dominant cost of reading stores with many small arrays.  Only
    submit work that never waits on this pool itself: nested waits can starve it.
    """
    return _pool("zv-io")


def map_batched(fn: Callable[[int], R], n: int) -> list[R]:
    """``[fn(0), ..., fn(n - 1)]`` on :func:`io_pool`, a few contiguous runs per thread.

    One pool task per item cost more than reading and decoding a small local cell (a
    graph's few thousand link cells); a few runs per thread keep every thread busy
    while an uneven run still finishes soon after the rest.
    """
    per = max(1, -(-n // (4 * int(config.get("io.threads")))))
    runs = io_pool().map(lambda start: [fn(i) for i in range(start, min(n, start + per))], range(0, n, per))
    return [item for run in runs for item in run]


def _range_bytes(requests: Sequence[tuple[str, int, int | None]]) -> int | float:
    """How many bytes ranges (:class:`RangeRequest`) ask for at most; infinite when one reads to
    an end it does not know."""
    total = 0
    for _, start, end in requests:
        if end is None and start >= 0:
            return math.inf
        total += -start if end is None else max(0, end - start)
    return total


def _overlap_pool() -> ThreadPoolExecutor:
    """A pool for :meth:`Storage.overlap`, apart from :func:`io_pool`: its calls read
    through the I/O pool themselves, and nesting them in it could starve it."""
    return _pool("zv-overlap")


REASON_CHARS = 1000
"""The most of a failed request's own message a :class:`StorageRequestError` repeats."""


def typed_request_failures(
    failures: Callable[[], tuple[type[BaseException], ...]],
    *,
    answers: tuple[type[BaseException], ...] = (),
    reason: Callable[[str], str] = str,
) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """A backend's request method whose failures on a remote store -- ``failures()``, raised
    after the client's own retries -- come out as one :class:`StorageRequestError` naming the
    store, the exception and ``reason(message)`` (one line, at most :data:`REASON_CHARS`
    characters of it: a server's error text is not ours to print whole; the original stays
    chained as the cause).

    ``answers`` pass as they are: on reads a missing object (``FileNotFoundError``) is an
    answer the method gives itself.  This package's own errors (a refused key) pass too, and
    so does everything on a store that is not remote (``memory://``: an error there is about
    the keys, not a request).
    """

    def wrap(method: Callable[..., T]) -> Callable[..., T]:
        @wraps(method)
        def call(self: Storage, *args: Any, **kwargs: Any) -> T:
            try:
                return method(self, *args, **kwargs)
            except Exception as exc:
                passes = isinstance(exc, (ZarrVectorsError, *answers)) or not isinstance(exc, failures())
                if passes or not self.is_remote:
                    raise
                raise request_failure(self.url, exc, reason(str(exc))) from exc

        return call

    return wrap


#: a GET's body is read in steps of this many bytes (the most it may run past its bound)
BODY_STEP = 4 << 20


async def gather_bounded(calls: Sequence[Callable[[], Awaitable[T]]], *, limit: int | None = None) -> list[T]:
    """Run the calls concurrently, at most ``limit`` (default ``s3.concurrency``) in flight, results
    in order.  The first failure cancels the calls still running or waiting, and they have ended
    when it is raised: a batch that failed does not go on changing the store, or asking a failing
    server, behind its error (requests already sent, at most ``limit`` -- handed to obstore's Rust
    runtime, or on s3fs's socket before the cancel -- may still reach the server)."""
    import asyncio  # here: a local store never pays its import

    slots = asyncio.Semaphore(max(1, int(config.get("s3.concurrency")) if limit is None else limit))

    async def one(call: Callable[[], Awaitable[T]]) -> T:
        async with slots:
            return await call()

    tasks = [asyncio.ensure_future(one(c)) for c in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def request_failure(url: str, exc: BaseException, reason: str, where: str | None = None) -> StorageRequestError:
    """The error of a request to store ``url`` that failed after the client's retries: the store, the
    object where one is known, the exception's type and at most :data:`REASON_CHARS` of ``reason``,
    on one line."""
    text = " ".join(reason.split())
    text = text if len(text) <= REASON_CHARS else text[:REASON_CHARS] + "…"
    at = f"{where}: " if where else ""
    return StorageRequestError(f"store {url!r}: {at}{type(exc).__name__}: {text}")


def answered_no_such_bucket(exc: BaseException) -> bool:
    """Whether a "not found" answer is S3's ``NoSuchBucket`` -- the store's bucket is gone, a
    failed request -- rather than a missing object, the read's own answer.  obstore carries
    S3's error document in its message; s3fs chains botocore's error.  (A HEAD's answer has
    no document: there the two cannot be told apart.)"""
    response = getattr(exc.__cause__, "response", None)
    code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
    return code == "NoSuchBucket" or "<Code>NoSuchBucket</Code>" in str(exc)


class RangeRequest(NamedTuple):
    """Bytes ``[start, end)`` of the object at ``key``, fsspec style: a negative
    ``start`` counts from the end, ``end`` None reads to the end.  Plain
    ``(key, start, end)`` tuples are accepted wherever one is."""

    key: str
    start: int
    end: int | None = None


#: fsspec's two names of the local file system: paths under them are this machine's (relative
#: ones against its working directory), never a remote object store's
LOCAL_PROTOCOLS = ("file", "local")


def local_path(url: str) -> str | None:
    """The absolute path on this machine that a plain path or a ``file://`` / ``local://`` URL
    names (relative ones against the working directory, ``~`` the home folder); None for any
    other URL: an object store's or ``memory://``."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return os.path.abspath(os.path.expanduser(url))
    return os.path.abspath(os.path.expanduser(rest)) if scheme.lower() in LOCAL_PROTOCOLS else None


def _split_url(url: str | os.PathLike[str]) -> tuple[str, str]:
    """Return ``(protocol, root path)`` for a local path or an fsspec URL."""
    text = os.fspath(url) if isinstance(url, (str, os.PathLike)) else None
    if not isinstance(text, str):
        raise InputError(f"a store URL is a string or a path, found {type(url).__name__}: {url!r}")
    if not text:
        raise InputError("store URL is empty")
    local = local_path(text)  # '~' is the home folder, as fsspec and a shell read it ('./~' is not)
    if local is not None:
        return "file", local
    protocol, rest = text.split("://", 1)
    protocol = protocol.lower()
    if protocol in ("s3", "s3a"):
        rest = rest.strip("/")
        if not rest:
            raise InputError(f"store URL {text!r} names no bucket")
        return "s3", rest
    if protocol == "memory":
        return "memory", "/" + rest.strip("/")
    return protocol, rest.rstrip("/")


class Storage(ABC):
    """A store root: whole objects under string keys relative to ``root``.

    ``Storage(url, storage_options)`` picks the backend from the URL's protocol.
    Picklable by URL and storage options, so the same object can be shipped to
    Dask workers, which rebuild their own backend (and filesystem instance).
    """

    is_remote: bool = False
    """Whether requests are network round trips worth overlapping on threads."""

    list_page_size: int | None = None
    """Entries per listing request, where listings come in pages (request accounting)."""

    delete_batch: int | None = None
    """Keys per bulk-delete request, where the backend has one (request accounting)."""

    reachability_probe: str = "HEAD"
    """The one request a remote backend's :meth:`probe` makes (request accounting)."""

    _probed = False  # set on a remote storage object once its probe passed (check_reachable)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        count_contract(cls)  # every backend's requests counted by one rule: store/accounting.py

    def __new__(cls, url: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None) -> Storage:
        if cls is Storage:
            cls = _backend_class(_split_url(url)[0])
        return super().__new__(cls)

    def __init__(self, url: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None) -> None:
        self.url = os.fspath(url)
        self.storage_options = dict(storage_options or {})
        self.protocol, self.root = _split_url(self.url)

    def __reduce__(self) -> tuple[Any, ...]:
        """Rebuilt from the resolved location: a relative path means the client's working
        directory, never a worker's (they may run anywhere)."""
        return (type(self), (self.root if self.protocol == "file" else self.url, self.storage_options))

    def __repr__(self) -> str:
        return f"Storage({self.url!r})"  # what builds an equal object, whatever the backend

    # -- paths and scheduling ------------------------------------------------
    def full_path(self, key: str) -> str:
        return posixpath.join(self.root, key) if key else self.root

    @property
    def bucket(self) -> str | None:
        """The bucket of an object-store URL; None elsewhere."""
        return None

    def overlap(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """``[fn(x) for x in items]``, overlapped when each call is a few remote round trips.

        The one place callers choose between one-after-the-other (see :attr:`is_remote`)
        and concurrent calls; ``fn`` may itself read concurrently.
        """
        todo = list(items)
        if not self.is_remote or len(todo) < 2:
            return [fn(x) for x in todo]
        return list(_overlap_pool().map(fn, todo))

    def refused_options(self, exc: Exception) -> InputError:
        """The error for storage options a backend's client refused as it was built: bad input
        naming the store, whichever backend refused them."""
        return InputError(f"storage options of store {self.url!r}: {type(exc).__name__}: {exc}")

    def absent(self, exc: BaseException) -> None:
        """A read's "not found" as its answer (None), unless the bucket itself is gone: that
        read reports a failed request, not an object the store lacks."""
        if answered_no_such_bucket(exc):
            raise StorageRequestError(f"store {self.url!r}: {type(exc).__name__}: the bucket {self.bucket!r} "
                                      "does not exist (any more) [NoSuchBucket]") from exc

    async def read_body(self, parts: AsyncIterable[Any], where: str, declared: int | None,
                        most: int | None = None) -> bytes:
        """An answer's body from its ``parts``, exactly as long as the answer ``declared`` and never
        longer than ``zarr_vectors.limits.max-decoded-bytes``: a server (or a swapped object)
        answering a 3 kB cell with gigabytes must not fill memory.  The declared length is checked
        before any part is read, and the parts are counted as they come, since S3 clients read
        whatever a server sends.  ``declared`` None: a chunked answer, bound by the ceiling alone,
        or by ``most`` (what the range asked for) when that is less."""
        ceiling = int(config.get("limits.max-decoded-bytes"))

        def too_large(size: int) -> ResourceLimitError:
            return ResourceLimitError(
                f"{where}: the server answers {size} bytes, more than zarr_vectors.limits.max-decoded-bytes ({ceiling})"
            )

        if declared is not None and declared > ceiling:
            raise too_large(declared)
        bound = ceiling if declared is None else declared
        if declared is None and most is not None and most < ceiling:
            bound = most
        got, chunks = 0, []
        async for part in parts:
            got += len(part)
            if got > bound:
                if declared is None and bound == most:
                    raise StorageRequestError(f"store {self.url!r}: {where}: the server sends more than the "
                                              f"{most} bytes the range asks for")
                if declared is None:
                    raise too_large(got)
                raise StorageRequestError(f"store {self.url!r}: {where}: the server sends more than the "
                                          f"{declared} bytes its answer declares")
            chunks.append(part)
        if declared is not None and got < declared:
            raise StorageRequestError(f"store {self.url!r}: {where}: the server sends {got} of the {declared} "
                                      "bytes its answer declares")
        return bytes(chunks[0]) if len(chunks) == 1 else b"".join(chunks)

    def check_reachable(self) -> None:
        """Fail early, naming the location, when the store cannot be used.

        A remote backend's :meth:`probe` runs once per storage object: a writer checks before
        it plans and again as it creates the store, and on an object store the second probe
        was one more blocking round trip that could tell nothing new (the requests after it
        raise their own typed errors).  Elsewhere it costs no request and runs every time:
        ``memory://``'s answer depends on the scheduler in use at the moment.
        """
        if not self._probed:
            self.probe()
            self._probed = self.is_remote

    def probe(self) -> None:
        """The backend's check behind :meth:`check_reachable` (no-op where always usable)."""

    # -- reads -----------------------------------------------------------------
    @abstractmethod
    def get(self, key: str) -> bytes | None:
        """The object's bytes, or None when it does not exist."""

    def get_many(self, keys: Iterable[str]) -> list[bytes | None]:
        """Concurrent :meth:`get` of many keys, in order."""
        keys = list(keys)
        if len(keys) <= 1:
            return [self.get(k) for k in keys]
        return map_batched(lambda i: self.get(keys[i]), len(keys))

    def get_decoded(self, keys: Sequence[str], decode: Callable[[int, bytes | None], T]) -> list[T]:
        """``[decode(i, get(keys[i])) ...]`` fetched concurrently.

        Here each object is decoded on the I/O thread that read it, so decoding
        overlaps reading; ``decode`` must not wait on :func:`io_pool`.
        """
        if len(keys) <= 1:
            return [decode(i, raw) for i, raw in enumerate(self.get_many(keys))]
        return map_batched(lambda i: decode(i, self.get(keys[i])), len(keys))

    @abstractmethod
    def get_ranges(self, requests: Sequence[tuple[str, int, int | None]]) -> list[bytes | None]:
        """Byte ranges (:class:`RangeRequest`) of objects, in order; None where an object does not exist."""

    @abstractmethod
    def exists(self, key: str) -> bool: ...

    @abstractmethod
    def list_dir(self, prefix: str) -> list[str]:
        """Names of the direct children of ``prefix`` (files and directories)."""

    def list_dirs(self, prefixes: Iterable[str]) -> list[list[str]]:
        """:meth:`list_dir` of many prefixes, in order; concurrent on remote stores."""
        prefixes = list(prefixes)
        if not self.is_remote or len(prefixes) <= 1:
            return [self.list_dir(p) for p in prefixes]
        return list(io_pool().map(self.list_dir, prefixes))

    @abstractmethod
    def file_sizes(self, prefix: str) -> dict[str, int]:
        """Every object below ``prefix`` with its size in bytes (one listing), keyed relative to
        the store root; not the folder markers (``x/``) an object store may hold, which no key of
        a store is."""

    def list_files(self, prefix: str) -> list[str]:
        """Keys of every object below ``prefix``, relative to the store root, sorted."""
        return sorted(self.file_sizes(prefix))

    @abstractmethod
    def object_sizes(self) -> dict[str, int]:
        """Every object key below the store root with its size in bytes (one listing)."""

    def scan(self) -> Listing:
        """One walk of the whole store: :meth:`object_sizes`, plus which keys are not regular
        files (links, FIFOs, devices: listed, never followed) and the directories, where the
        backend has them.  What the validator's level 1 starts from."""
        return Listing(self.object_sizes(), {}, [])

    # -- writes ----------------------------------------------------------------
    @abstractmethod
    def put(self, key: str, data: bytes) -> None:
        """Write a whole object atomically."""

    def put_many(self, items: Mapping[str, bytes]) -> None:
        """Write many whole objects, concurrently."""
        if len(items) <= 1:
            for k, v in items.items():
                self.put(k, v)
            return
        list(io_pool().map(lambda kv: self.put(*kv), items.items()))

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove an object; a missing one is not an error."""

    @abstractmethod
    def delete_many(self, keys: Sequence[str]) -> None:
        """Remove many objects."""

    @abstractmethod
    def delete_prefix(self, prefix: str) -> None:
        """Remove everything below ``prefix``, and the object at ``prefix`` itself when it is a
        node inside the store.  At the root (``""``) an object store keeps the object named like
        the store (``s3://b/a`` beside ``s3://b/a/``: a neighbour's); on a local disk a file at
        the store's path is at the store's own place, and goes."""

    @abstractmethod
    def move_many(self, pairs: Sequence[tuple[str, str]], *, sources_present: bool = False) -> None:
        """Move objects ``(source, destination)``, replacing destinations.  Sources already
        moved are skipped, so an interrupted move can be replayed.  ``sources_present``: the
        caller has just listed every source, so an object store need not look again."""

    def remove_empty_dirs(self, prefixes: Iterable[str], *, floor: str) -> None:
        """Remove directories that deletions left empty, walking up from each prefix
        while below ``floor``; nothing to do where directories are not objects."""


def existing_sources(storage: Storage, pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The pairs whose source exists, from one listing of their common prefix (one request where
    a HEAD per object would be as many, in the same round)."""
    prefix = posixpath.commonpath([posixpath.dirname(s) for s, _ in pairs])
    if not prefix:  # sources at the store's top: listing it would list the whole store
        return [(s, d) for s, d in pairs if storage.exists(s)]
    listed = set(storage.list_files(prefix))
    return [(s, d) for s, d in pairs if s in listed]


class LocalStorage(Storage):
    """A directory on a local file system: plain os calls, temp file + rename per write.

    Every path goes through a :class:`~zarr_vectors.store.localfs.SafeRoot`: only regular
    files inside the root are opened, links are never followed (listed, and refused when
    read), and no write goes through a linked directory.  Requests run one after the other
    where measured faster (listings, writes): the file system serialises on directories.
    """

    is_remote = False

    def __init__(self, url: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None) -> None:
        super().__init__(url, storage_options)
        self._fs = SafeRoot(self.root)

    def full_path(self, key: str) -> str:
        return self._fs.path(key)

    def probe(self) -> None:
        """Nothing can be made below a regular file: a store path like ``data.csv/out.zv`` is
        said now, not as ``NotADirectoryError`` from the first write.  (The path itself may be a
        file: a job's journal is one object at its own path.)"""
        path = os.path.dirname(self.root)
        while not os.path.lexists(path) and os.path.dirname(path) != path:
            path = os.path.dirname(path)
        if os.path.lexists(path) and not os.path.isdir(path):
            raise InputError(f"store path {self.url!r} is below {path!r}, which is not a directory")

    def get(self, key: str) -> bytes | None:
        return self._fs.read(key)

    def get_ranges(self, requests: Sequence[tuple[str, int, int | None]]) -> list[bytes | None]:
        """Small ranges one after the other (``io.sequential-read-bytes``): a read of a few bytes costs
        less than handing it to a thread (a validation's 1,192 shard indexes: 15--30 ms so, 85--115 ms
        one pool task each)."""
        if _range_bytes(requests) < int(config.get("io.sequential-read-bytes")):
            return [self._fs.read(*r) for r in requests]
        return map_batched(lambda i: self._fs.read(*requests[i]), len(requests))

    def exists(self, key: str) -> bool:
        """Whether anything (a link or FIFO too: see :meth:`scan`) is at ``key``; never through a link."""
        if not key:
            return self._fs.directory("", key="")
        return self._fs.parent(key) and os.path.lexists(self._fs.path(key))

    def list_dir(self, prefix: str) -> list[str]:
        return sorted(n for n in self._fs.list_dir(prefix) if n and not n.startswith(TEMP_PREFIX))

    def file_sizes(self, prefix: str) -> dict[str, int]:
        return self._fs.walk(prefix).sizes

    def object_sizes(self) -> dict[str, int]:
        return self._fs.walk().sizes

    def scan(self) -> Listing:
        return self._fs.walk()

    def put(self, key: str, data: bytes) -> None:
        fd, tmp = self._fs.create_temp(key, f"{TEMP_PREFIX}{uuid.uuid4().hex}")
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        try:
            os.replace(tmp, self._fs.path(key))  # replaces a link at ``key`` itself, never what it names
        except IsADirectoryError as exc:
            os.remove(tmp)
            raise StorageObjectError("a directory where a file belongs: not replaced", key=key) from exc

    def put_many(self, items: Mapping[str, bytes]) -> None:
        """One after the other: measured here, creating files from several threads of
        one process is slower than sequentially (the file system serialises on the directories)."""
        for k, v in items.items():
            self.put(k, v)

    def delete(self, key: str) -> None:
        if not self._fs.parent(key):
            return
        try:
            os.remove(self._fs.path(key))
        except FileNotFoundError:
            pass

    def delete_many(self, keys: Sequence[str]) -> None:
        for k in keys:
            self.delete(k)

    def delete_prefix(self, prefix: str) -> None:
        """rmtree of a real directory (which removes links inside it, never what they name); a link
        or file at ``prefix`` is removed itself."""
        if prefix and not self._fs.parent(prefix):
            return
        path = self._fs.path(prefix)
        self._fs.forget(prefix or None)
        if not os.path.lexists(path):
            return
        if os.path.isdir(path) and not os.path.islink(path):
            if os.path.abspath(path) == os.getcwd():
                raise InputError(f"refusing to delete the current working directory {path!r}")
            shutil.rmtree(path)
        else:
            os.remove(path)

    def move_many(self, pairs: Sequence[tuple[str, str]], *, sources_present: bool = False) -> None:
        """Renames (``os.replace``), creating destination directories as needed; neither side
        goes through a linked directory."""
        for src, dst in pairs:
            self._fs.parent(dst, create=True)
            target = self._fs.path(dst)
            if not self._fs.parent(src):
                if not os.path.lexists(target):
                    raise FileNotFoundError(f"{src}: nothing to move to {dst}")
                continue
            try:
                os.replace(self._fs.path(src), target)
            except FileNotFoundError:
                if not os.path.lexists(target):
                    raise

    def remove_empty_dirs(self, prefixes: Iterable[str], *, floor: str) -> None:
        def depth(key: str) -> int:
            return key.count("/") + 1 if key else 0

        for d in sorted(set(prefixes), key=depth, reverse=True):
            while depth(d) > depth(floor):
                try:
                    if not self._fs.parent(d):
                        break
                    os.rmdir(self._fs.path(d))  # a link is not a directory: ENOTDIR, left alone
                except OSError:  # not empty (or gone, or not ours to walk)
                    break
                self._fs.forget(d)
                d = posixpath.dirname(d)


def _backend_class(protocol: str) -> type[Storage]:
    """The class serving ``protocol``; S3's is ``zarr_vectors.s3.backend`` (obstore or s3fs)."""
    if protocol == "file":
        return LocalStorage
    if protocol == "s3":
        name = config.get("s3.backend")
        if name == "obstore":
            from zarr_vectors.store.obstore_backend import ObstoreStorage  # a sibling that imports this module

            return ObstoreStorage
        if name != "s3fs":
            raise InputError(f"zarr_vectors.s3.backend must be 'obstore' or 's3fs', not {name!r}")
    from zarr_vectors.store.fsspec_backend import FsspecStorage, MemoryStorage  # siblings that import this module

    return MemoryStorage if protocol == "memory" else FsspecStorage
