"""The conformance validator (spec §13, docs/validation.md), run as Dask graphs.

``validate(store, level=N)`` checks levels 1..N cumulatively (docs/decisions.md D7): an error at
level 1 or 2 means the deeper levels are reported as not run; errors at levels 3 and 4
do not stop levels 4 and 5.  Every rule has a stable code (``docs/validation-codes.md``);
an exception raised while checking is itself a finding, never a silent pass.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from zarr_vectors.errors import InputError, StoreNotFoundError
from zarr_vectors.store.backend import Storage
from zarr_vectors.validation.findings import CATALOGUE, ERROR, WARNING, Finding, Report, crashed
from zarr_vectors.validation.manifests import ManifestCheck, collect_manifests, start_manifests
from zarr_vectors.validation.order import causes_first
from zarr_vectors.validation.structure import StoreModel, check_structure, load_model

__all__ = ["CATALOGUE", "Finding", "ValidationResult", "validate"]

LEVEL_NAMES = {1: "structure", 2: "metadata", 3: "consistency", 4: "conformance", 5: "multi-resolution"}


@dataclass(repr=False)
class ValidationResult:
    """What :func:`validate` returns: string lists (D6) plus the structured findings; its
    ``repr`` is the verdict and the counts (``summary()`` lists the findings)."""

    level: int
    store: str = ""
    passed: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    levels_run: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def __repr__(self) -> str:
        return (f"ValidationResult(level={self.level}, store={self.store!r}, ok={self.ok}, "
                f"{len(self.errors)} errors, {len(self.warnings)} warnings, {len(self.passed)} passed)")

    def codes(self, severity: str | None = None) -> list[str]:
        return [f.code for f in self.findings if severity is None or f.severity == severity]

    def summary(self) -> str:
        status = "PASS" if self.ok else "FAIL"
        lines = [
            f"Level {self.level} validation of {self.store}: {status}",
            f"  levels run: {self.levels_run or 'none'}; {len(self.passed)} passed, {len(self.warnings)} warnings, "
            f"{len(self.errors)} errors",
        ]
        lines += [
            f"  {'ERROR' if f.severity == ERROR else 'WARN '} [{f.code}] {f.line()}"
            for f in causes_first(self.findings)
            if f.severity in (ERROR, WARNING)
        ]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "level": self.level,
            "errors": list(self.errors),
            "warnings": list(self.warnings),
            "passed": list(self.passed),
            "findings": [f.as_dict() for f in self.findings],
        }


def _storage_of(store: Any, storage_options: Mapping[str, Any] | None) -> Storage:
    if isinstance(store, Storage):
        return store
    inner = getattr(store, "storage", None)  # an open ZVStore or Level
    if isinstance(inner, Storage):
        return inner
    if isinstance(store, (str, os.PathLike)):
        return Storage(store, storage_options)
    raise InputError(f"cannot validate {store!r}: pass a path, a URL or an open store")


def validate(
    store: Any,
    level: int = 5,
    *,
    allow_layouts: Collection[str] = (),
    storage_options: Mapping[str, Any] | None = None,
) -> ValidationResult:
    """Validate a store at conformance level ``level`` (1..5), cumulatively.

    ``store`` is a path, a URL (``file://``, ``memory://``, ``s3://bucket/prefix``) or an
    open store.  ``allow_layouts=("vlen_manifests_v2",)`` reads that object-index layout
    by its documented contract and reports it as a warning instead of an error (D1).
    Raises :class:`StoreNotFoundError` when the location cannot be reached or holds
    nothing at all; everything else is a finding.
    """
    if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= 5:
        raise InputError(f"validation level must be an integer 1..5, got {level!r}")
    storage = _storage_of(store, storage_options)
    storage.check_reachable()
    report = Report()
    model = load_model(storage, report)
    if not model.objects:
        raise StoreNotFoundError(f"nothing at {storage.url!r}: no such store")
    model.allow_layouts = tuple(allow_layouts)
    result = ValidationResult(level, storage.url)
    run = _run(model, level, report)
    result.levels_run = run
    _finish(result, report, run, level)
    return result


def _run(model: StoreModel, level: int, report: Report) -> list[int]:
    run = [1]
    manifests: dict[int, ManifestCheck] = {}
    try:
        check_structure(model, report)
    except Exception as exc:  # noqa: BLE001
        report.add(crashed(1, "/", exc, what="structure"))
    metadata = Report()  # level 2's findings, kept only when level 1 passes (D7)
    failed: Exception | None = None
    if not report.errors_at(1):
        pending = start_manifests(model, report)
        if level >= 2:  # no task needed: checked on the client while the manifest chunks decode
            from zarr_vectors.validation.metadata import check_metadata

            try:
                check_metadata(model, metadata)
            except Exception as exc:  # noqa: BLE001 - raised below, only if level 2 is reached
                failed = exc
        manifests = collect_manifests(pending, report)
    if report.errors_at(1) or level == 1:
        return run
    run.append(2)
    if failed is not None:
        raise failed
    report.extend(metadata.findings)
    for code, n in metadata.ran.items():
        report.ran_rule(code, n)
    if report.errors_at(2) or level == 2:
        return run
    run.append(3)
    from zarr_vectors.validation.consistency import run as run_consistency

    findings, ran = run_consistency(model, level, manifests)
    report.extend(findings)
    for code, n in ran.items():
        report.ran_rule(code, n)
    if level >= 4:
        run.append(4)
        from zarr_vectors.validation.conformance import check_conformance

        check_conformance(model, report)
    if level >= 5:
        run.append(5)
        from zarr_vectors.validation.conformance import check_multiresolution

        check_multiresolution(model, report)
    return run


def _finish(result: ValidationResult, report: Report, run: list[int], level: int) -> None:
    findings = sorted(report.findings, key=lambda f: (f.level, f.node, f.cell or "", f.code, f.message))
    result.findings = findings
    result.errors = [f.line() for f in findings if f.severity == ERROR]
    result.warnings = [f.line() for f in findings if f.severity == WARNING]
    failed = {f.code for f in findings}
    for code, rule in CATALOGUE.items():
        if rule.level in run and code in report.ran and code not in failed and not code.endswith("_CHECK_CRASHED"):
            result.passed.append(f"{rule.level}: /: {rule.rule} [{code}]")
    for n in range(1, level + 1):
        if n not in run:
            stop = max(run)
            result.passed.append(f"{n}: /: not run ({LEVEL_NAMES[n]}): level {stop} has errors, so deeper levels "
                                 "cannot be trusted (D7)")
