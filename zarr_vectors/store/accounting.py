"""Request accounting: how many GET/PUT/LIST/HEAD/DELETE requests a piece of work issued, and their bytes.

Counted at the storage contract (:class:`~zarr_vectors.store.backend.Storage`), the one
place every backend request passes, so a new backend is counted without code of its
own: ``Storage.__init_subclass__`` wraps each contract method a backend defines with
:func:`counted`.  The rule, per call of a contract method:

* ``get`` is one GET; ``get_many`` / ``get_decoded`` of N keys are N GETs (a batched
  read is N requests on the wire); ``get_ranges`` of N ranges is N GETs.  Bytes read
  are the bytes returned.
* ``put`` is one PUT, ``put_many`` of N objects N PUTs; bytes written are the bytes given.
* ``exists`` is one HEAD; a remote backend's ``probe`` (behind ``check_reachable``, once
  per storage object) is the one request its ``reachability_probe`` names (a HEAD, or a
  LIST of the root).
* ``list_dir``, ``file_sizes``, ``object_sizes`` and ``scan`` are one LIST per page of
  ``list_page_size`` entries the backend returns (one LIST where the backend has no
  pages, as a local walk); ``list_dirs`` of N prefixes counts each prefix so.
* ``delete`` is one DELETE, ``delete_many`` of N keys ``ceil(N / delete_batch)`` (an
  object store's bulk delete; one per key where the backend has none); ``delete_prefix``
  one LIST and one DELETE batch; ``move_many`` of N pairs N PUTs (server-side copies, no
  bytes through us) and the DELETE batches of the sources.
* A call that makes other contract calls (``get_many`` that reads through ``get`` on a
  pool, ``get_decoded`` through ``get_many``) counts only what those calls count: the
  innermost contract call is the request.  Except the composite calls
  (:data:`ADDITIVE`: ``delete_prefix``, ``move_many``), whose own walk, copies and
  deletes are counted beside the contract calls they make (an ``exists`` first, say).
  Nesting is tracked in a context variable that :class:`ContextExecutor` carries into
  its threads.  (Calls on another pool record nothing, and the call that started them,
  not seen to nest, counts by its own rule: nothing is counted twice.)

A contract method added to ``Storage`` needs a rule in :data:`RULES`, or it is not counted.

What the contract does not see is not counted: probes a filesystem library adds on its
own (s3fs lists a prefix after a HEAD that missed, and lists the parent when a prefix
lists empty; it HEADs each source before a server-side copy).  tests/unit/
test_request_accounting_s3.py measures the difference against a server's own count.

Where counts go (:func:`current_sink`): the :class:`Recorder` set in this context
(:func:`recording`), else -- on a Dask worker -- the recorder of the running task's
``zv_requests`` annotation (:data:`ANNOTATION`), which the runner sets on every graph
it submits inside a count; the client gathers those per stage with :func:`pop_tagged`
(``execution/requests.py``).  Work outside any count is not counted and costs one
global lookup per request.
"""

from __future__ import annotations

import contextvars
import functools
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import astuple, dataclass, fields
from typing import Any

#: The task annotation naming where a task's requests are recorded: ``(count token, stage)``.
ANNOTATION = "zv_requests"

KINDS = ("GET", "PUT", "LIST", "HEAD", "DELETE")


@dataclass(frozen=True)
class RequestCounts:
    """Requests by kind and the bytes they moved; added with ``+``."""

    gets: int = 0
    puts: int = 0
    lists: int = 0
    heads: int = 0
    deletes: int = 0
    bytes_read: int = 0
    bytes_written: int = 0

    def __add__(self, other: RequestCounts) -> RequestCounts:
        if not isinstance(other, RequestCounts):
            return NotImplemented
        return RequestCounts(*(a + b for a, b in zip(astuple(self), astuple(other))))

    @property
    def requests(self) -> int:
        """Every request, whatever its kind."""
        return self.gets + self.puts + self.lists + self.heads + self.deletes

    def by_kind(self) -> dict[str, int]:
        return dict(zip(KINDS, (self.gets, self.puts, self.lists, self.heads, self.deletes)))

    def to_json(self) -> dict[str, int]:
        """``{"GET": n, ..., "bytes_read": b, "bytes_written": b}``: what journals and ``--json`` show."""
        return {**self.by_kind(), "bytes_read": self.bytes_read, "bytes_written": self.bytes_written}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> RequestCounts:
        """The counts of a :meth:`to_json` document; what else a tally writes beside them
        (``by_stage``, ``incomplete``) is not a count."""
        kinds = dict(zip(KINDS, ("gets", "puts", "lists", "heads", "deletes")))
        counted = {f.name for f in fields(cls)}
        return cls(**{kinds.get(k, k): int(v) for k, v in doc.items() if kinds.get(k, k) in counted})

    def __str__(self) -> str:
        kinds = ", ".join(f"{n} {k}" for k, n in self.by_kind().items())
        return f"{kinds}; {self.bytes_read} B read, {self.bytes_written} B written"


class Recorder:
    """A running total of :class:`RequestCounts`, safe to add to from many threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals = [0] * 7  # RequestCounts' fields, in order: added per request without building one

    def add(self, counts: RequestCounts) -> None:
        self._add(astuple(counts))

    def _add(self, values: tuple[int, ...]) -> None:
        with self._lock:
            totals = self._totals
            for i, v in enumerate(values):
                totals[i] += v

    @property
    def counts(self) -> RequestCounts:
        with self._lock:
            return RequestCounts(*self._totals)


_SINK: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar("zv_request_sink", default=None)

_live = 0  # recordings open in this process: while none is, and no task is tagged here, nothing is counted
_tagging = False  # this process is a Dask worker whose tasks may carry the annotation
_LIVE_LOCK = threading.Lock()


def _open(step: int) -> None:
    global _live
    with _LIVE_LOCK:
        _live += step


@contextmanager
def recording(recorder: Recorder | None) -> Iterator[Recorder | None]:
    """Count this context's requests (and those of :class:`ContextExecutor` threads it starts) into ``recorder``."""
    token = _SINK.set(recorder)
    _open(1)
    try:
        yield recorder
    finally:
        _open(-1)
        _SINK.reset(token)


def enable_tagging(announce: Callable[[str], None] | None = None) -> None:
    """Look for the annotation on this process's tasks from now on (a worker plugin calls it on each worker).

    ``announce(token)`` is called the first time this process records a request of a count:
    the count can then tell a worker that recorded some and is gone from one that recorded none.
    """
    global _tagging, _announce
    _tagging = True
    _announce = announce


# -- worker side: recorders of annotated tasks -------------------------------
_TAGGED: dict[tuple[str, str], Recorder] = {}
_TAGGED_LOCK = threading.Lock()
_ANNOUNCED: set[str] = set()  # the counts this process has recorded for and not yet handed over
_announce: Callable[[str], None] | None = None


def _task_tag() -> tuple[str, str] | None:
    """The ``(token, stage)`` annotation of the Dask task running on this thread, if any."""
    worker_module = sys.modules.get("distributed.worker")
    if worker_module is None:  # not a Dask worker process (or none has run a task)
        return None
    key = getattr(worker_module.thread_state, "key", None)
    if key is None:
        return None
    try:
        ts = worker_module.get_worker().state.tasks.get(key)
    except (ValueError, AttributeError):
        return None
    tag = (ts.annotations or {}).get(ANNOTATION) if ts is not None else None
    return tuple(tag) if tag else None  # type: ignore[return-value]


def current_sink() -> Recorder | None:
    """Where a request made here is counted: :func:`recording`'s recorder, else the running task's."""
    sink = _SINK.get()
    if sink is not None or not _tagging:
        return sink
    tag = _task_tag()
    if tag is None:
        return None
    first = False
    with _TAGGED_LOCK:
        recorder = _TAGGED.get(tag)
        if recorder is None:
            recorder = _TAGGED[tag] = Recorder()
            first = tag[0] not in _ANNOUNCED
            _ANNOUNCED.add(tag[0])
    if first and _announce is not None:
        _announce(tag[0])
    return recorder


def pop_tagged(token: str) -> dict[str, dict[str, int]]:
    """The counts this process recorded for annotated tasks of ``token``, by stage, forgotten here.

    Run on every worker (``client.run``) when a count ends.
    """
    with _TAGGED_LOCK:
        mine = [tag for tag in _TAGGED if tag[0] == token]
        _ANNOUNCED.discard(token)
        return {tag[1]: _TAGGED.pop(tag).counts.to_json() for tag in mine}


# -- counting the contract ---------------------------------------------------
class _Frame:
    __slots__ = ("nested",)

    def __init__(self) -> None:
        self.nested = False


_FRAME: contextvars.ContextVar[_Frame | None] = contextvars.ContextVar("zv_request_frame", default=None)


def _pages(entries: int, page: int | None) -> int:
    return max(1, -(-entries // page)) if page else 1


def _batches(items: int, batch: int | None) -> int:
    return -(-items // batch) if batch else items


def _nbytes(values: Any) -> int:
    return sum(len(v) for v in values if v is not None)


def _listed(result: Any) -> int:
    sizes = getattr(result, "sizes", result)  # a Listing's objects, or a list / dict of entries
    return len(sizes) if sizes is not None else 0


Rule = Callable[[Any, tuple[Any, ...], Any], tuple[int, int, int, int, int, int, int]]

def _probe(storage: Any) -> tuple[int, ...]:
    """``probe``: nothing locally; remotely the one request the backend names."""
    if not storage.is_remote:
        return (0,) * 7
    return (0, 0, 1, 0, 0, 0, 0) if storage.reachability_probe == "LIST" else (0, 0, 0, 1, 0, 0, 0)


RULES: dict[str, Rule] = {
    # name: (GETs, PUTs, LISTs, HEADs, DELETEs, bytes read, bytes written)
    "get": lambda s, a, r: (1, 0, 0, 0, 0, len(r) if r else 0, 0),
    "get_many": lambda s, a, r: (len(r or ()), 0, 0, 0, 0, _nbytes(r or ()), 0),
    "get_decoded": lambda s, a, r: (len(a[0]), 0, 0, 0, 0, 0, 0),
    "get_ranges": lambda s, a, r: (len(a[0]), 0, 0, 0, 0, _nbytes(r or ()), 0),
    "exists": lambda s, a, r: (0, 0, 0, 1, 0, 0, 0),
    "probe": lambda s, a, r: _probe(s),
    "list_dir": lambda s, a, r: (0, 0, _pages(_listed(r), s.list_page_size), 0, 0, 0, 0),
    "list_dirs": lambda s, a, r: (0, 0, sum(_pages(len(x), s.list_page_size) for x in r or ()), 0, 0, 0, 0),
    "file_sizes": lambda s, a, r: (0, 0, _pages(_listed(r), s.list_page_size), 0, 0, 0, 0),
    "object_sizes": lambda s, a, r: (0, 0, _pages(_listed(r), s.list_page_size), 0, 0, 0, 0),
    "scan": lambda s, a, r: (0, 0, _pages(_listed(r), s.list_page_size), 0, 0, 0, 0),
    "put": lambda s, a, r: (0, 1, 0, 0, 0, 0, len(a[1])),
    "put_many": lambda s, a, r: (0, len(a[0]), 0, 0, 0, 0, _nbytes(a[0].values())),
    "delete": lambda s, a, r: (0, 0, 0, 0, 1, 0, 0),
    "delete_many": lambda s, a, r: (0, 0, 0, 0, _batches(len(a[0]), s.delete_batch), 0, 0),
    "delete_prefix": lambda s, a, r: (0, 0, 1, 0, 1, 0, 0),
    "move_many": lambda s, a, r: (0, len(a[0]), 0, 0, _batches(len(a[0]), s.delete_batch), 0, 0),
}
"""How each contract method counts, from ``(storage, positional arguments, result)``: the
fields of :class:`RequestCounts` in order (a tuple: built on every request)."""

ADDITIVE = frozenset({"delete_prefix", "move_many"})
"""Composite calls: their rule counts their own requests, beside the contract calls they make."""


def counted(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` (contract method ``name``) counting its requests by :data:`RULES`, innermost call only."""
    rule, additive = RULES[name], name in ADDITIVE

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not (_live or _tagging):  # nothing counts here now: the call as it is
            return method(self, *args, **kwargs)
        parent = _FRAME.get()
        if parent is not None:
            parent.nested = True
        frame = _Frame()
        token = _FRAME.set(frame)
        result = None
        try:
            result = method(self, *args, **kwargs)
            return result
        finally:
            _FRAME.reset(token)
            if additive or not frame.nested:
                sink = current_sink()
                if sink is not None:
                    sink._add(rule(self, args, result))

    wrapper.__zv_counted__ = True  # type: ignore[attr-defined]
    return wrapper


def count_contract(cls: type) -> None:
    """Wrap the contract methods ``cls`` itself defines (called by ``Storage.__init_subclass__``)."""
    for name in RULES:
        method = cls.__dict__.get(name)
        if callable(method) and not getattr(method, "__zv_counted__", False):
            setattr(cls, name, counted(name, method))


def _run_in(sink: Recorder | None, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    _SINK.set(sink)  # inside the copied context: gone when the call ends
    return fn(*args, **kwargs)


class ContextExecutor(ThreadPoolExecutor):
    """A thread pool whose calls run in the submitter's context, counted where the submitter's requests are.

    Every pool that storage calls go through must be one (``io_pool`` is), or their
    requests are not counted and nested calls are counted twice.  The context goes with
    every call, counted or not (``np.errstate``, a user's context variables), as dask's
    own threads carry it.
    """

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        context = contextvars.copy_context()
        if not (_live or _tagging):
            return super().submit(context.run, fn, *args, **kwargs)
        return super().submit(context.run, _run_in, current_sink(), fn, *args, **kwargs)
