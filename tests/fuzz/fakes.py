"""Deliberately misbehaving targets, so the harness's own tests can show the oracle is not vacuous.

``install(kind)`` (in a target child, before the target runs) replaces
``zarr_vectors.validate``, ``zarr_vectors.read`` and the validator the CLI calls with
fakes that crash, hang, read outside the store, eat memory or answer wrongly; the real
oracle code then judges them exactly as it judges the package.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

KINDS = ("ok", "typed", "crash", "hang", "escape", "nofollow", "memory", "rss", "wrong")


def _result(store: str, *, errors: bool = False, crashed: BaseException | None = None) -> Any:
    from zarr_vectors.validation import ValidationResult
    from zarr_vectors.validation.findings import crashed as crash_finding
    from zarr_vectors.validation.findings import make

    result = ValidationResult(5, store, levels_run=[1, 2, 3, 4, 5])
    if crashed is not None:
        try:
            raise crashed
        except BaseException as exc:  # noqa: BLE001 - a traceback to report, as the validator has
            from zarr_vectors.validation import findings

            findings.crashed(3, "0/vertices", exc)  # through the instrumented function
            result.findings.append(crash_finding(3, "0/vertices", exc))
    if errors:
        result.findings.append(make("L3_CELL_UNDECODABLE", "0/vertices", "fake: a cell does not decode", cell="0.0.0"))
    result.errors = [f.line() for f in result.findings if f.severity == "error"]
    return result


def install(kind: str) -> None:
    import pipeline.cli  # noqa: F401 - the CLI imports the validator from this module at call time
    import zarr_vectors as zv
    import zarr_vectors.validation as validation

    real_read = zv.read

    def validate(store: Any, level: int = 5, **_: Any) -> Any:
        if kind == "crash":
            return _result(str(store), crashed=KeyError("fake crash in a rule"))
        if kind == "hang":
            time.sleep(3600)
        if kind == "escape":
            os.listdir("/")
        if kind == "rss":
            block = np.ones(900 << 20, dtype=np.uint8)  # resident, under the cap, over the RSS bound
            del block
        return _result(str(store), errors=kind in ("wrong", "typed"))

    def read(store: Any, level: int = 0, **kw: Any) -> Any:
        if kind == "typed":
            raise zv.InconsistentStoreError("fake: a typed refusal")
        if kind == "crash":
            raise IndexError("fake untyped error from read")
        if kind == "hang":
            time.sleep(3600)
        if kind == "escape":
            with open("/etc/passwd", "rb") as f:
                f.read(1)
        if kind == "nofollow":  # refused by the kernel, or nothing there: not an escape
            link = os.path.join(str(store), "fake-link")
            os.symlink("/etc/passwd", link)
            try:
                os.open(link, os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                pass
            try:
                open("/nonexistent/fake", "rb")
            except OSError:
                pass
            os.unlink(link)
        if kind == "memory":
            np.ones(64 << 30, dtype=np.uint8)
        data = real_read(store, level=level, **kw)
        if kind == "wrong":
            data.positions = data.positions.copy()
            data.positions[0, 0] += 1
        return data

    def cli_validate(store: Any, level: int = 5, **kw: Any) -> Any:
        if kind == "crash":
            raise ValueError("fake traceback out of zv validate")
        return validate(store, level, **kw)

    zv.validate = validate
    zv.read = read
    validation.validate = cli_validate
