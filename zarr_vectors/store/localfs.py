"""A local store root that opens only regular files inside it.

Stores are data from elsewhere: a chunk or ``zarr.json`` may be a symbolic link to
``/etc/passwd``, a directory may link to ``/``, a FIFO may stand where a cell belongs.
:class:`SafeRoot` is what :class:`~zarr_vectors.store.backend.LocalStorage` reads, lists
and writes through, and it guarantees:

- no path is followed through a symbolic link: every directory between the root and an
  object is checked once (``lstat``: a real directory, no link) and remembered, and the
  object itself is checked (``lstat``: a regular file) before it is opened, then opened
  with ``O_NOFOLLOW | O_NONBLOCK`` and checked again (``fstat``), so a FIFO never blocks
  and a device, ``/proc`` or anything outside the root is never read;
- listings never descend a linked directory nor stat through a link, yet list every
  link, FIFO, socket and device as a key (the validator reports them, reading one raises);
- writes never go through a linked directory;
- each refusal is a :class:`StorageObjectError` naming the key.

The root itself is resolved once (``realpath``): a user may pass a linked root.  What is
checked is the store at rest; another process swapping a checked directory for a link
while we read is outside what a path-based check can see.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import NamedTuple

from zarr_vectors import config
from zarr_vectors.errors import ResourceLimitError, StorageObjectError
from zarr_vectors.format.paths import TEMP_PREFIX

__all__ = ["Listing", "SafeRoot", "check_key", "kind_of"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_READ_FLAGS = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
#: open/stat failures that say something about the object (a refusal naming it), not about the machine
_OBJECT_ERRNOS = frozenset(
    getattr(errno, name)
    for name in ("ELOOP", "ENOTDIR", "EISDIR", "EACCES", "EPERM", "ENXIO", "ENODEV", "ENAMETOOLONG", "EOPNOTSUPP")
    if hasattr(errno, name)
)
_BAD_PARTS = frozenset({"", ".", ".."})


class Listing(NamedTuple):
    """One walk of a store: every object key with its size, the keys that are not regular
    files (what each is), and every directory key below the walked prefix."""

    sizes: dict[str, int]
    special: dict[str, str]
    dirs: list[str]


def kind_of(mode: int) -> str:
    """What a file-system object is, in words (for refusals and findings)."""
    if stat.S_ISREG(mode):
        return "regular file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "symbolic link"
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "special file"


def check_key(key: str) -> None:
    """Refuse a key that could name something outside the store (``..``, ``.``, empty parts, NUL)."""
    if not key or "\0" in key or any(part in _BAD_PARTS for part in key.split("/")):
        raise StorageObjectError("not a key inside the store (empty, '.' or '..' part, or NUL)", key=key)


def _refusal(exc: OSError, key: str, what: str = "") -> OSError:
    """The typed error for an OS error about ``key``; the OS error itself when it is about the machine."""
    if exc.errno not in _OBJECT_ERRNOS:
        return exc
    reason = "a symbolic link (or a link loop) on the way" if exc.errno == errno.ELOOP else exc.strerror
    return StorageObjectError(f"cannot {what or 'open'} it: {reason}", key=key)


class SafeRoot:
    """Paths below one real root directory, checked as described in the module docstring."""

    def __init__(self, root: str) -> None:
        self.base = os.path.realpath(root)
        self._dirs: set[str] = set()  # directory keys ("" the root) checked to be real directories

    def path(self, key: str) -> str:
        return f"{self.base}/{key}" if key else self.base

    def forget(self, prefix: str | None = None) -> None:
        """Drop remembered directories (all, or those at and below ``prefix``) after deleting some."""
        if prefix is None:
            self._dirs.clear()
            return
        below = prefix + "/"
        self._dirs.difference_update([d for d in list(self._dirs) if d == prefix or d.startswith(below)])

    # -- directories -----------------------------------------------------------
    def directory(self, dkey: str, *, key: str, create: bool = False) -> bool:
        """Whether ``dkey`` (a directory key checked by :func:`check_key`, "" the root) is a real
        directory below the root.

        False when it (or a parent) does not exist, unless ``create``, which makes the
        missing ones.  A link, or anything but a directory, on the way is refused.
        """
        if dkey in self._dirs:
            return True
        parts = dkey.split("/") if dkey else []
        if not self._check_root(key, create):
            return False
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            if sub in self._dirs:
                continue
            if not self._check_dir(sub, key, create):
                return False
        return True

    def _check_root(self, key: str, create: bool) -> bool:
        if "" in self._dirs:
            return True
        try:
            st = os.stat(self.base)  # the root was resolved once: following is what the user asked
        except FileNotFoundError:
            if not create:
                return False
            os.makedirs(self.base, exist_ok=True)
            st = os.stat(self.base)
        except NotADirectoryError:
            return False
        except OSError as exc:  # a link loop, no permission
            raise _refusal(exc, key, "reach the store root") from exc
        if not stat.S_ISDIR(st.st_mode):
            raise StorageObjectError(f"the store root {self.base!r} is a {kind_of(st.st_mode)}, not a directory",
                                     key=key)
        self._dirs.add("")
        return True

    def _check_dir(self, sub: str, key: str, create: bool) -> bool:
        path = self.path(sub)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            if not create:
                return False
            try:
                os.mkdir(path)
            except FileExistsError:  # made by another task meanwhile: check what it is
                pass
            st = os.lstat(path)
        except OSError as exc:
            raise _refusal(exc, key, "reach") from exc
        if not stat.S_ISDIR(st.st_mode):
            raise StorageObjectError(f"{sub!r} is a {kind_of(st.st_mode)} where a directory belongs (never "
                                     "followed)", key=key)
        self._dirs.add(sub)
        return True

    def parent(self, key: str, *, create: bool = False) -> bool:
        """:meth:`directory` of the directory holding ``key``, after :func:`check_key`.

        Key "" is the root itself as an object (a job journal is one file): its directory
        is the user's, outside the store, and only made when missing.
        """
        if not key:
            if create:
                os.makedirs(os.path.dirname(self.base), exist_ok=True)
            return True
        check_key(key)
        return self.directory(key.rpartition("/")[0], key=key, create=create)

    # -- reading -----------------------------------------------------------------
    def read(self, key: str, start: int = 0, end: int | None = None) -> bytes | None:
        """Bytes ``[start, end)`` of the regular file at ``key`` (negative ``start`` from the
        end, ``end`` None to the end); None when there is no object at ``key``."""
        if not self.parent(key):
            return None
        path = self.path(key)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _refusal(exc, key) from exc
        if not stat.S_ISREG(st.st_mode):
            raise StorageObjectError(f"a {kind_of(st.st_mode)}, not a regular file: not opened", key=key)
        try:
            fd = os.open(path, _READ_FLAGS)
        except FileNotFoundError:
            return None
        except OSError as exc:  # ELOOP: it became a link since the lstat
            raise _refusal(exc, key) from exc
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise StorageObjectError(f"a {kind_of(st.st_mode)}, not a regular file", key=key)
            size = st.st_size
            lo = max(0, size + start) if start < 0 else start
            hi = size if end is None else min(end, size)
            want = max(0, hi - lo)
            limit = int(config.get("limits.max-decoded-bytes"))
            if want > limit:
                raise ResourceLimitError(f"{key}: reading {want} bytes exceeds zarr_vectors.limits.max-decoded-bytes "
                                         f"({limit})")
            return _read_fd(fd, lo, want, whole=end is None, limit=limit, key=key)
        finally:
            os.close(fd)

    # -- listing -----------------------------------------------------------------
    def list_dir(self, prefix: str) -> list[str]:
        """Names of the direct children of ``prefix``; [] when it is no directory.  A linked
        ``prefix`` is refused rather than listed."""
        if not self._start(prefix):
            return []
        try:
            return os.listdir(self.path(prefix))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def walk(self, prefix: str = "") -> Listing:
        """Every object below the directory ``prefix``: regular files, and links, FIFOs, sockets
        and devices as keys (never followed, never opened); only real directories are descended."""
        sizes: dict[str, int] = {}
        special: dict[str, str] = {}
        dirs: list[str] = []
        if self._start(prefix):
            stack = [prefix]
            while stack:
                dkey = stack.pop()
                try:
                    entries = list(os.scandir(self.path(dkey)))
                except (FileNotFoundError, NotADirectoryError):
                    continue
                lead = f"{dkey}/" if dkey else ""
                for entry in entries:
                    if entry.name.startswith(TEMP_PREFIX):
                        continue
                    key = lead + entry.name
                    if entry.is_dir(follow_symlinks=False):
                        self._dirs.add(key)
                        dirs.append(key)
                        stack.append(key)
                        continue
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:  # removed since the listing
                        continue
                    sizes[key] = st.st_size
                    if not stat.S_ISREG(st.st_mode):
                        special[key] = kind_of(st.st_mode)
        return Listing(sizes, special, dirs)

    def _start(self, prefix: str) -> bool:
        """Whether ``prefix`` is a real directory to walk: False when it is absent or a file, refused
        when a link (or a link on the way)."""
        if not prefix:
            return self.directory("", key="")
        check_key(prefix)
        if not self.directory(prefix.rpartition("/")[0], key=prefix):
            return False
        try:
            st = os.lstat(self.path(prefix))
        except FileNotFoundError:
            return False
        if stat.S_ISLNK(st.st_mode):
            raise StorageObjectError("a symbolic link where a directory is listed: not followed", key=prefix)
        if not stat.S_ISDIR(st.st_mode):
            return False
        self._dirs.add(prefix)
        return True

    # -- writing -----------------------------------------------------------------
    def create_temp(self, key: str, name: str) -> tuple[int, str]:
        """A new file ``name`` beside ``key`` (its directories made, none a link): (fd, path)."""
        directory = key.rpartition("/")[0]
        self.parent(key, create=True)
        tmp = self.path(f"{directory}/{name}" if directory else name) if key else f"{os.path.dirname(self.base)}/{name}"
        try:
            return os.open(tmp, _WRITE_FLAGS, 0o644), tmp
        except FileNotFoundError:  # the directory was removed since we checked it
            self.forget(directory)
            self.parent(key, create=True)
            return os.open(tmp, _WRITE_FLAGS, 0o644), tmp


def _read_fd(fd: int, offset: int, want: int, *, whole: bool, limit: int, key: str) -> bytes:
    """``want`` bytes at ``offset`` (one ``pread`` when the file is as ``fstat`` said); with
    ``whole``, on to the end should the file have changed since, never past ``limit``."""
    data = os.pread(fd, want + 1 if whole else want, offset) if want or whole else b""
    if len(data) == want:
        return data
    parts, got = [data], len(data)
    while whole or got < want:
        part = os.pread(fd, 1 << 20 if whole else want - got, offset + got)
        if not part:
            break
        parts.append(part)
        got += len(part)
        if got > limit:
            raise ResourceLimitError(f"{key}: the object grew past zarr_vectors.limits.max-decoded-bytes ({limit}) "
                                     "while read")
    return b"".join(parts)
