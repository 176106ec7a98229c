"""A fork server: imports the package once, then forks a child per case and per target.

``python -m <this package>.forkserver`` is started by :class:`Server` with a fixed
environment (one BLAS thread, ``DASK_SCHEDULER=threads`` so ``zv validate`` starts no
cluster, ``MALLOC_ARENA_MAX=2`` so the address-space cap measures data rather than
per-thread malloc arenas).  It imports numpy, dask, every module of ``zarr_vectors`` and
``pipeline`` and installs the audit hook before any thread exists, then:

- builds the seed stores in a forked child (the writers start thread pools: never in
  the server) and loads their baselines;
- per case, forks a *case child*: copies the seed to a scratch directory (tmpfs when
  there is one), applies the mutation, then forks one *target child* per target, each
  with ``RLIMIT_AS`` set to the cap, a timeout (faulthandler dumps every thread's stack
  just before it, so a hang names its line) and the audit watch on; the case child
  judges the targets' reports (``oracle.judge``) and sends one JSON result back.

Protocol: JSON lines on stdin (commands) and on the original stdout (replies); fd 1 is
pointed at /dev/null so that nothing a target prints can corrupt the protocol.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

THREAD_ENV = {
    "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "NUMEXPR_NUM_THREADS": "1",
    "BLOSC_NTHREADS": "1", "MALLOC_ARENA_MAX": "2", "PYTHONHASHSEED": "0", "DASK_SCHEDULER": "threads",
    "JE_ARROW_MALLOC_CONF": "background_thread:false",  # pyarrow (imported by pandas) else starts a jemalloc thread
}
GiB = 1 << 30


def scratch_root() -> str:
    """tmpfs when the machine has one (a case copies a store and may create 5,000 files)."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else "/tmp"


# =======================================================================================
# controller side
# =======================================================================================
class Server:
    """The fork server process, driven over pipes."""

    def __init__(self) -> None:
        package = __package__ or "fuzz"
        top = Path(__file__).resolve().parents[len(package.split("."))]
        env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}
        env.update(THREAD_ENV)
        # the repository first: under pytest ``top`` is tests/, whose pipeline/ folder (no
        # __init__) would otherwise shadow the installed ``pipeline`` package as a namespace
        repo = Path(__file__).resolve().parents[2]
        env["PYTHONPATH"] = os.pathsep.join([str(repo), str(top), *filter(None, [env.get("PYTHONPATH")])])
        self.proc = subprocess.Popen([sys.executable, "-m", f"{package}.forkserver"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env, cwd=str(top))
        self._expect("ready")

    def _send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()

    def _lines(self) -> Iterator[dict[str, Any]]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            yield json.loads(line)
        raise RuntimeError(f"fork server exited with {self.proc.wait()}")

    def _expect(self, key: str) -> dict[str, Any]:
        for msg in self._lines():
            if "error" in msg:
                raise RuntimeError(f"fork server: {msg['error']}")
            if key in msg:
                return msg
        raise AssertionError("unreachable")

    def seeds(self, root: str) -> dict[str, list[int]]:
        """Build the seed stores under ``root``; ``{name: levels}``."""
        self._send({"cmd": "seeds", "root": root})
        return self._expect("seeds")["seeds"]

    def run(self, cases: list[dict[str, Any]], *, jobs: int = 2, timeout: float = 10.0, mem_cap: int = 3 * GiB,
            rss_bound: int = 1 * GiB, workdir: str, skip_after_hang: bool = False, keep: bool = False,
            on_result: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
        """Run ``cases`` (``{"seed", "op", "rng"}``), ``jobs`` at a time; results in case order.

        ``skip_after_hang``: once a target of a case hangs, skip the case's remaining
        targets (bounds a corpus's time when hangs are expected); ``keep``: leave every
        case's mutated store on disk."""
        self._send({"cmd": "run", "cases": cases, "jobs": jobs, "timeout": timeout, "mem_cap": mem_cap,
                    "rss_bound": rss_bound, "workdir": workdir, "skip_after_hang": skip_after_hang, "keep": keep})
        out: dict[int, dict[str, Any]] = {}
        for msg in self._lines():
            if "error" in msg:
                raise RuntimeError(f"fork server: {msg['error']}")
            if "result" in msg:
                out[msg["result"]["id"]] = msg["result"]
                if on_result:
                    on_result(msg["result"])
            elif "done" in msg:
                break
        return [out[i] for i in sorted(out)]

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self._send({"cmd": "exit"})
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# =======================================================================================
# server side
# =======================================================================================
class _State:
    seeds: dict[str, Any] = {}
    inventories: dict[str, Any] = {}
    proto: int = 1


def _reply(msg: dict[str, Any]) -> None:
    data = (json.dumps(msg, default=str) + "\n").encode()
    while data:
        data = data[os.write(_State.proto, data):]


def _import_everything() -> None:
    """Every module the targets may import lazily, imported now (a child imports nothing)."""
    import importlib
    import pkgutil

    import numcodecs
    import numcodecs.blosc
    import numpy  # noqa: F401

    numcodecs.blosc.use_threads = False  # blosc's own thread pool would not survive a fork
    import dask  # noqa: F401
    import dask.array  # noqa: F401

    for name in ("zarr_vectors", "pipeline"):
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, f"{name}."):
            importlib.import_module(info.name)
    import google_crc32c  # noqa: F401


def _native_threads() -> int:
    return len(os.listdir("/proc/self/task"))


def serve() -> None:
    _import_everything()
    from . import ops_bytes, oracle
    from .operators import load_all

    load_all()
    ops_bytes.prepare()
    oracle.install()
    oracle.instrument_validator()
    import gc

    gc.freeze()  # the imported objects: a child's collections then leave their pages shared (fewer copies)
    _State.proto = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    threads = _native_threads()
    if threads != 1:
        names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]
        _reply({"error": f"{threads} native threads ({names}) after the imports: forking would copy a broken state"})
        return
    _reply({"ready": True})
    for line in sys.stdin:
        msg = json.loads(line)
        try:
            if msg["cmd"] == "exit":
                return
            if msg["cmd"] == "seeds":
                _build_seeds(msg["root"])
                _reply({"seeds": {k: v["levels"] for k, v in _State.seeds.items()}})
            elif msg["cmd"] == "run":
                _run_cases(msg)
                _reply({"done": True})
        except Exception as exc:  # noqa: BLE001 - report, keep serving
            import traceback

            _reply({"error": "".join(traceback.format_exception(exc))})


def _build_seeds(root: str) -> None:
    from . import seeds, storeio

    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            seeds.build(root)
        except BaseException:  # noqa: BLE001
            import traceback

            traceback.print_exc()
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError("building the seed stores failed (traceback on stderr)")
    _State.seeds = seeds.load(root)
    _State.inventories = {name: storeio.inventory(v["path"]) for name, v in _State.seeds.items()}
    if _native_threads() != 1:
        raise RuntimeError("the server started a thread while loading the seeds")


def _run_cases(msg: dict[str, Any]) -> None:
    jobs, timeout = max(1, int(msg["jobs"])), float(msg["timeout"])
    pending = list(enumerate(msg["cases"]))
    active: dict[int, dict[str, Any]] = {}
    while pending or active:
        while pending and len(active) < jobs:
            idx, case = pending.pop(0)
            levels = len(_State.seeds.get(case["seed"], {}).get("levels", [0]))
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                _case_child(idx, case, msg, w)  # never returns
            os.close(w)
            active[r] = {"pid": pid, "id": idx, "case": case, "buf": b"", "start": time.monotonic(),
                         "deadline": time.monotonic() + (levels + 2) * (2 * timeout + 10) + 120}
        ready, _, _ = select.select(list(active), [], [], 1.0)
        for fd in ready:
            chunk = os.read(fd, 1 << 16)
            if chunk:
                active[fd]["buf"] += chunk
                continue
            job = active.pop(fd)
            os.close(fd)
            os.waitpid(job["pid"], 0)
            _reply({"result": _parse_case(job)})
        for fd, job in list(active.items()):
            if time.monotonic() > job["deadline"]:
                _kill_group(job["pid"])
                active.pop(fd)
                os.close(fd)
                os.waitpid(job["pid"], 0)
                job["buf"] = b""
                _reply({"result": _parse_case(job, note="the case as a whole timed out")})


def _kill_group(pid: int) -> None:
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except OSError:
            pass


def _parse_case(job: dict[str, Any], note: str = "") -> dict[str, Any]:
    try:
        result = json.loads(job["buf"])
    except ValueError:
        result = {"id": job["id"], "case": job["case"], "class": "HARNESS", "targets": {},
                  "failures": [{"class": "HARNESS", "target": "case", "signature": "case child died",
                                "message": note or "no result from the case child", "tail": ""}]}
    result["seconds"] = round(time.monotonic() - job["start"], 3)
    return result


# ---------------------------------------------------------------------------------------
# the case child
# ---------------------------------------------------------------------------------------
def _case_child(idx: int, case: dict[str, Any], cfg: dict[str, Any], out_fd: int) -> None:
    code = 0
    try:
        os.setsid()
        result = _run_one(idx, case, cfg)
    except BaseException as exc:  # noqa: BLE001
        import traceback

        result = {"id": idx, "case": case, "class": "HARNESS", "targets": {}, "failures": [
            {"class": "HARNESS", "target": "case", "signature": f"harness: {type(exc).__name__}",
             "message": str(exc)[:400], "tail": "".join(traceback.format_exception(exc))[-2000:]}]}
        code = 1
    data = json.dumps(result, default=str).encode()
    while data:
        data = data[os.write(out_fd, data):]
    os._exit(code)


def _run_one(idx: int, case: dict[str, Any], cfg: dict[str, Any]) -> dict[str, Any]:
    from . import oracle
    from .operators import OPERATORS, mutate

    seed = _State.seeds[case["seed"]]
    casedir = Path(cfg["workdir"]) / f"case-{idx}"
    if casedir.exists():
        shutil.rmtree(casedir)
    store, outside = casedir / "store", casedir / "outside"
    casedir.mkdir(parents=True)
    outside.mkdir()
    shutil.copytree(seed["path"], store, symlinks=True)
    result: dict[str, Any] = {"id": idx, "case": case, "targets": {}}
    try:
        if case["op"] == "identity":
            result["desc"] = "unmutated copy of the seed"
        else:
            result["desc"] = mutate(OPERATORS[case["op"]], store, outside, _State.inventories[case["seed"]],
                                    int(case["rng"]), case["seed"])
    except Exception as exc:  # noqa: BLE001 - a fuzzer bug, reported as such
        result.update({"class": "HARNESS", "failures": [
            {"class": "HARNESS", "target": "mutation", "signature": f"mutation {case['op']}: {type(exc).__name__}",
             "message": str(exc)[:400], "tail": oracle.tail(exc)}]})
        shutil.rmtree(casedir, ignore_errors=True)
        return result
    targets = ["validate", *[f"read:{n}" for n in seed["levels"]], "cli"]
    reports = {}
    for name in targets:
        if cfg.get("skip_after_hang") and any(f["class"] == "HANG" for r in reports.values() for f in r["failures"]):
            reports[name] = {"outcome": "skipped", "failures": []}  # an earlier target hung: bound the case's time
            continue
        reports[name] = _target(name, str(store), seed, {**cfg, "fake": case.get("fake")}, casedir)
    cls, failures = oracle.judge(reports)
    result.update({"class": cls, "failures": failures,
                   "targets": {k: {x: v[x] for x in ("outcome", "ok", "errors", "error", "differs", "rc",
                                                      "maxrss_mb", "vmpeak_mb", "seconds") if x in v}
                               for k, v in reports.items()}})
    if not cfg.get("keep"):
        shutil.rmtree(casedir, ignore_errors=True)
    else:
        result["kept"] = str(casedir)
    return result


def _target(name: str, store: str, seed: dict[str, Any], cfg: dict[str, Any], casedir: Path) -> dict[str, Any]:
    """Run one target in a forked child with the cap, the timeout and the watch; its report."""

    timeout = float(cfg["timeout"])
    stack_file = casedir / f"{name.replace(':', '-')}.stack"
    r, w = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        _target_child(name, store, seed, cfg, w, stack_file)
    os.close(w)
    buf, hung = b"", False
    deadline = start + timeout + max(5.0, timeout)  # faulthandler fires at `timeout`; this is the backstop
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            hung = True
            os.kill(pid, signal.SIGKILL)
            break
        ready, _, _ = select.select([r], [], [], left)
        if ready:
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            buf += chunk
    os.close(r)
    _, status, usage = os.wait4(pid, 0)
    seconds = time.monotonic() - start
    report: dict[str, Any] = {"failures": []}
    escapes = []
    for line in buf.decode(errors="replace").splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if "escape" in msg:
            escapes.append(msg["escape"])
        elif "result" in msg:
            report = msg["result"]
    stack = stack_file.read_text(errors="replace") if stack_file.exists() else ""
    if "outcome" not in report:
        if stack or hung or seconds >= timeout:
            site = _hang_site(stack) if stack else "? (no stack: killed by the backstop)"
            report["failures"].append({"class": "HANG", "target": name, "signature": f"HANG in {name} at {site}",
                                       "message": f"no result after {seconds:.1f} s",
                                       "tail": _stack_tail(stack)})
        else:
            sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
            what = f"killed by {signal.Signals(sig).name}" if sig else f"exited {os.waitstatus_to_exitcode(status)}"
            report["failures"].append({"class": "CRASH", "target": name, "signature": f"{name} child {what}",
                                       "message": f"{name}: the child {what} without a report", "tail": ""})
        report["outcome"] = "died"
    counts = report.pop("escape_counts", {})
    for e in escapes:
        n = counts.get(f"{e['event']} {e['where']}", 1)
        report["failures"].append({"class": "ESCAPE", "target": name, "signature": f"ESCAPE {e['event']} at "
                                   f"{e['where']}", "message": f"{e['event']} {e['path']} -> {e['real']}"
                                   + (f" (and {n - 1} more like it)" if n > 1 else ""), "tail": ""})
    rss = usage.ru_maxrss * 1024
    report["maxrss_mb"] = round(rss / 2**20, 1)
    report["seconds"] = round(seconds, 3)
    if rss > int(cfg["rss_bound"]) and not any(f["class"] == "MEMORY" for f in report["failures"]):
        report["failures"].append({"class": "MEMORY", "target": name, "signature": f"MEMORY peak RSS in {name}",
                                   "message": f"peak RSS {rss / 2**20:.0f} MiB > bound "
                                              f"{int(cfg['rss_bound']) / 2**20:.0f} MiB", "tail": ""})
    return report


def _target_child(name: str, store: str, seed: dict[str, Any], cfg: dict[str, Any], fd: int, stack_file: Path) -> None:
    import faulthandler
    import resource

    from . import oracle

    try:
        os.chdir(store)
        stack = open(stack_file, "w")  # noqa: SIM115 - faulthandler writes it from its watchdog thread
        faulthandler.dump_traceback_later(float(cfg["timeout"]), exit=True, file=stack)
        cap = int(cfg["mem_cap"])
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        if cfg.get("fake"):
            from . import fakes

            fakes.install(cfg["fake"])
        watch = oracle.watch(store, fd)
        try:
            if name == "validate":
                report = oracle.run_validate(store)
            elif name == "cli":
                report = oracle.run_cli(store)
            else:
                level = int(name.split(":")[1])
                report = oracle.run_read(store, level, seed["baseline"].get(level))
        finally:
            oracle._WATCH = None
        report["escape_counts"] = {f"{e['event']} {e['where']}": e["count"] for e in watch.escapes.values()}
        report["vmpeak_mb"] = _vmpeak_mb()
        data = (json.dumps({"result": report}, default=str) + "\n").encode()
        while data:
            data = data[os.write(fd, data):]
    except BaseException as exc:  # noqa: BLE001 - the harness itself failed in the child
        try:
            os.write(fd, (json.dumps({"result": {"outcome": "harness", "failures": [
                {"class": "MEMORY" if oracle.is_memory(exc) else "CRASH", "target": name,
                 "signature": f"{name} (outside the target): {type(exc).__name__}", "message": str(exc)[:400],
                 "tail": oracle.tail(exc)}]}}) + "\n").encode())
        except BaseException:  # noqa: BLE001
            pass
    os._exit(0)


def _vmpeak_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmPeak:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _hang_site(stack: str) -> str:
    """The line a hung target was on: the innermost project frame of the thread that is in
    project code at its top (a blocked open, a spinning loop), else of any thread."""
    from . import oracle

    threads, current = [], []
    for line in stack.splitlines():
        line = line.strip()
        if line.startswith(("Thread ", "Current thread ")):
            current = []
            threads.append(current)
        elif line.startswith("File ") and threads:
            # File "/path.py", line 12 in func   (most recent call first)
            try:
                path = line.split('"')[1]
                rest = line.split('", line ')[1]
                lineno, func = rest.split(" in ", 1)
                current.append((path, int(lineno), func))
            except (IndexError, ValueError):
                continue
    for t in threads:
        if t and oracle.project_frame([t[0]]):
            found = oracle.project_frame([t[0]])
            return f"{found[0]}:{found[1]} ({found[2]})"
    busy = [t for t in threads if t and not any(w in t[0][0] for w in _WAITING)]
    for t in busy + [t for t in threads if t not in busy]:
        found = oracle.project_frame(list(reversed(t)))
        if found:
            return f"{found[0]}:{found[1]} ({found[2]})"
    if busy:  # outside the project's code: the top of the first busy thread
        path, line, func = busy[0][0]
        return f"{os.path.relpath(path, oracle.REPO) if path.startswith(oracle.REPO) else path}:{line} ({func})"
    return "?"


#: modules whose frame on top of a thread means it is waiting for another thread
_WAITING = ("threading.py", "queue.py", "concurrent/futures", "selectors.py", "dask/local.py", "faulthandler")


def _stack_tail(stack: str) -> str:
    return "\n".join(stack.strip().splitlines()[:30])


if __name__ == "__main__":
    serve()
