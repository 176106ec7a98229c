"""Run the reference implementation (zarr-vectors 0.9.2) from our tests.

The reference package is imported as ``zarr_vectors`` -- the same name as
ours -- so it can never live in this interpreter.  It is installed into a
separate virtual environment and driven through ``refdriver.py`` in a
subprocess, which exchanges data through files (.npz, stores) and one JSON
line on stdout.

Public surface:

``REFERENCE_VERSION``
    The pinned reference version.
``ensure_reference_env() -> Path``
    The reference venv's python, building the venv first if needed.
    Location: ``$ZV_REFENV_DIR`` or ``<repo>/.cache/refenv-<version>``.
``run_reference(*args, timeout=600) -> dict``
    Run one ``refdriver.py`` subcommand and return its JSON result.
    Store/npz paths in ``args`` must be absolute: the driver runs with a
    throw-away temporary directory as its working directory.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REFERENCE_VERSION = "0.9.2"

REPO_ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).resolve().with_name("refdriver.py")

_STAMP_NAME = ".zv-refenv-ok"
#: what the reference needs for its two S3 backends (benchmarks/s3.py): obstore and s3fs;
#: and its command-line tools (benchmarks/cli.py, the reference-written conformance fixtures).
#: Installed with the env, and into an env built before they were listed (its own stamp).
REFERENCE_TOOLS_VERSION = "0.3.0"
EXTRAS = ("obstore", "s3fs", f"zarr-vectors-tools=={REFERENCE_TOOLS_VERSION}")
_EXTRAS_STAMP = ".zv-refenv-extras"
_INSTALL_TIMEOUT = 1800.0
_TAIL = 4000


def _tail(text: str | bytes | None, limit: int = _TAIL) -> str:
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return text if len(text) <= limit else "...\n" + text[-limit:]


def _env_dir() -> Path:
    override = os.environ.get("ZV_REFENV_DIR")
    if override:
        return Path(override).expanduser().resolve()
    return REPO_ROOT / ".cache" / f"refenv-{REFERENCE_VERSION}"


def _venv_python(env_dir: Path) -> Path:
    if os.name == "nt":  # pragma: no cover - the project targets POSIX
        return env_dir / "Scripts" / "python.exe"
    return env_dir / "bin" / "python"


def _clean_env() -> dict[str, str]:
    """The environment for every reference subprocess.

    ``PYTHONPATH``/``PYTHONHOME`` are removed so our source tree can never
    shadow the reference package, and ``ZARR_VECTORS_*`` knobs (the
    reference reads ``ZARR_VECTORS_COMPRESSION`` / ``_BACKEND``) so its
    defaults are the documented ones whatever the caller's shell holds.
    """
    env = dict(os.environ)
    for key in list(env):
        if key in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE") or key.startswith(
            "ZARR_VECTORS_"
        ):
            env.pop(key, None)
    env["PYTHONNOUSERSITE"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _stamp_ok(env_dir: Path) -> bool:
    stamp = env_dir / _STAMP_NAME
    try:
        content = stamp.read_text(encoding="utf-8").strip()
    except OSError:
        return False
    return content == REFERENCE_VERSION and _venv_python(env_dir).exists()


def _run(cmd: list[str], *, timeout: float, what: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="zv-refenv-") as cwd:
        try:
            proc = subprocess.run(
                cmd,
                cwd=cwd,
                env=_clean_env(),
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(
                f"{what} timed out after {timeout:.0f}s\n"
                f"stdout tail:\n{_tail(exc.stdout)}\nstderr tail:\n{_tail(exc.stderr)}"
            ) from None
    if proc.returncode != 0:
        raise RuntimeError(
            f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n"
            f"stdout tail:\n{_tail(proc.stdout)}\nstderr tail:\n{_tail(proc.stderr)}"
        )
    return proc


def _build(env_dir: Path) -> None:
    """Create the venv from scratch; the stamp is written only at the end."""
    if env_dir.exists():
        shutil.rmtree(env_dir)
    env_dir.parent.mkdir(parents=True, exist_ok=True)
    _run([sys.executable, "-m", "venv", str(env_dir)], timeout=300, what="python -m venv")
    python = _venv_python(env_dir)
    _run(
        [
            str(python), "-m", "pip", "install", "--quiet", "--no-input",
            "--disable-pip-version-check", f"zarr-vectors=={REFERENCE_VERSION}", *EXTRAS,
        ],
        timeout=_INSTALL_TIMEOUT,
        what=f"pip install zarr-vectors=={REFERENCE_VERSION}",
    )
    probe = _run(
        [
            str(python), "-I", "-c",
            "import json, sys, zarr_vectors; print(json.dumps("
            "{'version': zarr_vectors.__version__, 'file': zarr_vectors.__file__, "
            "'prefix': sys.prefix}))",
        ],
        timeout=300,
        what="import check of the reference package",
    )
    info = json.loads(probe.stdout.strip().splitlines()[-1])
    zv_file = Path(info["file"]).resolve()
    if info["version"] != REFERENCE_VERSION or env_dir.resolve() not in zv_file.parents:
        raise RuntimeError(
            f"reference env at {env_dir} imports zarr_vectors {info['version']} "
            f"from {zv_file}; expected {REFERENCE_VERSION} from inside the env"
        )
    _write_stamp(env_dir / _EXTRAS_STAMP, " ".join(EXTRAS))
    _write_stamp(env_dir / _STAMP_NAME, REFERENCE_VERSION)


def _write_stamp(stamp: Path, content: str) -> None:
    tmp = stamp.with_suffix(".tmp")
    tmp.write_text(content + "\n", encoding="utf-8")
    os.replace(tmp, stamp)


def _extras_ok(env_dir: Path) -> bool:
    try:
        return (env_dir / _EXTRAS_STAMP).read_text(encoding="utf-8").split() == list(EXTRAS)
    except OSError:
        return False


def _install_extras(env_dir: Path) -> None:
    """Add :data:`EXTRAS` to an env built without them (no rebuild: other processes may be using it)."""
    _run(
        [str(_venv_python(env_dir)), "-m", "pip", "install", "--quiet", "--no-input",
         "--disable-pip-version-check", *EXTRAS],
        timeout=_INSTALL_TIMEOUT,
        what=f"pip install {' '.join(EXTRAS)} into the reference env",
    )
    _write_stamp(env_dir / _EXTRAS_STAMP, " ".join(EXTRAS))


def ensure_reference_env() -> Path:
    """Return the reference venv's python, creating the venv if missing.

    Safe to call from several processes at once: creation is serialised
    with an exclusive ``flock`` on ``<env dir>.lock``, and a venv without
    its stamp file (a build that died half-way) is deleted and rebuilt.
    """
    env_dir = _env_dir()
    if _stamp_ok(env_dir) and _extras_ok(env_dir):
        return _venv_python(env_dir)
    env_dir.parent.mkdir(parents=True, exist_ok=True)
    lock_path = env_dir.with_name(env_dir.name + ".lock")
    with open(lock_path, "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            if not _stamp_ok(env_dir):  # another process may have built it meanwhile
                _build(env_dir)
            elif not _extras_ok(env_dir):
                _install_extras(env_dir)
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    return _venv_python(env_dir)


def run_reference(*args: str, timeout: float = 600) -> dict:
    """Run ``refdriver.py <args>`` under the reference python; return its JSON.

    The subprocess runs isolated (``python -I``), from a temporary working
    directory, without ``PYTHONPATH``, so our package cannot be imported
    in its place; the driver additionally refuses to run unless the
    imported ``zarr_vectors`` lives inside the reference venv.
    """
    python = ensure_reference_env()
    cmd = [str(python), "-I", str(DRIVER), *[str(a) for a in args]]
    proc = _run(cmd, timeout=timeout, what="reference driver")
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if not lines:
        raise RuntimeError(
            f"reference driver printed nothing: {' '.join(cmd)}\n"
            f"stderr tail:\n{_tail(proc.stderr)}"
        )
    try:
        result = json.loads(lines[-1])
    except json.JSONDecodeError as exc:
        raise RuntimeError(
            f"reference driver's last stdout line is not JSON ({exc}): {lines[-1][:500]!r}\n"
            f"stderr tail:\n{_tail(proc.stderr)}"
        ) from None
    env_dir = python.parent.parent.resolve()
    zv_file = Path(result.get("zarr_vectors_file", "")).resolve()
    if not result.get("in_reference_env") or env_dir not in zv_file.parents:
        raise RuntimeError(
            f"reference driver imported zarr_vectors from {zv_file}, "
            f"not from the reference env {env_dir}"
        )
    return result


__all__ = ["REFERENCE_VERSION", "ensure_reference_env", "run_reference"]
