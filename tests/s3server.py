"""A moto S3 server on loopback that costs what an object store costs.

Loopback answers in well under a millisecond, which hides the round trips a real
object store charges tens of milliseconds for; code that issues one blocking request
after another looks fast there and is slow on S3.  This server wraps moto's WSGI app
in a middleware that sleeps ``latency_ms`` before answering each request (requests are
served on a pool of threads over kept-alive connections, so concurrent requests wait
concurrently, as on S3) and counts requests by method, so tests and benchmarks can
assert both.

In a test: the ``s3_endpoint`` / ``s3_latency_endpoint`` fixtures.  Beside a benchmark,
in its own process so the server does not share the client's GIL::

    python -m tests.s3server --latency-ms 20      # prints the endpoint URL, then serves

It serves until interrupted or until the process that started it is gone: a server left
behind by a killed benchmark kept a port and memory (and, before its loop waited, a core)
for the rest of the session.

``GET /__zv_requests__`` answers the counts as JSON; ``DELETE`` on it resets them.  A test
may make the in-process server misbehave (:class:`Fault`).  With
``--log FILE`` every request's arrival is a line (time, method, path), and an answer that
is not a success a second line (``-> 404 NOT FOUND``): a retried 5xx shows there.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TextIO

STATS_PATH = "/__zv_requests__"

Answer = tuple[str, list[tuple[str, str]], bytes]  # (status line, headers, body)
#: a fault's header: the Content-Length to send instead of the body's own
DECLARED_LENGTH = "X-Zv-Declared-Length"


@dataclass(frozen=True)
class Fault:
    """A misbehaviour the server injects, for tests of what a broken or hostile store does.

    A request ``matches`` accepts (method, path, query string) is answered by ``answer``,
    which gets the query string and a function returning moto's own answer to the request
    (if it asks), and returns the answer sent; it may also block, as a server that never
    answers.  In-process servers only: ``S3Server.middleware.faults`` (the ``s3_faults``
    fixture).
    """

    matches: Callable[[str, str, str], bool]
    answer: Callable[[str, Callable[[], Answer]], Answer]


class LatencyMiddleware:
    """Delay every request by ``latency_ms`` and count it by HTTP method.

    Each request thread counts into its own tally: a lock taken by every request makes the
    request threads queue on it at 0 ms (see :func:`_uncontended_backend_lookup`).
    """

    def __init__(self, app: Callable[..., Iterable[bytes]], latency_ms: float, log: TextIO | None = None) -> None:
        self.app = app
        self.latency_s = latency_ms / 1000.0
        self.log = log
        self._lock = threading.Lock()  # the list of tallies, the baseline, the log
        self._local = threading.local()
        self._tallies: list[Counter[str]] = []
        self._baseline: Counter[str] = Counter()
        self.faults: list[Fault] = []  # the first that matches a request answers it

    def _tally(self) -> Counter[str]:
        tally = getattr(self._local, "tally", None)
        if tally is None:
            tally = self._local.tally = Counter()
            with self._lock:
                self._tallies.append(tally)
        return tally

    def _total(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for tally in self._tallies:
            total.update(dict(tally))  # dict() copies in one step under the GIL
        return total

    def counts(self) -> dict[str, int]:
        """Requests since the last :meth:`reset`, by method."""
        with self._lock:
            return dict(self._total() - self._baseline)

    def reset(self) -> None:
        """Count from now on (no tally is cleared under a thread that is counting into it)."""
        with self._lock:
            self._baseline = self._total()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        if environ.get("PATH_INFO") == STATS_PATH:
            if method == "DELETE":
                self.reset()
            body = json.dumps(self.counts()).encode()
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        self._tally()[method] += 1
        # moto reads a key from RAW_URI, the path as sent, which werkzeug's server sets and
        # waitress does not (it sets REQUEST_URI alone): without it moto decoded the already
        # decoded PATH_INFO again, so a key holding `%` was stored as another key
        if "REQUEST_URI" in environ:
            environ.setdefault("RAW_URI", environ["REQUEST_URI"])
        if self.log is not None:  # when each request arrived: sequential rounds show as gaps
            query = environ.get("QUERY_STRING", "")
            with self._lock:
                self.log.write(f"{time.monotonic():.4f} {method} {environ.get('PATH_INFO')}{'?' + query if query else ''}\n")
        if self.latency_s:
            time.sleep(self.latency_s)
        path, query = environ.get("PATH_INFO", ""), environ.get("QUERY_STRING", "")
        fault = next((f for f in list(self.faults) if f.matches(method, path, query)), None)
        if fault is not None:
            return self._faulted(fault, environ, start_response)
        if self.log is None:
            return self.app(environ, start_response)
        path = environ.get("PATH_INFO")

        def logged(status: str, headers: Any, *rest: Any) -> Any:
            if not status.startswith(("2", "3")):
                with self._lock:
                    self.log.write(f"{time.monotonic():.4f} {method} {path} -> {status}\n")
            return start_response(status, headers, *rest)

        return self.app(environ, logged)

    def _faulted(self, fault: Fault, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        def moto() -> Answer:
            got: dict[str, Any] = {}

            def capture(status: str, headers: Any, *rest: Any) -> Callable[[bytes], None]:
                got["status"], got["headers"] = status, list(headers)
                return lambda data: None

            body = b"".join(self.app(environ, capture))
            return got["status"], got["headers"], body

        status, headers, body = fault.answer(environ.get("QUERY_STRING", ""), moto)
        # the body's own length, unless the fault declares another (DECLARED_LENGTH), a promise it breaks
        length = next((v for k, v in headers if k == DECLARED_LENGTH), str(len(body)))
        headers = [(k, v) for k, v in headers if k.lower() != "content-length" and k != DECLARED_LENGTH]
        start_response(status, [*headers, ("Content-Length", length)])
        return [body]


def boto_client(endpoint: str, config: Any = None) -> Any:
    """A boto3 S3 client of the server at ``endpoint`` (its test credentials), for a test to
    arrange or inspect a bucket beside the code it tests; ``config``: a ``botocore.config.Config``."""
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test",
                        region_name="us-east-1", config=config)  # fmt: skip


def _uncontended_backend_lookup() -> None:
    """Look up moto's per-account backends without its process-wide lock once they exist.

    moto takes one global lock on every ``s3_backends[account]`` lookup -- several per
    request, and IAM's once more to mark the account visited -- though each entry is
    created once.  With 64 request threads and no latency between requests, the threads
    queue on that lock: a graph shard (~9,200 requests) took 67--87 s at 0 ms and the
    server burned 2.5x the CPU, against 29--31 s with this lookup (docs/DESIGN.md).  An
    object store has no such lock.  moto's per-region lookup already checks before it
    locks; this does the same per account, and creation still runs under the lock.
    """
    from moto.core.base_backend import BackendDict

    create = getattr(BackendDict, "_create_account_specific_backend", None)
    if create is None:  # another moto: leave its lookup as it is
        return

    def lookup(self: BackendDict, account_id: str) -> Any:
        if not dict.__contains__(self, account_id):
            create(self, account_id)
        return dict.__getitem__(self, account_id)

    BackendDict.__getitem__ = lookup  # type: ignore[method-assign]


def _warm_up(endpoint: str) -> None:
    """Send one request of each kind the clients send, before they do.

    moto does first-use work in the request that first needs it (an error answer, say),
    and request threads that need it at once all do it, under one GIL: the first 60
    concurrent GETs of missing keys took 4.9 s on a fresh server, 0.1 s after one such GET.
    Whoever ran first paid it -- in ``benchmarks/s3.py`` our first pyramid (docs/DESIGN.md).
    """
    import base64
    import hashlib
    import urllib.error
    import urllib.request

    bucket = f"{endpoint}/zv-warm-up"
    delete = b"<Delete><Object><Key>b</Key></Object></Delete>"
    md5 = base64.b64encode(hashlib.md5(delete).digest()).decode()
    steps = [  # (method, url, body, headers, expected status)
        ("PUT", bucket, None, {}, 200),
        ("PUT", f"{bucket}/a", b"xy", {"Content-Type": "application/octet-stream"}, 200),
        ("GET", f"{bucket}/a", None, {}, 200),
        ("GET", f"{bucket}/a", None, {"Range": "bytes=0-0"}, 206),
        ("HEAD", f"{bucket}/a", None, {}, 200),
        ("PUT", f"{bucket}/b", b"", {"x-amz-copy-source": "/zv-warm-up/a"}, 200),
        ("GET", f"{bucket}?list-type=2&prefix=", None, {}, 200),
        ("GET", f"{bucket}/missing", None, {}, 404),
        ("HEAD", f"{bucket}/missing", None, {}, 404),
        ("POST", f"{bucket}?delete", delete, {"Content-MD5": md5, "Content-Type": "application/xml"}, 200),
        ("DELETE", f"{bucket}/a", None, {}, 204),
        ("DELETE", bucket, None, {}, 204),
        ("GET", f"{bucket}/missing", None, {}, 404),
    ]
    # moto answers an anonymous GET of a private object 403; it checks no signature
    signed = {"Authorization": "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/s3/aws4_request, "
                               "SignedHeaders=host, Signature=0"}
    for method, url, body, headers, expected in steps:
        request = urllib.request.Request(url, data=body, method=method, headers={**signed, **headers})
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                status = answer.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        if status != expected:
            raise RuntimeError(f"moto S3 warm-up: {method} {url} answered {status}, not {expected}")


def _connection_budget(wanted: int = 16384) -> int:
    """Connections the server may hold, raising the descriptor limit toward ``wanted``.

    waitress stops accepting at its ``connection_limit`` until an idle connection times out
    (120 s): at 1,024 the reference's graph stages, which open connections freely, stalled
    there and retried.  An object store takes every connection; this one takes as many as
    the process's descriptors allow, less room for moto's spooled bodies.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        soft = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return max(64, soft - 512)


def _channel_class() -> type:
    """waitress's connection class, made to answer a bodiless request that expects a 100 Continue.

    boto3 sends ``Expect: 100-continue`` on every PUT, an empty one too.  waitress 3.0 parses such
    a request as complete, then sends the 100 Continue and marks it incomplete again, so it is
    never served and the client times out.  An object store answers it; so does this server:
    a request already complete has nothing left to continue.
    """
    from waitress.channel import HTTPChannel
    from waitress.parser import HTTPRequestParser

    class Parser(HTTPRequestParser):
        def received(self, data: bytes) -> int:
            consumed = super().received(data)
            if self.completed:
                self.expect_continue = False
            return consumed

    class Channel(HTTPChannel):
        parser_class = Parser

    return Channel


class S3Server:
    """moto's S3 on 127.0.0.1 behind :class:`LatencyMiddleware`, served by waitress on a thread.

    waitress, not werkzeug's development server (what moto's own server uses): werkzeug
    closes the connection after every answer, so each request paid a TCP accept and a
    new handler thread under the server's GIL, and a client with many short rounds paid
    it on every round -- the reference's points read-all took 1.26 s there and 0.44 s
    here.  An object store keeps connections alive, as waitress does; its ``threads`` are
    the requests served at once (each sleeps the latency on its own).
    """

    #: requests served at once.  Not more: with 256 threads, all runnable at 0 ms, a request
    #: cost 3.5--5.5 ms of server CPU instead of ~1.2 (a graph read-all of 4,654 GETs: 16--34 s,
    #: against 5.2--6.7 s with 64 in the runs that followed; measured before the two locks every
    #: request took were gone, see :func:`_uncontended_backend_lookup`).  Requests beyond it
    #: queue; the server's CPU caps it near 800 requests/s anyway, well under 64 sleepers'
    #: 3,200/s at 20 ms.
    THREADS = 64

    def __init__(self, latency_ms: float = 0.0, port: int = 0, log: TextIO | None = None) -> None:
        from moto.moto_server.werkzeug_app import create_backend_app
        from waitress import create_server

        # moto's S3 app itself, not its all-services router (DomainDispatcherApplication): the
        # router picks a service per request under one global lock, listing moto's package
        # directory each time -- ~1.4 ms a request, serialised, which capped this server at
        # ~350 requests/s whatever the concurrency, where an object store serves requests in
        # parallel.  Only S3 is served here (docs/DESIGN.md).
        _uncontended_backend_lookup()
        self.middleware = LatencyMiddleware(create_backend_app("s3"), latency_ms, log)
        self._server = create_server(
            self.middleware, host="127.0.0.1", port=port, threads=self.THREADS,
            # poll(), not select(): a client that keeps hundreds of connections (the reference's
            # graph shard does) pushes the server's descriptors past select()'s 1024, which
            # ended the loop and refused every later connection.  The loop timeout is whole
            # seconds (waitress casts it to int: 0.2 was 0, a poll that never waits, and the
            # loop thread spun a core and the GIL from start to stop); stop() wakes the loop
            connection_limit=_connection_budget(), backlog=1024, asyncore_loop_timeout=1, asyncore_use_poll=True,
            ident="moto-s3", clear_untrusted_proxy_headers=True,
        )
        self._server.channel_class = _channel_class()
        self._thread = threading.Thread(target=self._server.run, daemon=True, name="moto-s3")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.effective_port}"

    def start(self) -> S3Server:
        """Serve on a thread, once moto's first-use work is done (its requests are not counted)."""
        self._thread.start()
        try:
            _warm_up(self.endpoint)
        except BaseException:
            self.stop()
            raise
        self.middleware.reset()
        return self

    def stop(self) -> None:
        """Close every socket from the server's own loop thread, which then ends (closing the
        listener alone leaves the connections in its map and the loop spinning on them), then
        stop the request threads."""
        from waitress import wasyncore

        try:
            self._server.trigger.pull_trigger(lambda: wasyncore.close_all(self._server._map))
        except OSError as exc:  # the wake-up pipe is gone (once in CI: EBADF); close from here instead
            print(f"tests.s3server: cannot wake the server's loop ({exc}); closing its sockets from the caller",
                  file=sys.stderr, flush=True)
            wasyncore.close_all(self._server._map, ignore_all=True)
        self._thread.join(timeout=30)
        if self._thread.is_alive():
            raise RuntimeError("the moto S3 server's loop did not stop")
        self._server.task_dispatcher.shutdown()  # its request threads (run() stops them only on ^C)

    def requests(self) -> dict[str, int]:
        """Requests served since the last :meth:`reset`, by HTTP method."""
        return self.middleware.counts()

    def reset(self) -> None:
        self.middleware.reset()


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs; a zombie (exited, not yet reaped) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:  # no /proc (macOS): the signal's answer is all there is
        return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", type=argparse.FileType("w", bufsize=1), help="write one line per request: time, method, path")
    parser.add_argument("--parent-pid", type=int, default=None,
                        help="serve while this process lives (default: the parent at start-up; pass it "
                             "when the starter may exit before this interpreter is up)")
    args = parser.parse_args(argv)
    parent = args.parent_pid if args.parent_pid is not None else os.getppid()
    server = S3Server(args.latency_ms, args.port, args.log).start()
    print(server.endpoint, flush=True)
    try:
        while server._thread.is_alive():
            server._thread.join(timeout=1.0)
            if not _alive(parent):  # orphaned (the benchmark or test that started it died): stop
                print(f"tests.s3server: parent {parent} is gone; stopping", file=sys.stderr, flush=True)
                server.stop()
    except KeyboardInterrupt:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
