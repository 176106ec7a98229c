"""fsspec filesystems: S3 through s3fs (``zarr_vectors.s3.backend: s3fs``), ``memory://`` and any
other filesystem fsspec knows, behind the :class:`~zarr_vectors.store.backend.Storage` contract."""

from __future__ import annotations

import os
import posixpath
import re
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

from zarr_vectors import config
from zarr_vectors.errors import InputError, StorageRequestError, StoreNotFoundError, ZarrVectorsError
from zarr_vectors.format.paths import TEMP_PREFIX
from zarr_vectors.store.backend import (
    BODY_STEP,
    Storage,
    answered_no_such_bucket,
    existing_sources,
    gather_bounded,
    request_failure,
    typed_request_failures,
)
from zarr_vectors.store.localfs import check_key

T = TypeVar("T")


def _fsspec_failures() -> tuple[type[BaseException], ...]:
    """What a failed request of an fsspec filesystem raises: an ``OSError`` (s3fs turns S3's
    error answers into one) or, as s3fs lets them through, botocore's and aiohttp's transport
    errors -- looked up once the filesystem has imported them, never imported here."""
    found: list[type[BaseException]] = [OSError]
    botocore = sys.modules.get("botocore.exceptions")
    if botocore is not None:
        found.append(botocore.BotoCoreError)
    aiohttp = sys.modules.get("aiohttp")
    if aiohttp is not None:
        found.append(aiohttp.ClientError)
    return tuple(found)


#: a read's failures; a missing object is the method's own answer (None, False, []): each read
#: method catches it itself, ``answers`` keeps one that slips through from reading as an outage
_fsspec_read = typed_request_failures(_fsspec_failures, answers=(FileNotFoundError,))
#: a write's: nothing need exist, so a FileNotFoundError there is the bucket gone
_fsspec_write = typed_request_failures(_fsspec_failures)


#: a listing's: on S3 our own page loop (``_s3_listing``), which types a broken page itself
_fsspec_listing = typed_request_failures(_fsspec_failures, answers=(FileNotFoundError,))
_fsspec_listing_delete = typed_request_failures(_fsspec_failures)


#: pages in a row that name nothing new yet say more follows (empty ones: S3 may send a few)
#: after which a listing ends
MAX_STALE_PAGES = 100

#: what a DeleteObjects answer may list a key as not deleted for that asking again can mend
PASSING_DELETE_ERRORS = frozenset({"SlowDown", "InternalError", "ServiceUnavailable"})

#: s3fs's tries of a request (each of botocore's 2 attempts); a whole-object read nests them,
#: so an unanswered GET fails after 2 x 2 x 2 attempts of ``s3.request-timeout`` (4 minutes)
S3FS_TRIES = 2


def _answers_range(content_range: Any, start: int, length: int | None, most: int | None) -> bool:
    """Whether a ranged GET's answer of ``length`` bytes is the range asked for (``start``, and at
    most ``most`` bytes; None: to the end).  A ``Content-Range`` must name exactly the bytes the
    range covers of the object's total.  Without one the answer is the whole object, right only
    where the range covers it all: a range from 0, or a suffix at least as long (S3 answers a
    suffix of an empty object so).  A server that ignores the Range header answers the whole
    object whatever was asked."""
    found = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+|\*)", str(content_range or ""))
    if found is None:  # a suffix always has a ``most``
        return content_range is None and start <= 0 and (most is None or (length is not None and length <= most))
    first, final = int(found[1]), int(found[2])
    size = final - first + 1
    if (length is not None and length != size) or (most is not None and size > most):
        return False
    if found[3] == "*":  # the total not given: the start at least
        return start < 0 or first == start
    total = int(found[3])
    if start < 0:  # a suffix: the last min(-start, total) bytes
        return final == total - 1 and size == min(-start, total)
    return first == start and final == (total if most is None else min(total, start + most)) - 1


class FsspecStorage(Storage):
    """Any fsspec filesystem; S3 through s3fs, tuned for many small whole objects."""

    is_remote = True
    list_page_size = 1000  # S3's ListObjectsV2 page
    delete_batch = 1000  # S3's DeleteObjects batch

    def __init__(self, url: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None) -> None:
        super().__init__(url, storage_options)
        fs_options = dict(self.storage_options)
        if self.protocol == "s3":
            # listings must show what other tasks just wrote (reconcile, exists checks)
            fs_options.setdefault("use_listings_cache", False)
            # With max_concurrency > 1 (its default), s3fs (2026.2+) HEADs every object
            # before a whole-object GET, to split large ones into ranged parts.  Ours are cells and
            # documents read many at a time: the HEAD doubled the requests (zv.read of a
            # 200k-vertex graph on a loopback S3 server: 59.5 s -> 33.8 s without it).
            fs_options.setdefault("max_concurrency", 1)
            # a bound on a request that is never answered: botocore retries inside s3fs's tries,
            # which a whole-object read nests in its own.  A user's config_kwargs win, key by key
            # (their "retries" replaces these).  botocore's read timeout is per socket read: a
            # server that trickles its answer is not bounded here, as it is with obstore
            user = fs_options.get("config_kwargs") or {}
            if not isinstance(user, Mapping):
                raise InputError(f"storage option 'config_kwargs' must be a mapping, not {user!r}")
            fs_options["config_kwargs"] = {
                "connect_timeout": 5, "read_timeout": float(config.get("s3.request-timeout")),
                "retries": {"total_max_attempts": 2}, **user,
            }  # fmt: skip
        import fsspec  # here, not at the top: a local store's script never pays its import (~30 ms)

        try:
            self.fs = fsspec.filesystem(self.protocol, **fs_options)
        except ImportError as exc:  # gs://, az://... without their package
            raise InputError(
                f"store {self.url!r}: {self.protocol}:// needs a package that is not installed: {exc}"
            ) from exc
        except (TypeError, ValueError) as exc:  # an option the filesystem does not take
            raise self.refused_options(exc) from exc
        if self.protocol == "s3":
            self.fs.retries = S3FS_TRIES  # (s3fs takes no such argument; 5 by default, nested: 25)
        self._async = bool(getattr(self.fs, "async_impl", False))  # batch calls go out concurrently

    @property
    def bucket(self) -> str | None:
        return self.root.split("/", 1)[0] if self.protocol == "s3" else None

    def full_path(self, key: str) -> str:
        """The path of ``key``, refusing keys that could name something outside the root (``..``)."""
        if key:
            check_key(key)
        return super().full_path(key)

    @_fsspec_read
    def get(self, key: str) -> bytes | None:
        try:
            if self.protocol == "s3":
                return self._sync(self._get_s3(self.full_path(key)))
            return self.fs.cat_file(self.full_path(key))
        except FileNotFoundError as exc:
            self.absent(exc)
            return None

    @_fsspec_read
    def get_many(self, keys: Iterable[str]) -> list[bytes | None]:
        keys = list(keys)
        if not self._async or len(keys) <= 1:
            return super().get_many(keys)
        paths = [self.full_path(k) for k in keys]
        if self.protocol == "s3":
            return self._sync(gather_bounded([partial(self._get_s3_or_none, p) for p in paths]))
        found = self.fs.cat(paths, on_error="return")
        return [self._found_or_none(found.get(p)) for p in paths]

    def _sync(self, coro: Any) -> Any:
        from fsspec.asyn import sync

        return sync(self.fs.loop, lambda: coro)

    async def _get_s3_or_none(self, path: str, start: int | None = None, end: int | None = None) -> bytes | None:
        """:meth:`_get_s3`, None for a missing object: inside the batch, so any other failure
        is the batch's first and stops it (:func:`gather_bounded`), where a batch that
        gathered every answer first sent and retried all of its GETs into a failing server."""
        try:
            return await self._get_s3(path, start, end)
        except FileNotFoundError as exc:
            self.absent(exc)
            return None

    async def _get_s3(self, path: str, start: int | None = None, end: int | None = None) -> bytes:
        """One whole object, or the range ``start:end`` of it (:class:`RangeRequest`), through s3fs's
        client and retries, its body never read past the decode ceiling nor past the range asked:
        s3fs's own ``cat`` and ``cat_ranges`` read whatever length a server sends, and a server
        that ignores the Range header sends the whole object."""
        from s3fs.core import _error_wrapper

        bucket, key, _ = self.fs.split_path(path)
        where = f"s3://{path}"
        asked: dict[str, str] = {}
        most = None  # the most bytes the range asked for can be
        if start is not None:
            if end is not None and (start < 0 or end < 0):
                raise InputError(f"{where}: a range from the end ({start}, {end}) must read to the end")
            if end is not None and end <= start:  # an empty range: S3 has no way to ask for one (a HEAD
                await self.fs._call_s3("head_object", Bucket=bucket, Key=key)  # raises for no object)
                return b""
            asked["Range"] = f"bytes={start}" if start < 0 else f"bytes={start}-{'' if end is None else end - 1}"
            most = -start if start < 0 else None if end is None else end - start

        async def get_and_read() -> bytes:
            answer = await self.fs._call_s3("get_object", Bucket=bucket, Key=key, **asked)
            body = answer["Body"]
            declared = answer.get("ContentLength")  # None: a chunked answer
            length = None if declared is None else int(declared)
            try:
                if asked and not _answers_range(answer.get("ContentRange"), start, length, most):
                    raise StorageRequestError(
                        f"store {self.url!r}: {where}: asked for {asked['Range']}, the server answers {length} bytes "
                        f"with range {answer.get('ContentRange')!r}: it ignores the range"
                    )
                return await self.read_body(body.iter_chunks(BODY_STEP), where, length, most=most)
            finally:
                body.close()

        try:
            return await _error_wrapper(get_and_read, retries=self.fs.retries)
        except (FileNotFoundError, ZarrVectorsError):  # a missing object is the read's answer (see absent())
            raise
        except _fsspec_failures() as exc:  # s3fs names no object in some failures (a 503): name it here
            raise request_failure(self.url, exc, str(exc), where) from exc

    def get_decoded(self, keys: Sequence[str], decode: Callable[[int, bytes | None], T]) -> list[T]:
        """One concurrent batch of reads, then the decoding, when the filesystem is async."""
        if not self._async:
            return super().get_decoded(keys, decode)
        return [decode(i, raw) for i, raw in enumerate(self.get_many(keys))]

    @_fsspec_read
    def get_ranges(self, requests: Sequence[tuple[str, int, int | None]]) -> list[bytes | None]:
        if not requests:
            return []
        paths = [self.full_path(k) for k, _, _ in requests]
        if self.protocol == "s3":
            calls = [partial(self._get_s3_or_none, p, s, e) for p, (_, s, e) in zip(paths, requests)]
            return self._sync(gather_bounded(calls))
        found = self.fs.cat_ranges(paths, [s for _, s, _ in requests], [e for _, _, e in requests], on_error="return")
        out = [self._found_or_none(value) for value in found]
        return [None if v is None else bytes(v) for v in out]

    def _found_or_none(self, value: Any) -> Any:
        """A batch call's result for one path: None when missing, raised when another error."""
        if isinstance(value, FileNotFoundError):
            self.absent(value)
            return None
        if isinstance(value, BaseException):
            raise value
        return value

    @_fsspec_read
    def exists(self, key: str) -> bool:
        """Whether an object is at ``key``.  On S3 one HEAD: s3fs's ``exists`` follows a missing
        object with a listing (is it a directory?), a second blocking round trip for every
        absent node a writer probes, and keys here always name objects."""
        path = self.full_path(key)
        if self.protocol != "s3" or not key:
            return self.fs.exists(path)
        bucket, name, _ = self.fs.split_path(path)
        try:
            self.fs.call_s3("head_object", Bucket=bucket, Key=name)
        except FileNotFoundError:
            return False
        return True

    @_fsspec_listing
    def list_dir(self, prefix: str) -> list[str]:
        path = self.full_path(prefix)
        if self.protocol == "s3":
            dirs, files = self._sync(self._s3_listing(path, delimited=True))
            entries = dirs + list(files)
        else:
            try:
                entries = self.fs.ls(path, detail=False, refresh=True)
            except (FileNotFoundError, NotADirectoryError):
                return []
        names = [posixpath.basename(str(e).rstrip("/")) for e in self._below(path, entries)]
        return sorted(n for n in names if n and not n.startswith(TEMP_PREFIX))

    @_fsspec_listing
    def file_sizes(self, prefix: str) -> dict[str, int]:
        path = self.full_path(prefix)
        return self._sized(path, self._sizes_below(path, fresh=True))

    def _sizes_below(self, path: str, *, fresh: bool = False) -> dict[str, int]:
        """Every object below ``path`` with its size, keyed as the listing names it (folder markers
        included); empty where nothing is.  ``fresh``: fsspec's cached listing is dropped first (it
        would miss what tasks just wrote)."""
        if self.protocol == "s3":
            return self._sync(self._s3_listing(path))[1]
        try:
            if fresh:
                self.fs.invalidate_cache(path)
            found = self.fs.find(path, detail=True)
        except FileNotFoundError:
            return {}
        return {p: int(i.get("size") or 0) for p, i in found.items() if i.get("type", "file") != "directory"}

    def _sized(self, path: str, found: Mapping[str, int]) -> dict[str, int]:
        """``found`` (listed path: size) strictly below ``path``, keyed relative to the root.  Not a
        folder marker (``x/``): no key of a store ends in "/", and none can be read, moved or deleted
        by key (a commit taking one for a stale cell would fail half-way)."""
        sizes = {self._listed_path(str(p)): n for p, n in found.items()}
        below = [p for p in self._below(path, sizes) if not p.endswith("/")]
        root = self._listed_path(self.root).rstrip("/") + "/"
        return {p[len(root) :]: sizes[p] for p in below}

    async def _s3_listing(self, path: str, *, delimited: bool = False, itself: bool = False
                          ) -> tuple[list[str], dict[str, int]]:
        """ListObjectsV2 below ``path`` (with ``itself``, also the object at it), page by page, each
        page through s3fs's client and retries: (common prefixes, {object path: size}), folder
        markers (keys ending in ``/``) included, as s3fs's ``find`` lists them (strays to the validator).

        Our own page loop, not s3fs's, which follows whatever continuation token a server sends:
        a server repeating its pages would be listed forever, and an empty answer is an empty
        page to it.  A name is taken once (some servers repeat a common prefix at a page
        boundary); a page without ``IsTruncated``, a token handed out twice,
        ``MAX_STALE_PAGES`` pages in a row that name nothing new yet say more follows, a page
        that says more follows but not where, or an entry without its name end the listing
        with a StorageRequestError.
        Not S3's key order: directory buckets do not list in it.
        """
        bucket, key, _ = self.fs.split_path(path)
        below = key.rstrip("/") + ("" if itself or not key else "/")
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": below, **({"Delimiter": "/"} if delimited else {})}
        dirs: dict[str, None] = {}  # an ordered set
        files: dict[str, int] = {}
        tokens: set[str] = set()
        stale = 0  # pages in a row that named nothing new
        where = f"store {self.url!r}: the listing of {path!r}"
        while True:
            try:
                page = await self.fs._call_s3("list_objects_v2", **kwargs)
            except _fsspec_failures() as exc:  # NoSuchBucket (the bucket gone after the job's probe), a 503...
                raise request_failure(self.url, exc, str(exc), f"the listing of {path!r}") from exc
            except KeyError as exc:  # botocore decoding a page whose entry has no key
                raise StorageRequestError(f"{where} names an entry without its {exc}") from exc
            if "IsTruncated" not in page:  # S3 always says; botocore reads an empty body as an empty page
                raise StorageRequestError(f"{where} is answered by a page that says nothing of what follows "
                                          "(no IsTruncated): an empty or broken answer, not a listing")
            prefixes = [p.get("Prefix") for p in page.get("CommonPrefixes", [])]
            objects = [(o.get("Key"), o.get("Size")) for o in page.get("Contents", [])]
            if not all(isinstance(n, str) for n in prefixes + [k for k, _ in objects]):
                raise StorageRequestError(f"{where} names an entry without its key or prefix")
            named = len(dirs) + len(files)
            dirs.update(dict.fromkeys(f"{bucket}/{p}" for p in prefixes))
            files.update((f"{bucket}/{k}", int(size or 0)) for k, size in objects)
            stale = 0 if len(dirs) + len(files) > named else stale + 1
            if not page.get("IsTruncated"):
                return list(dirs), files
            token = page.get("NextContinuationToken")
            if not token:
                raise StorageRequestError(f"{where} says more follows but gives no continuation token")
            if token in tokens:
                raise StorageRequestError(f"{where} hands out continuation token {token!r} twice: the server "
                                          "repeats its pages")
            if stale >= MAX_STALE_PAGES:
                raise StorageRequestError(f"{where} sends {stale} pages in a row that name nothing new, each saying "
                                          "more follows: the server repeats its pages")
            tokens.add(token)
            kwargs["ContinuationToken"] = token

    def _below(self, path: str, listed: Iterable[Any], *, itself: bool = False) -> list[str]:
        """What a listing of ``path`` names strictly below it, and with ``itself`` the object
        at ``path`` and its folder marker.  Never what a broken or hostile server adds from
        outside the prefix: a delete must not reach it.  (The object at the store's root is a
        neighbour's: ``s3://b/a`` beside the store ``s3://b/a/``; at a node's path inside, the
        store's.  So is the root's folder marker ``a/``, a console's "create folder": the
        folder the store is written into, not an entry of it.)"""
        at = self._listed_path(path).rstrip("/")
        paths = (self._listed_path(str(x)) for x in listed)
        return [p for p in paths if (p.startswith(at + "/") and p != at + "/") or (itself and p in (at, at + "/"))]

    def _listed_path(self, path: str) -> str:
        """A path as a listing returns it, in the form :meth:`full_path` builds."""
        return path

    @_fsspec_listing
    def object_sizes(self) -> dict[str, int]:
        base = self.root.rstrip("/")
        sizes = self._sizes_below(base)
        strip = base + "/"
        out: dict[str, int] = {}
        for path, size in sizes.items():
            p = self._listed_path(str(path))
            if p.startswith(strip) and p != strip:
                out[p[len(strip) :]] = size
        return out

    @_fsspec_write
    def put(self, key: str, data: bytes) -> None:
        """A PUT is atomic on an object store."""
        if self.protocol == "s3":
            self._sync(self._put_s3(self.full_path(key), data))
        else:
            self.fs.pipe_file(self.full_path(key), data)

    @_fsspec_write
    def put_many(self, items: Mapping[str, bytes]) -> None:
        if self.protocol == "s3":
            self._sync(gather_bounded([partial(self._put_s3, self.full_path(k), v) for k, v in items.items()]))
        elif not self._async or len(items) <= 1:
            super().put_many(items)
        else:
            self.fs.pipe({self.full_path(k): v for k, v in items.items()})

    async def _put_s3(self, path: str, data: bytes) -> None:
        """One object through s3fs (its multipart upload for large ones)."""
        await self._naming(f"s3://{path}", self.fs._pipe_file(path, data))

    async def _copy_s3(self, source: str, target: str) -> None:
        """One server-side copy through s3fs (a HEAD of the source first: its managed copy for
        objects over 5 GB)."""
        await self._naming(f"s3://{source} -> s3://{target}", self.fs._cp_file(source, target))

    async def _naming(self, where: str, request: Awaitable[Any]) -> None:
        """A write request whose failure names ``where``: s3fs's name none (a 503 after its
        retries read "Please reduce your request rate").  A vanished bucket is raised as it is."""
        try:
            await request
        except FileNotFoundError as exc:
            if answered_no_such_bucket(exc):  # the store's bucket gone, not this object's fault
                raise
            raise request_failure(self.url, exc, str(exc), where) from exc  # an upload aborted, a source gone
        except _fsspec_failures() as exc:
            raise request_failure(self.url, exc, str(exc), where) from exc

    @_fsspec_write
    def delete(self, key: str) -> None:
        if self.protocol == "s3":  # S3's bulk delete: a missing key is no error, a vanished bucket is
            self.delete_many([key])
            return
        try:
            self.fs.rm_file(self.full_path(key))
        except FileNotFoundError:
            pass

    @_fsspec_write
    def delete_many(self, keys: Sequence[str]) -> None:
        if keys:
            self._rm([self.full_path(k) for k in keys])

    def _rm(self, paths: Sequence[str]) -> None:
        """Delete the objects at ``paths``: on S3 exactly those keys (:meth:`_delete_s3`)."""
        if self.protocol == "s3":
            self._sync(self._delete_s3(paths))
        else:
            self.fs.rm(list(paths))

    async def _delete_s3(self, paths: Sequence[str]) -> None:
        """DeleteObjects of exactly these keys, ``delete_batch`` a request, ``s3.delete-concurrency``
        requests at once (s3fs's ``rm`` kept 3), through s3fs's client and retries.  Not s3fs's
        ``rm``: it strips a folder marker's trailing ``/`` (it deleted ``x``, not the marker
        ``x/``), expands ``?``, ``*`` and ``[`` in keys as patterns (deleting ``q?y`` deleted
        ``qay``) and drops the keys a DeleteObjects answer lists as not deleted -- an overwrite
        then reported success over the old store's objects.  Here keys refused for a passing
        reason (``SlowDown``, ``InternalError``, ``ServiceUnavailable``) are asked again up to
        ``s3.delete-retries`` times (only keys of the request: an answer naming another, or
        none, fails the call); any other refusal, or one that stays, fails the call, naming
        how many and the first key with S3's reason."""
        import asyncio

        bucket = self.bucket
        keys = [p.split("/", 1)[1] for p in paths]
        retries = max(0, int(config.get("s3.delete-retries")))

        async def delete(batch: list[str]) -> None:
            asked_at_first = len(batch)
            for attempt in range(retries + 1):
                answer = await self.fs._call_s3(
                    "delete_objects", Bucket=bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True}
                )
                failed = answer.get("Errors") or []
                if not failed:
                    return
                asked = set(batch)
                strange = next((e for e in failed if e.get("Key") not in asked), None)
                if strange is not None:  # never asked again: a retry must not delete what no one asked for
                    raise StorageRequestError(
                        f"store {self.url!r}: a DeleteObjects answer lists as not deleted "
                        f"{strange.get('Key')!r}, which it was not asked to delete: the server is broken"
                    )
                if attempt < retries and all(e.get("Code") in PASSING_DELETE_ERRORS for e in failed):
                    batch = [e["Key"] for e in failed]
                    await asyncio.sleep(0.2 * 2**attempt)
                    continue
                first = failed[0]
                raise StorageRequestError(
                    f"store {self.url!r}: {len(failed)} of {asked_at_first} objects were not deleted; the first, "
                    f"s3://{bucket}/{first.get('Key')}: {first.get('Code')}: {first.get('Message')}"
                )

        step = self.delete_batch
        await gather_bounded([partial(delete, keys[i : i + step]) for i in range(0, len(keys), step)],
                             limit=int(config.get("s3.delete-concurrency")))

    @_fsspec_listing_delete
    def delete_prefix(self, prefix: str) -> None:
        """On S3, what one recursive listing finds at and below ``prefix``, in bulk deletes (not
        gated on :meth:`exists`, which HEADs an object: a prefix is none, and below the root it
        deleted nothing); a filesystem with directories removes the tree."""
        path = self.full_path(prefix)
        if self.protocol != "s3":
            if self.fs.exists(path):
                self.fs.rm(path, recursive=True)
            return
        listed = self._sync(self._s3_listing(path, itself=bool(prefix)))[1]
        found = self._below(path, listed, itself=bool(prefix))
        if found:
            self._rm(found)

    @_fsspec_write
    def move_many(self, pairs: Sequence[tuple[str, str]], *, sources_present: bool = False) -> None:
        """Copy (server side on S3) then delete: object stores have no rename."""
        if not pairs:
            return
        present = list(pairs) if sources_present else existing_sources(self, pairs)
        if not present:
            return
        if self.protocol == "s3":  # bounded, and stopped by its first failure (s3fs's copy sent every copy)
            copies = [partial(self._copy_s3, self.full_path(s), self.full_path(d)) for s, d in present]
            self._sync(gather_bounded(copies))
        else:
            self.fs.copy([self.full_path(s) for s, _ in present], [self.full_path(d) for _, d in present])
        self._rm([self.full_path(s) for s, _ in present])

    def probe(self) -> None:
        """For S3, HEAD the bucket, telling a missing bucket from an unreachable endpoint."""
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


class MemoryStorage(FsspecStorage):
    """``memory://``: fsspec's in-process dict, for tests and scratch stores.

    Not remote: a listing on one thread while another writes fails with "dictionary
    changed size during iteration", so listings and deletes work on one atomic
    snapshot of the keys (``list(dict)``) instead of fsspec's walks of the live dict.
    """

    is_remote = False
    list_page_size = delete_batch = None

    def probe(self) -> None:
        """Refuse the store when tasks would run in other processes: each has its own memory, so
        a write there would land in the workers and a read would find nothing (InputError)."""
        elsewhere = _tasks_run_elsewhere()
        if elsewhere:
            raise InputError(f"store {self.url!r}: memory:// lives in this process only, but {elsewhere}; "
                             "use a path or an object store, or run on threads (or an in-process "
                             "LocalCluster(processes=False))")

    def file_sizes(self, prefix: str) -> dict[str, int]:
        """From one atomic snapshot of the filesystem's dict."""
        return self._sized(self.full_path(prefix), {p: f.size for p, f in dict(self.fs.store).items()})

    def _listed_path(self, path: str) -> str:
        return path if path.startswith("/") else "/" + path

    def delete_many(self, keys: Sequence[str]) -> None:
        """Pops the keys: fsspec's rm raises for a missing one, which is no error here."""
        for key in keys:
            self.fs.store.pop(self.full_path(key), None)

    def delete_prefix(self, prefix: str) -> None:
        """Pops the snapshot's keys: fsspec's rm would walk the live dict, and rmdir what it derived from it."""
        path = self.full_path(prefix)
        for key in self._below(path, list(self.fs.store), itself=bool(prefix)):
            self.fs.store.pop(key, None)
        below = path.rstrip("/") + "/"
        self.fs.pseudo_dirs[:] = [d for d in list(self.fs.pseudo_dirs) if not (d == path or d.startswith(below))]


def _tasks_run_elsewhere() -> str | None:
    """Why the scheduler graphs would run on now has tasks outside this process, or None.

    The choice mirrors dask's (and the runner's): a scheduler named in dask.config wins,
    else the default distributed client.  A client counts as in-process only when every
    worker it has is a ``Worker`` of this process (``LocalCluster(processes=False)``).
    """
    import sys

    import dask

    scheduler = dask.config.get("scheduler", None)
    if scheduler in ("processes", "multiprocessing"):
        return f"dask.config names the {scheduler!r} scheduler"
    if scheduler not in (None, "dask.distributed", "distributed") or "distributed" not in sys.modules:
        return None  # threads or synchronous; no distributed client can exist without the module
    from distributed import Worker, default_client

    try:
        client = default_client()
    except ValueError:  # no client: dask's local threads
        return None
    workers = set(client.scheduler_info(n_workers=-1).get("workers", {}))
    here = {w.address for w in list(Worker._instances)}
    outside = sorted(workers - here)
    if outside:
        return f"the Dask client in use ({client.scheduler.address}) has {len(outside)} worker(s) in other processes"
    if not workers:
        return f"the Dask client in use ({client.scheduler.address}) has no workers in this process"
    return None
