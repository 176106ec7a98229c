"""Whether a cluster runs this package at the client's version.

The scheduler unpickles every graph, so without the package it refuses each one with
distributed's "Error during deserialization of the task graph", in whichever stage runs
first; a worker without it fails its tasks; one of another version computes with other
code, and the store it writes holds bytes of two versions with no error.  Every client is
asked once, before its first graph or scattered value (:func:`check_once`, called by the
runner), so a notebook's own ``Client`` is checked as the command line's is; workers that
join later are asked before the client's next graph (:mod:`zarr_vectors.execution.arrivals`).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import sys
import threading
import time
import warnings
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask
from dask.utils import parse_timedelta

from zarr_vectors.errors import InputError

#: the distribution whose code the tasks run: the client, the scheduler and every worker need one version of it
DISTRIBUTION = "zarr-vectors-dask"

#: per client already asked: None when its cluster passed, else the message it was refused with
_VERDICTS: weakref.WeakKeyDictionary[Any, str | None] = weakref.WeakKeyDictionary()
_ASKING = threading.Lock()  # one check at a time: a second thread waits for the verdict, never passes meanwhile
#: per client that passed (its cluster's joins logged): who was asked, who is to be
_WATCHED: weakref.WeakKeyDictionary[Any, _Watch] = weakref.WeakKeyDictionary()
#: where a warning is not the caller's: this project's packages, and contextlib's frames between them
_HERE = Path(__file__).resolve()
_OURS = (str(_HERE.parents[1]) + os.sep, str(_HERE.parents[2] / "pipeline") + os.sep, contextlib.__file__)


@dataclass
class _Watch:
    """A passed client's cluster: the workers asked so far, each with the number of the latest
    join it was asked after (a worker restarted at the same address joins again); those there
    when the watch began and not asked (each with its latest logged join, 0 if none); and the
    watch's snapshot (:class:`~zarr_vectors.execution.arrivals.Snapshot`, typed loosely:
    distributed is imported only once a client exists)."""

    asked: dict[str, int]
    unasked: dict[str, int]
    snapshot: Any


def check_once(client: Any, *, joined: bool = True) -> None:
    """:func:`check_cluster` before ``client``'s first graph or scattered value (the runner's),
    and, with ``joined``, the workers that joined since, before each later graph (a scattered
    value runs no code); a refused client is refused again.  A check that did not finish, or
    that no worker answered (a cluster still starting), is asked again at the next graph.
    Graphs computed outside the runner are not checked, nor is a worker that joins while a
    graph runs until the next graph."""
    if getattr(client, "asynchronous", False):  # its calls return coroutines: only the caller can await them
        return
    where = f"the scheduler at {client.scheduler.address!r}"
    with _ASKING:
        if client not in _VERDICTS:
            check_cluster(client, where)
        elif _VERDICTS[client] is None and joined:
            _check_arrivals(client, where)
    verdict = _VERDICTS.get(client)
    if verdict is not None:
        raise InputError(verdict)


def check_cluster(client: Any, where: str) -> None:
    """Refuse a cluster whose scheduler or workers do not have this package at the client's version.

    Asked through ``importlib.metadata`` (which every Python has: a function of ours could
    not be run where the package is missing), within one ``distributed.comm.timeouts.connect``
    in all.  Only answers refuse: a process that does not answer in time (a worker that died or
    is busy) is named in a warning and not checked.  Once the scheduler passed, and before the
    workers are asked, the scheduler starts logging the workers that join
    (:mod:`~zarr_vectors.execution.arrivals`: two more requests; it then pushes each join), which
    :func:`check_once` asks before the next graph.  Versions, not code: two builds of one
    version pass.
    """
    missing = importlib.metadata.PackageNotFoundError
    try:
        mine = importlib.metadata.version(DISTRIBUTION)
    except missing:  # run from a source tree: nothing to compare with
        warnings.warn(f"{DISTRIBUTION} is not installed in this environment (run from a source tree?): whether "
                      f"{where} runs the same version is not checked", stacklevel=_callers_level())
        _VERDICTS[client] = None
        return
    deadline = time.monotonic() + parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), "s")
    said = _scheduler_version(client, max(0.1, deadline - time.monotonic()))
    answers: dict[str, object] = {"the scheduler": said}
    # the joins' log starts before the workers are asked, so no worker joins unseen in between
    snapshot = None if isinstance(said, missing) or (isinstance(said, str) and said != mine) else _watch(client, where)
    try:
        workers = client.run(importlib.metadata.version, DISTRIBUTION, on_error="return",
                             callback_timeout=max(0.1, deadline - time.monotonic()))
        answers.update({f"worker {w}": v for w, v in sorted(workers.items())})
    except Exception as exc:  # noqa: BLE001 - no answer from some worker within the bound
        workers, answers["the workers"] = {}, exc
    _judge(client, where, mine, answers)
    if workers or "the workers" in answers:
        if snapshot is not None:
            # no answer at all (warned of): not asked again one by one; a worker there when the log
            # began and not asked is asked at the next graph, as are those that join later
            present = snapshot.present
            asked = {w: present.get(w, 0) for w in (present if "the workers" in answers else workers)}
            _WATCHED[client] = _Watch(asked, {w: n for w, n in present.items() if w not in asked}, snapshot)
        _VERDICTS[client] = None  # passed (silence warned of once); with no worker yet, the next graph asks again


def _scheduler_version(client: Any, timeout: float) -> object:
    """The scheduler's answer, its version or the error of asking (not installed, or no answer),
    which :func:`_judge` sorts out."""
    try:
        return client.run_on_scheduler(importlib.metadata.version, DISTRIBUTION, callback_timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - an answer (not installed) or none
        return exc


def _watch(client: Any, where: str) -> Any:
    """The snapshot :func:`arrivals.watch` begins with, or None (warned of: later workers go unasked)."""
    from zarr_vectors.execution.arrivals import watch  # a client exists: distributed is imported

    try:
        return watch(client)
    except Exception as exc:  # noqa: BLE001 - the check goes on; only later workers go unasked
        warnings.warn(f"{where}: cannot watch for workers that join ({type(exc).__name__}: {exc}), so their "
                      f"{DISTRIBUTION} version is not checked", stacklevel=_callers_level())
        return None


def _check_arrivals(client: Any, where: str) -> None:
    """Ask the workers that joined since ``client``'s check and are still there, as
    :func:`check_cluster` asks; when none did, no request (the scheduler pushed the joins)."""
    from zarr_vectors.execution.arrivals import departures

    watch = _WATCHED.get(client)
    if watch is None:
        return
    if getattr(client, "scheduler_comm", None) is not watch.snapshot.comm:
        _resume(client, where, watch)
    joins = {w: n for w, n in watch.snapshot.log.joins().items() if n > watch.asked.get(w, -1)}
    joins.update({w: n for w, n in watch.unasked.items() if w not in joins})  # never asked: not in ``asked``
    if not joins:
        return
    left = departures(client)  # one that joined and left would make the whole question time out
    new = sorted(w for w, n in joins.items() if left.get(w, 0) <= n)
    answers: dict[str, object] = {}
    if new:
        # the scheduler waits up to a connect timeout for each worker: the client waits longer, so
        # that an answer comes back for every worker, a silent one included
        timeout = 2 * parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), "s")
        try:
            workers = client.run(importlib.metadata.version, DISTRIBUTION, workers=new, on_error="return",
                                 callback_timeout=timeout)
            answers.update({f"worker {w}": v for w, v in sorted(workers.items())})
        except Exception as exc:  # noqa: BLE001 - no answer within the bound
            answers[f"the workers that joined ({', '.join(new)})"] = exc
    watch.asked.update(joins)  # asked, or gone; not before: an interrupted question is asked again
    watch.unasked.clear()
    if answers:
        _judge(client, f"{where} (workers that joined after its check)", importlib.metadata.version(DISTRIBUTION),
               answers)


def _resume(client: Any, where: str, watch: _Watch) -> None:
    """After a reconnection (the scheduler dropped the pushes while the client was away), the
    scheduler asked again (it may have been restarted from another image) and a new snapshot; from
    a scheduler that is not the one watched, nothing it holds was asked."""
    said = _scheduler_version(client, parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), "s"))
    _judge(client, f"{where} (after a reconnection)", importlib.metadata.version(DISTRIBUTION), {"the scheduler": said})
    snapshot = _watch(client, where)
    if snapshot is None:  # warned of; the next graph tries again
        return
    if snapshot.scheduler != watch.snapshot.scheduler:
        watch.asked.clear()
        watch.unasked = dict(snapshot.present)
    else:
        watch.unasked.update({w: n for w, n in snapshot.present.items() if w not in watch.asked})
    watch.snapshot = snapshot


def _judge(client: Any, where: str, mine: str, answers: dict[str, object]) -> None:
    """Refuse ``client`` (for good) if an answer is not ``mine``; warn of those that did not answer."""
    missing = importlib.metadata.PackageNotFoundError
    unanswered = {who: a for who, a in answers.items() if not isinstance(a, (str, missing))}
    if unanswered:
        warnings.warn(f"{where}: no answer within the connect timeout from "
                      + "; ".join(f"{who} ({type(a).__name__})" for who, a in unanswered.items())
                      + f", so their {DISTRIBUTION} version is not checked", stacklevel=_callers_level())
    wrong = {who: "not installed" if isinstance(a, missing) else a for who, a in answers.items()
             if who not in unanswered and a != mine}
    if wrong:
        said = "; ".join(f"{who}: {v}" for who, v in wrong.items())
        _VERDICTS[client] = (f"{where} cannot run this job: the client has {DISTRIBUTION} {mine}, but {said}. Install "
                             f"{DISTRIBUTION}=={mine} in the scheduler's and the workers' environment")
        raise InputError(_VERDICTS[client])


def _callers_level() -> int:
    """The ``stacklevel`` of the first frame outside this project (and contextlib): a warning names
    the user's line, whichever of our entry points asked."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_OURS):
        frame, level = frame.f_back, level + 1
    return level
