"""S3 through obstore (Rust's ``object_store``): the default S3 backend, chosen by measurement.

The requests of a batch are issued concurrently from one event loop, at most
``zarr_vectors.s3.concurrency`` at a time, and signing, HTTP and body handling run in
Rust, off the GIL.  On the 20 ms moto server (docs/DESIGN.md, "Object stores") 1000
cell GETs took 5.2 s here against 15.9 s through s3fs's ``cat``: with aiobotocore,
the client's per-request Python work, not the network, bounded how many requests were
in flight.  ``zarr_vectors.s3.backend: s3fs`` selects :class:`FsspecStorage` instead.

Storage options are s3fs's names (``endpoint_url``, ``key``, ``secret``, ``token``,
``anon``, ``client_kwargs.region_name``), so one set of options works with either
backend; obstore's own ``S3Config`` names are accepted as well.
"""

from __future__ import annotations

import asyncio
import bisect
import os
import posixpath
import re
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from datetime import timedelta
from functools import partial
from typing import Any, TypeVar
from urllib.parse import urlsplit

import obstore
from obstore.exceptions import BaseError, NotFoundError
from obstore.store import S3Store

from zarr_vectors import config
from zarr_vectors.errors import InputError, StorageRequestError, StoreNotFoundError
from zarr_vectors.format.paths import TEMP_PREFIX
from zarr_vectors.store.backend import (
    BODY_STEP,
    Storage,
    existing_sources,
    gather_bounded,
    request_failure,
    typed_request_failures,
)
from zarr_vectors.store.localfs import check_key

T = TypeVar("T")

#: s3fs options with an obstore equivalent: s3fs name -> S3Config name
_RENAMED = {
    "endpoint_url": "endpoint",
    "key": "access_key_id",
    "aws_access_key_id": "access_key_id",
    "secret": "secret_access_key",
    "aws_secret_access_key": "secret_access_key",
    "token": "session_token",
    "aws_session_token": "session_token",
    "region_name": "region",
}
#: s3fs tuning options that mean nothing here (its caches, its part sizes)
_S3FS_ONLY = {"use_listings_cache", "listings_expiry_time", "max_concurrency", "default_block_size",
              "default_fill_cache", "default_cache_type", "version_aware", "cache_regions", "asynchronous",
              "loop", "skip_instance_cache", "use_ssl", "requester_pays", "config_kwargs", "s3_additional_kwargs"}
_S3_CONFIG = {"access_key_id", "secret_access_key", "session_token", "endpoint", "region", "default_region",
              "skip_signature", "virtual_hosted_style_request", "unsigned_payload", "request_payer",
              "checksum_algorithm", "conditional_put", "copy_if_not_exists", "disable_tagging",
              "server_side_encryption", "sse_kms_key_id", "sse_bucket_key_enabled", "role_arn",
              "role_session_name", "web_identity_token_file", "sts_endpoint", "metadata_endpoint"}


def s3_config(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(S3Config, ClientConfig)`` for s3fs-style storage options; an option neither backend knows is refused."""
    out: dict[str, Any] = {}
    flat = dict(options)
    client_kwargs = flat.pop("client_kwargs", None) or {}
    if not isinstance(client_kwargs, Mapping):
        raise InputError(f"storage option 'client_kwargs' must be a mapping, not {client_kwargs!r}")
    for name, value in {**client_kwargs, **flat}.items():
        if name == "anon":
            if value:
                out["skip_signature"] = True
        elif name in _RENAMED:
            out[_RENAMED[name]] = value
        elif name in _S3_CONFIG:
            out[name] = value
        elif name not in _S3FS_ONLY:
            raise InputError(f"storage option {name!r} is not understood by the obstore S3 backend "
                             "(set zarr_vectors.s3.backend to 's3fs' to pass s3fs options through)")
    endpoint = out.get("endpoint") or os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT") or ""
    parts = urlsplit(str(endpoint))
    if endpoint and (parts.scheme not in ("http", "https") or not parts.hostname):  # obstore panics on it
        raise InputError(f"S3 endpoint {endpoint!r} is not an http:// or https:// URL with a host")
    client: dict[str, Any] = {"timeout": timedelta(seconds=float(config.get("s3.request-timeout")))}
    if parts.scheme == "http":
        client["allow_http"] = True
    return out, client


class _Loop:
    """One event loop on a daemon thread per process, which every batch of requests runs on.

    Not ``asyncio.run`` per call: the caller may be inside a running loop (a notebook),
    and a loop per batch would rebuild obstore's connection pool each time.
    """

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None
    _pid = 0

    @classmethod
    def run(cls, coro: Coroutine[Any, Any, T]) -> T:
        with cls._lock:
            if cls._loop is None or cls._pid != os.getpid():  # a forked child starts its own
                cls._loop = asyncio.new_event_loop()
                cls._pid = os.getpid()
                threading.Thread(target=cls._loop.run_forever, daemon=True, name="zv-obstore").start()
            loop = cls._loop
        return asyncio.run_coroutine_threadsafe(coro, loop).result()


#: what a request that failed after obstore's retries raises
_FAILURES: tuple[type[BaseException], ...] = (BaseError, FileNotFoundError)


_UNNAMEABLE = ("obstore cannot list or name a key with an empty segment, '.', '..' or a control character; "
               "the s3fs backend (zarr_vectors.s3.backend: s3fs) lists it, the validator reports it and an "
               "overwrite removes it")


def _reason(text: str) -> str:
    """obstore's message on one line: its first line (the request, its retries) and the cause
    it buries in the lines after -- the S3 error code, or the connection's error."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "(no message)")
    if "invalid path" in first:  # a key of the store obstore cannot name: say what can
        return f"{first} ({_UNNAMEABLE})"
    cause = re.search(r"<Code>([^<]+)</Code>", text) or re.search(r'message: "([^"]+)"', text)
    return f"{first} [{cause.group(1)}]" if cause and cause.group(1) not in first else first


#: a read's failures, after obstore's retries; a missing object (obstore raises the built-in
#: ``FileNotFoundError``) is the method's own answer
_obstore_read = typed_request_failures(lambda: _FAILURES, answers=(FileNotFoundError,), reason=_reason)
#: a write's: nothing need exist to be written or deleted, so there a 404 is the bucket gone
_obstore_write = typed_request_failures(lambda: _FAILURES, reason=_reason)


class ObstoreStorage(Storage):
    """An S3 prefix through obstore; every batch method is one bounded concurrent batch."""

    is_remote = True
    list_page_size = 1000  # S3's ListObjectsV2 page
    delete_batch = 1000  # S3's DeleteObjects batch (obstore splits a longer list)
    reachability_probe = "LIST"  # probe lists the root

    def __init__(self, url: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None) -> None:
        super().__init__(url, storage_options)
        self._prefix = self.root.partition("/")[2]
        self._store = self._client()

    def _client(self, retry_config: Mapping[str, Any] | None = None) -> S3Store:
        """An obstore client for this store's bucket and options (obstore's retries unless given)."""
        s3, client = s3_config(self.storage_options)
        extra = {} if retry_config is None else {"retry_config": retry_config}
        try:
            return S3Store(self.bucket, config=s3, client_options=client, **extra)  # type: ignore[arg-type]
        except (TypeError, ValueError, BaseError) as exc:  # a value of the wrong type or form
            raise self.refused_options(exc) from exc

    @property
    def bucket(self) -> str | None:
        return self.root.split("/", 1)[0]

    def full_path(self, key: str) -> str:
        """The path of ``key``, refusing keys that could name something outside the root (``..``)."""
        if key:
            check_key(key)
        return super().full_path(key)

    def _key(self, key: str) -> str:
        """The object path in the bucket of ``key`` (``""``: the root itself, a single-object storage)."""
        if not key:
            return self._prefix
        check_key(key)
        return posixpath.join(self._prefix, key) if self._prefix else key

    def _list_prefix(self, prefix: str) -> str | None:
        """What to list below ``prefix`` (a directory: a trailing slash, so ``a`` never lists ``ab``)."""
        path = self._key(prefix)
        return path + "/" if path else None

    def _relative(self, path: str) -> str:
        return path[len(self._prefix) + 1 :] if self._prefix else path

    # -- reads -----------------------------------------------------------------
    async def _get(self, key: str, options: dict[str, Any] | None = None) -> bytes | None:
        try:
            result = await obstore.get_async(self._store, key, options=options)  # type: ignore[arg-type]
            return await self._body(result, f"s3://{self.bucket}/{key}")
        except (NotFoundError, FileNotFoundError) as exc:
            self.absent(exc)
            return None

    async def _body(self, result: Any, where: str) -> bytes:
        """The answer's body, held to the length its headers declare (obstore compares neither a
        chunked body nor one longer than its ``Content-Length`` / ``Content-Range`` with them)."""
        start, end = result.range
        try:
            return await self.read_body(result.stream(min_chunk_size=BODY_STEP), where, end - start)
        except BaseError as exc:  # the body broke off: obstore's message names no object, so name it here
            raise request_failure(self.url, exc, _reason(str(exc)), where) from exc

    @_obstore_read
    def get(self, key: str) -> bytes | None:
        return _Loop.run(self._get(self._key(key)))

    @_obstore_read
    def get_many(self, keys: Iterable[str]) -> list[bytes | None]:
        return _Loop.run(gather_bounded([partial(self._get, self._key(k)) for k in keys]))

    def get_decoded(self, keys: Sequence[str], decode: Callable[[int, bytes | None], T]) -> list[T]:
        """One concurrent batch of reads, then the decoding."""
        return [decode(i, raw) for i, raw in enumerate(self.get_many(keys))]

    @_obstore_read
    def get_ranges(self, requests: Sequence[tuple[str, int, int | None]]) -> list[bytes | None]:
        calls = []
        for key, start, end in requests:
            key = self._key(key)
            if start < 0 and end is None:
                rng: Any = {"suffix": -start}
            elif start < 0 or end is not None and end < 0:
                raise InputError(f"{key}: a range from the end ({start}, {end}) must read to the end")
            elif end is None:
                rng = {"offset": start}
            else:
                rng = (start, max(start, end))
            calls.append(partial(self._get_range, key, rng))
        return _Loop.run(gather_bounded(calls))

    async def _get_range(self, key: str, rng: Any) -> bytes | None:
        if isinstance(rng, tuple) and rng[0] == rng[1]:  # an empty range: S3 has no way to ask for one
            return b"" if await self._head(key) else None
        return await self._get(key, {"range": rng})

    async def _head(self, key: str) -> bool:
        try:
            await obstore.head_async(self._store, key)
        except (NotFoundError, FileNotFoundError):
            return False
        return True

    @_obstore_read
    def exists(self, key: str) -> bool:
        """One HEAD (``""``, the root: an object there, or anything below it)."""
        if not key:
            return bool(self._prefix and _Loop.run(self._head(self._prefix))) or bool(self.list_dir(""))
        return _Loop.run(self._head(self._key(key)))

    def list_dir(self, prefix: str) -> list[str]:
        return self.list_dirs([prefix])[0]

    @_obstore_read
    def list_dirs(self, prefixes: Iterable[str]) -> list[list[str]]:
        """One delimited listing per prefix, all concurrently."""
        return _Loop.run(gather_bounded([partial(self._list_dir, p) for p in prefixes]))

    async def _list_dir(self, prefix: str) -> list[str]:
        """The names one level below ``prefix``.  Not the folder's own marker (``prefix/``, a
        console's "create folder"), which obstore lists as an object at ``prefix``, trailing ``/``
        stripped: the listing of a folder named itself (an empty store folder read as taken)."""
        found = await self._delimited(self._store, prefix)
        itself = (self._list_prefix(prefix) or "").rstrip("/")
        names = [posixpath.basename(p.rstrip("/")) for p in found["common_prefixes"]]
        names += [posixpath.basename(o["path"]) for o in found["objects"] if o["path"] != itself]
        return sorted(n for n in set(names) if n and not n.startswith(TEMP_PREFIX))

    async def _delimited(self, client: S3Store, prefix: str) -> Any:
        """One delimited listing, ended after ``zarr_vectors.s3.listing-timeout`` seconds, its
        requests' retries included.

        obstore follows the continuation tokens inside, out of our sight, so a server that
        repeats its pages would be listed forever (and its pages kept); a time bound is the one
        we can set.  Cancelling the call stops obstore's requests (measured)."""
        seconds = float(config.get("s3.listing-timeout"))
        try:
            return await asyncio.wait_for(obstore.list_with_delimiter_async(client, self._list_prefix(prefix)), seconds)
        except TimeoutError:
            raise StorageRequestError(
                f"store {self.url!r}: the listing of {prefix or 'the root'!r} did not end within {seconds:g} s "
                "(zarr_vectors.s3.listing-timeout, retries included): a server this slow, or one repeating its pages"
            ) from None

    def _listing(self, prefix: str) -> dict[str, int]:
        """Every object below ``prefix`` with its size.

        A path listed a third time ends the listing: a server that repeats its page and token
        would page forever.  S3 never repeats a key, but obstore gives ``x`` and the folder
        marker ``x/`` the same path, so twice is legitimate.
        """
        out: dict[str, int] = {}
        seen: set[str] = set()
        twice: set[str] = set()
        below = self._list_prefix(prefix) or ""
        for batch in obstore.list(self._store, below or None, chunk_size=1000):
            for meta in batch:
                path = str(meta["path"])
                if path in seen:
                    if path in twice:
                        raise StorageRequestError(
                            f"store {self.url!r}: the listing of {prefix or 'the root'!r} names {path!r} three "
                            "times: the server repeats its pages"
                        )
                    twice.add(path)
                seen.add(path)
                if path.startswith(below):  # obstore strips a trailing slash: no path ends in one
                    out[self._relative(path)] = int(meta["size"])
        return out

    @_obstore_read
    def file_sizes(self, prefix: str) -> dict[str, int]:
        """obstore lists a folder marker ``x/`` as ``x``: an empty ``x`` with keys below it is one."""
        listed = self._listing(prefix)
        empty = [key for key, n in listed.items() if not n]
        if not empty:
            return listed
        keys = sorted(listed)
        below = (bisect.bisect_left(keys, key + "/") for key in empty)
        markers = {key for key, i in zip(empty, below) if i < len(keys) and keys[i].startswith(key + "/")}
        return {key: n for key, n in listed.items() if key not in markers}

    @_obstore_read
    def object_sizes(self) -> dict[str, int]:
        return self._listing("")

    # -- writes ----------------------------------------------------------------
    @_obstore_write
    def put(self, key: str, data: bytes) -> None:
        """A PUT is atomic on an object store."""
        obstore.put(self._store, self._key(key), data)

    @_obstore_write
    def put_many(self, items: Mapping[str, bytes]) -> None:
        _Loop.run(gather_bounded([partial(obstore.put_async, self._store, self._key(k), v) for k, v in items.items()]))

    def delete(self, key: str) -> None:
        self.delete_many([key])

    @_obstore_write
    def delete_many(self, keys: Sequence[str]) -> None:
        """Bulk deletes (up to 1000 keys a request); a missing key is not an error."""
        if keys:
            obstore.delete(self._store, [self._key(k) for k in keys])

    @_obstore_write
    def delete_prefix(self, prefix: str) -> None:
        keys = list(self._listing(prefix))
        if prefix:  # a stray object named like a node of the store is the store's; at the root, a neighbour's
            keys.append(prefix)
        if keys:  # not through delete_many: this call's own requests are counted as one (accounting.ADDITIVE)
            obstore.delete(self._store, [self._key(k) for k in keys])

    @_obstore_write
    def move_many(self, pairs: Sequence[tuple[str, str]], *, sources_present: bool = False) -> None:
        """Server-side copies, then one bulk delete; sources already moved are skipped."""
        if not pairs:
            return
        present = list(pairs) if sources_present else existing_sources(self, pairs)
        copies = [partial(obstore.copy_async, self._store, self._key(s), self._key(d)) for s, d in present]
        _Loop.run(gather_bounded(copies))
        if present:  # the copies and this delete are this call's own requests (accounting.ADDITIVE)
            obstore.delete(self._store, [self._key(s) for s, _ in present])

    def probe(self) -> None:
        """List the root once, telling a missing bucket from an unreachable endpoint.

        Through a client of its own with ``zarr_vectors.s3.probe-retries`` retries: obstore's
        default (10, with backoff) took 1.7-7.5 s to report an endpoint refusing every connection.
        """
        probe = self._client({
            "max_retries": int(config.get("s3.probe-retries")),
            "retry_timeout": timedelta(seconds=30),
            "backoff": {"init_backoff": timedelta(milliseconds=50), "max_backoff": timedelta(seconds=1), "base": 2},
        })
        try:
            _Loop.run(self._delimited(probe, ""))
        except Exception as exc:
            text = str(exc)
            if "NoSuchBucket" in text:
                raise StoreNotFoundError(f"bucket {self.bucket!r} of store {self.url!r} does not exist") from None
            endpoint = self.storage_options.get("endpoint_url") or os.environ.get(
                "AWS_ENDPOINT_URL", "the default AWS endpoint"
            )
            raise StoreNotFoundError(
                f"cannot reach bucket {self.bucket!r} for store {self.url!r} at {endpoint}: {text.splitlines()[0]}"
            ) from exc
