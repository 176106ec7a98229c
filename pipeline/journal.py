"""A build job's journal: its state, in a small JSON document beside the store.

Apart from :mod:`pipeline.jobs` so that reading it (``zv status``, the request table of
``zv info``) costs no import of the job machinery (dask.dataframe, pandas, the writers).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Literal, overload

from zarr_vectors.errors import InputError
from zarr_vectors.store.accounting import Recorder, recording
from zarr_vectors.store.backend import Storage

if TYPE_CHECKING:
    from pipeline.jobs import BuildSpec


class _LatestWriter:
    """Writes the newest document handed to it, on a thread of its own, one write at a time.

    A document handed over while another is being written replaces any still waiting,
    so the caller never waits for storage and at most one write is in flight.  A failed
    write is kept until a newer document is written (it supersedes the failed one) or
    :meth:`flush` raises it.
    """

    def __init__(self, write: Callable[[bytes], None]) -> None:
        self._write = write
        self._lock = threading.Lock()
        self._waiting: bytes | None = None
        self._failed: BaseException | None = None  # the newest write's failure, while no newer one succeeded
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="zv-journal")

    def submit(self, data: bytes) -> None:
        with self._lock:
            queued, self._waiting = self._waiting is not None, data
        if not queued:
            self._pool.submit(self._drain)

    def _drain(self) -> None:
        with self._lock:
            data, self._waiting = self._waiting, None
        if data is None:
            return
        try:
            self._write(data)
        except BaseException as exc:  # noqa: BLE001 - kept, and raised by flush unless a newer write succeeds
            failed: BaseException | None = exc
        else:
            failed = None
        with self._lock:
            self._failed = failed

    def flush(self) -> None:
        """Wait until every document handed over is written (or superseded); raise if the
        newest write failed."""
        self._pool.submit(lambda: None).result()  # one thread: runs after every drain submitted before it
        with self._lock:
            failed, self._failed = self._failed, None
        if failed is not None:
            raise failed

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._pool.shutdown(wait=True)


def _document(state: Mapping[str, Any]) -> bytes:
    """A journal state as its object holds it (values JSON cannot hold, as text)."""
    return json.dumps(state, indent=2, default=str).encode()


def journal_storage(out: str, storage_options: Mapping[str, Any] | None) -> Storage:
    """The journal of the store at ``out``: one object beside it, ``<store>.zvjob.json``, on the same storage."""
    return Storage(out.rstrip("/") + ".zvjob.json", storage_options)


class Journal:
    """The job's state: stages done, the running stage, results, the error if any.

    Saves go out in the background (a job's client waits for no journal write between
    steps: on an object store each was a round trip with every worker idle); ``flush``
    waits for them and raises a failed one, and ``requests`` counts them.
    """

    def __init__(self, spec: BuildSpec) -> None:
        self.storage = journal_storage(spec.out, spec.storage_options)
        self.state: dict[str, Any] = {"job_id": spec.job_id, "spec": journalled_spec(spec), "stages": {},
                                      "status": "pending"}
        self.requests = Recorder()
        self._writer = _LatestWriter(self._put)
        self._handing = threading.Lock()  # a save and a beat hand documents over in the order they made them
        self._last: bytes | None = None

    @staticmethod
    def load(out: str, storage_options: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        storage = journal_storage(out, storage_options)
        storage.check_reachable()  # an unreachable endpoint is StoreNotFoundError, not a botocore error
        raw = storage.get("")
        return None if raw is None else _checked_state(raw, storage.url)

    @staticmethod
    def put_state(out: str, storage_options: Mapping[str, Any] | None, state: dict[str, Any]) -> None:
        """Write a whole state at once (a refusal's record: no job's writer runs for it)."""
        journal_storage(out, storage_options).put("", _document(state))

    def resume_from(self, previous: dict[str, Any]) -> None:
        self.state["stages"] = {k: v for k, v in previous.get("stages", {}).items() if v.get("status") == "done"}

    def done(self, stage: str) -> bool:
        return self.state["stages"].get(stage, {}).get("status") == "done"

    def update(self, stage: str, **values: Any) -> None:
        self.state["stages"].setdefault(stage, {}).update(values)
        self.save()

    def set_status(self, status: str, **values: Any) -> None:
        self.state["status"] = status
        self.state.update(values)
        self.save()

    def save(self) -> None:
        """Hand the current state, stamped with its heartbeat, to the background writer (never
        waits, never raises)."""
        with self._handing:
            self.state["heartbeat"] = time.time()
            self._last = _document(self.state)
            self._writer.submit(self._last)

    def beat(self) -> None:
        """Save the last state saved again with a new heartbeat: while a task runs for minutes no
        step saves, and a job another host ran can only be told alive by its journal's beat.
        Works on the last document, never on the state a stage may be changing."""
        with self._handing:
            if self._last is None:
                return
            doc = json.loads(self._last)
            doc["heartbeat"] = time.time()
            self._last = _document(doc)
            self._writer.submit(self._last)

    @contextmanager
    def beating(self) -> Iterator[None]:
        """:meth:`beat` every ``zarr_vectors.jobs.heartbeat`` while the block runs."""
        from zarr_vectors import config

        stop = threading.Event()
        interval = float(config.get("jobs.heartbeat"))

        def run() -> None:
            while not stop.wait(interval):
                self.beat()

        thread = threading.Thread(target=run, name="zv-journal-heartbeat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def flush(self) -> None:
        """Wait until the last state saved is on storage; raise if it could not be written."""
        self._writer.flush()

    def close(self) -> None:
        """Flush, then stop the writer."""
        self._writer.close()

    def _put(self, data: bytes) -> None:
        with recording(self.requests):  # the journal's own count, apart from every stage's
            self.storage.put("", data)


#: parts of a storage option's name that say its value is a credential (s3fs's ``key`` and
#: ``secret``, ``token``, obstore's ``aws_secret_access_key`` / ``aws_session_token``...)
SECRET_NAME_PARTS = ("key", "secret", "token", "password", "passwd", "credential", "session", "auth", "signature",
                     "connection_string", "cookie", "sas")


def journalled_spec(spec: BuildSpec) -> dict[str, Any]:
    """The spec as the journal keeps it: storage options that are credentials replaced by
    ``"<redacted>"`` -- the journal sits beside the store, on a bucket others may read, and
    nothing reads the options back from it (``--resume`` compares the other fields)."""
    return {**asdict(spec), "storage_options": _redacted(spec.storage_options)}


def _redacted(options: Any) -> Any:
    if isinstance(options, Mapping):
        return {k: "<redacted>" if any(part in str(k).lower() for part in SECRET_NAME_PARTS) else _redacted(v)
                for k, v in options.items()}
    if isinstance(options, (list, tuple)):
        return [_redacted(v) for v in options]
    return options


def _checked_state(raw: bytes, url: str) -> dict[str, Any]:
    """A journal's state, refused as an InputError naming it unless it is one: a damaged or
    foreign file beside a store must not end ``zv status`` or ``--resume`` in a traceback."""
    try:
        state = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than the parser goes
        raise InputError(f"the job journal {url!r} is damaged: not JSON ({type(exc).__name__}: {exc})") from None
    shapes = {"job_id": str, "status": str, "spec": dict, "stages": dict}
    wrong = [k for k, kind in shapes.items() if not isinstance(state, dict) or not isinstance(state.get(k), kind)]
    if not wrong and not all(isinstance(v, dict) for v in state["stages"].values()):
        wrong = ["stages"]
    if wrong:
        raise InputError(f"the job journal {url!r} is damaged: no valid {', '.join(wrong)}")
    return state


@overload
def job_status(out: str, storage_options: Mapping[str, Any] | None = ...,
               *, missing_ok: Literal[False] = ...) -> dict[str, Any]: ...
@overload
def job_status(out: str, storage_options: Mapping[str, Any] | None = ...,
               *, missing_ok: bool) -> dict[str, Any] | None: ...
def job_status(out: str, storage_options: Mapping[str, Any] | None = None,
               *, missing_ok: bool = False) -> dict[str, Any] | None:
    """The journal's state; a running job whose process is gone from this host is ``interrupted``
    (a killed job cannot say so: its journal said ``running`` for good).  No journal is an
    InputError, or ``None`` with ``missing_ok`` (a submitted job no worker has started)."""
    state = Journal.load(out, storage_options)
    if state is None:
        if missing_ok:
            return None
        raise InputError(f"no job journal beside {out!r}")
    if state["status"] == "running" and process_gone(state.get("process")):
        state["status"] = "interrupted"
    return state


def this_process() -> dict[str, Any]:
    """What the journal records of the process running a job, so a reader can tell it is gone: its
    host and pid, and (Linux) its pid namespace and start time, which tell a pid another
    container sees, or one reused since, from the job's."""
    return {"host": socket.gethostname(), "pid": os.getpid(), **_proc_identity(os.getpid())}


def _proc_identity(pid: int) -> dict[str, int]:
    """``pidns`` (the pid namespace's inode, ours: a pid means this process only inside it) and
    ``start`` (clock ticks after boot) of a process, where ``/proc`` says; empty where not."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
        with open(f"/proc/{pid}/stat", "rb") as f:
            after_name = f.read().rpartition(b")")[2].split()
        if after_name[0] == b"Z":  # a zombie has ended: it only waits for its parent
            return {"pidns": namespace, "start": -1}
        return {"pidns": namespace, "start": int(after_name[19])}  # field 22 of stat(5)
    except (OSError, ValueError, IndexError):
        return {}


def process_gone(process: Any) -> bool:
    """Whether the recorded job process is known to be gone (:func:`process_state`)."""
    return process_state(process) == "gone"


def process_state(process: Any) -> str:
    """``"gone"``, ``"alive"`` or ``"unknown"``: on this host and in this pid namespace, a pid no
    process has, or one a process that started at another time has (a pid reused), or a zombie, is
    gone; the recorded process itself is alive.  A process another host or container ran cannot
    be asked, and an unrecorded one is unknown."""
    if not isinstance(process, dict) or process.get("host") != socket.gethostname():
        return "unknown"
    pid = process.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or not 0 < pid < 2**31:
        return "unknown"
    ours = _proc_identity(os.getpid())
    if "pidns" in process and process["pidns"] != ours.get("pidns"):
        return "unknown"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "gone"
    except OSError:  # alive, another user's
        pass
    if "start" not in process:
        return "unknown"
    now = _proc_identity(pid)
    if "start" not in now:
        return "unknown"
    return "alive" if now["start"] == process["start"] else "gone"


def heard_from(state: Mapping[str, Any]) -> float | None:
    """Seconds since a running job's journal was last saved (its heartbeat), if it says."""
    beat = state.get("heartbeat")
    return time.time() - beat if isinstance(beat, (int, float)) and not isinstance(beat, bool) else None
