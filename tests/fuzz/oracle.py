"""What one target does in its forked child, what it watches, and how a case is judged.

Targets: ``validate`` (``zarr_vectors.validate(path, 5)``), ``read:N`` (``zarr_vectors.read
(path, level=N)`` for every level of the seed) and ``cli`` (``zv validate PATH --json``,
``pipeline.cli.main`` in the child).  While a target runs, a Python audit hook
(:func:`install`, inherited by every fork) resolves each path the process opens or lists
-- events ``open`` (``builtins.open``, ``io.open``, ``os.open``), ``os.listdir``,
``os.scandir`` and the writing ones -- and reports an ESCAPE when it leads to an existing
object outside the store and outside :func:`allowed_roots` (the interpreter and the code
being run).  Opens with ``O_NOFOLLOW`` of a symlink, and of paths that do not exist, open
nothing and are not escapes; relative paths (``os.open(name, dir_fd=...)`` carries no
directory in the event) are resolved against the working directory, which the child sets
to the store root, so only a ``..`` can lead them out.

Classes, worst first: ESCAPE, MEMORY, HANG, CRASH, WRONG, OK (docs/DESIGN.md, *Store fuzzer*).
"""

from __future__ import annotations

import io
import json
import os
import sys
import traceback
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from typing import Any

CLASSES = ("ESCAPE", "MEMORY", "HANG", "CRASH", "WRONG", "OK")
#: the failure classes (every class but OK); HARNESS is a mutation that failed (a fuzzer bug)
FAILURES = ("ESCAPE", "MEMORY", "HANG", "CRASH", "WRONG", "HARNESS")

WATCHED = frozenset({
    "open", "os.listdir", "os.scandir", "glob.glob", "os.mkdir", "os.remove", "os.rename", "os.rmdir",
    "os.symlink", "os.link", "os.truncate", "os.chmod", "os.utime", "shutil.rmtree", "shutil.copyfile",
})
_CREATING = ("os.mkdir", "os.rename", "os.symlink", "os.link")
#: events that act on the directory entry itself (a link is not followed): resolved by their parent
_ENTRY = frozenset({"os.mkdir", "os.remove", "os.rename", "os.rmdir", "os.symlink", "os.link", "shutil.rmtree"})
_MEMORY_WORDS = ("memory", "can't start new thread", "cannot allocate", "alloc")


def _project_roots() -> tuple[str, ...]:
    import pipeline
    import zarr_vectors

    return tuple(os.path.realpath(os.path.dirname(m.__file__)) + os.sep for m in (zarr_vectors, pipeline))


PROJECT = _project_roots()
REPO = os.path.dirname(PROJECT[0].rstrip(os.sep))


def allowed_roots() -> tuple[str, ...]:
    """Where a target may open files outside the store: the Python installation and venv,
    the project's own packages (lazy imports) and this package.  Nothing else."""
    roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    roots |= {r.rstrip(os.sep) for r in PROJECT}
    roots.add(os.path.realpath(os.path.dirname(__file__)))
    return tuple(sorted(r + os.sep for r in roots))


def project_frame(frames: list[tuple[str, int, str]]) -> tuple[str, int, str] | None:
    """The innermost frame in the project's code, from frames listed outermost first."""
    for filename, line, func in reversed(frames):
        if os.path.realpath(filename).startswith(PROJECT):
            return os.path.relpath(os.path.realpath(filename), REPO), line, func
    return None


def where(exc: BaseException) -> str:
    frames = [(f.filename, f.lineno or 0, f.name) for f in traceback.extract_tb(exc.__traceback__)]
    found = project_frame(frames) or (frames[-1] if frames else ("?", 0, "?"))
    return f"{found[0]}:{found[1]} ({found[2]})"


def tail(exc: BaseException, lines: int = 12) -> str:
    text = "".join(traceback.format_exception(exc))
    return "\n".join(text.rstrip().splitlines()[-lines:])


def is_memory(exc: BaseException | str) -> bool:
    if isinstance(exc, MemoryError):
        return True
    text = str(exc).lower()
    return any(w in text for w in _MEMORY_WORDS)


# ---------------------------------------------------------------------------------------
# the audit hook
# ---------------------------------------------------------------------------------------
@dataclass
class Watch:
    store: str  # real path of the store root
    allowed: tuple[str, ...]
    fd: int  # escapes are written here as they happen (a hang must not lose them)
    escapes: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # by (event, where), counted

    def inside(self, real: str) -> bool:
        return real == self.store or real.startswith(self.store + os.sep) or real.startswith(self.allowed)

    def check(self, event: str, args: tuple[Any, ...]) -> None:
        flags = args[2] if event == "open" and len(args) > 2 and isinstance(args[2], int) else 0
        paths = args[:2] if event in ("os.rename", "os.link") else args[1:2] if event == "os.symlink" else args[:1]
        for p in paths:
            real = self._resolve(event, p, flags)
            if real is not None and not self.inside(real):
                self._report(event, p, real)

    def _resolve(self, event: str, p: Any, flags: int) -> str | None:
        if isinstance(p, int):
            try:
                return os.readlink(f"/proc/self/fd/{p}")
            except OSError:
                return None
        try:
            text = os.fsdecode(p)
        except TypeError:
            return None
        full = text if os.path.isabs(text) else os.path.join(os.getcwd(), text)
        if event == "open" and flags & os.O_NOFOLLOW and os.path.islink(full):
            return None  # the kernel refuses: ELOOP
        if event in _ENTRY:
            parent, name = os.path.split(full.rstrip(os.sep))
            return os.path.join(os.path.realpath(parent), name)
        real = os.path.realpath(full)
        creating = event in _CREATING or (event == "open" and flags & os.O_CREAT)
        if not creating and not os.path.exists(real):
            return None  # opens nothing (missing, dangling or looping)
        return real

    def _report(self, event: str, p: Any, real: str) -> None:
        frames = []
        f = sys._getframe(3)
        while f is not None:
            frames.append((f.f_code.co_filename, f.f_lineno, f.f_code.co_name))
            f = f.f_back
        frames.reverse()
        found = project_frame(frames)
        at = f"{found[0]}:{found[1]} ({found[2]})" if found else "?"
        seen = self.escapes.get((event, at))
        if seen is not None:  # one report per event and line (a walk of / lists thousands)
            seen["count"] += 1
            return
        item = {"event": event, "path": os.fsdecode(p) if not isinstance(p, int) else f"fd {p}", "real": real,
                "where": at, "count": 1}
        self.escapes[(event, at)] = item
        try:
            os.write(self.fd, (json.dumps({"escape": item}) + "\n").encode())
        except OSError:
            pass


_WATCH: Watch | None = None


def _hook(event: str, args: tuple[Any, ...]) -> None:
    watch = _WATCH
    if watch is None or event not in WATCHED:
        return
    try:
        watch.check(event, args)
    except Exception:  # noqa: BLE001 - the hook must never change what the target does
        pass


def install() -> None:
    """Add the audit hook (once, in the fork server: every case and target inherits it)."""
    sys.addaudithook(_hook)


def watch(store: str, fd: int) -> Watch:
    global _WATCH
    _WATCH = Watch(os.path.realpath(store), allowed_roots(), fd)
    return _WATCH


# ---------------------------------------------------------------------------------------
# *_CHECK_CRASHED: where the exception the validator turned into a finding was raised
# ---------------------------------------------------------------------------------------
CRASH_SITES: list[tuple[str, str, str]] = []  # (exception text as the finding quotes it, where, traceback tail)


def instrument_validator() -> None:
    """Wrap ``validation.findings.crashed`` (and its imported copies) to record where each
    exception it reports was raised.  The finding itself is unchanged."""
    from zarr_vectors.validation import findings

    original = getattr(findings, "crashed", None)
    if original is None or getattr(original, "__wrapped__", None):
        return

    def crashed(level: int, node: str, exc: BaseException, **kw: Any) -> Any:
        CRASH_SITES.append((f"{type(exc).__name__}: {exc}", where(exc), tail(exc)))
        return original(level, node, exc, **kw)

    crashed.__wrapped__ = original  # type: ignore[attr-defined]
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("zarr_vectors.validation") and \
                getattr(module, "crashed", None) is original:
            module.crashed = crashed  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------
# targets (in the target child); each returns a JSON-able dict
# ---------------------------------------------------------------------------------------
def _failure(cls: str, target: str, signature: str, message: str, detail: str = "") -> dict[str, Any]:
    return {"class": cls, "target": target, "signature": signature, "message": message[:400], "tail": detail}


def _exception(target: str, exc: BaseException, *, escaping: str) -> dict[str, Any]:
    cls = "MEMORY" if is_memory(exc) else "CRASH"
    return _failure(cls, target, f"{escaping}: {type(exc).__name__} at {where(exc)}", f"{type(exc).__name__}: {exc}",
                    tail(exc))


def run_validate(store: str) -> dict[str, Any]:
    import zarr_vectors as zv

    try:
        result = zv.validate(store, 5)
    except zv.StoreNotFoundError as exc:  # documented: nothing at the location
        return {"outcome": "typed", "error": f"{type(exc).__name__}: {exc}", "failures": []}
    except Exception as exc:  # noqa: BLE001
        return {"outcome": "raised", "failures": [_exception("validate", exc, escaping="escapes validate()")]}
    failures = []
    for f in (f for f in result.findings if f.code.endswith("_CHECK_CRASHED")):
        detail, at, trace = next(((d, w, t) for d, w, t in CRASH_SITES if d in f.message), ("", "?", ""))
        kind = detail.split(":")[0] or f.message.split("crashed: ")[-1].split(":")[0]
        cls = "MEMORY" if is_memory(f.message) else "CRASH"
        failures.append(_failure(cls, "validate", f"{f.code} {kind} at {at}", f.line(), trace))
    return {"outcome": "result", "ok": result.ok, "errors": sorted({f.code for f in result.findings
                                                                    if f.severity == "error"}), "failures": failures}


def run_read(store: str, level: int, baseline: dict[str, Any] | None) -> dict[str, Any]:
    import zarr_vectors as zv

    from .seeds import differs, snapshot

    target = f"read:{level}"
    try:
        data = zv.read(store, level=level)
    except zv.ZarrVectorsError as exc:
        return {"outcome": "typed", "error": f"{type(exc).__name__}: {str(exc)[:300]}", "failures": []}
    except Exception as exc:  # noqa: BLE001
        return {"outcome": "raised", "failures": [_exception(target, exc, escaping="untyped from read()")]}
    why = differs(snapshot(data), baseline) if baseline is not None else "level not in the seed"
    return {"outcome": "data", "differs": why, "failures": []}


def run_cli(store: str) -> dict[str, Any]:
    from pipeline.cli import main

    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            rc = main(["validate", store, "--json"])
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 2
    except Exception as exc:  # noqa: BLE001 - a traceback out of zv
        return {"outcome": "raised", "failures": [_exception("cli", exc, escaping="traceback from zv validate")]}
    failures = []
    if rc not in (0, 1, 2):
        failures.append(_failure("CRASH", "cli", f"zv validate exit {rc}", err.getvalue()[-400:]))
    elif rc in (0, 1):
        lines = [line for line in out.getvalue().splitlines() if line.strip()]
        try:
            doc = json.loads(lines[0]) if len(lines) == 1 else None
        except ValueError:
            doc = None
        if not isinstance(doc, dict) or doc.get("ok") is not (rc == 0):
            failures.append(_failure("CRASH", "cli", f"zv validate exit {rc} without one JSON verdict",
                                     out.getvalue()[:400]))
        elif isinstance(doc.get("error"), dict):  # the run failed instead of reporting findings
            error = doc["error"]
            failures.append(_failure("CRASH", "cli", f"zv validate failed: {error.get('type')}",
                                     f"{error.get('type')}: {error.get('message')}", err.getvalue()[-400:]))
    return {"outcome": "exit", "rc": rc, "stderr": err.getvalue()[-300:], "failures": failures}


# ---------------------------------------------------------------------------------------
# judging a case from its targets' reports
# ---------------------------------------------------------------------------------------
def judge(targets: dict[str, dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """The case's class and its failures (each target's, plus WRONG from read vs validate)."""
    failures = [f for t in targets.values() for f in t.get("failures", [])]
    check = targets.get("validate", {})
    if check.get("outcome") == "result" and not check.get("ok"):
        for name, t in targets.items():
            if name.startswith("read:") and t.get("outcome") == "data" and t.get("differs"):
                failures.append(_failure("WRONG", name, f"WRONG {name}: {t['differs'].split(':')[0]} differs",
                                         f"read returned different data ({t['differs']}) while validate reports "
                                         f"{check.get('errors')}"))
    rank = {c: i for i, c in enumerate(CLASSES)}
    cls = min((f["class"] for f in failures), key=rank.__getitem__, default="OK")
    return cls, failures
