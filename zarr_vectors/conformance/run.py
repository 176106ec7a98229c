"""Run the corpus: integrity first, then validate and read each fixture and compare with its case.

Everything runs in this process on dask's local threads (never a cluster, never a
socket) and reads only corpus files.  A case is ``pass``, ``fail`` (our answer differs
from the case) or ``skip`` (``level`` below the case's level); a corpus that fails
integrity -- or whose case files cannot be read -- is broken and nothing is compared.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import dask
import numpy as np

from zarr_vectors.conformance.corpus import Case, Corpus, CorpusError, check_integrity, load_corpus
from zarr_vectors.conformance.decode import decoded_level, same, section_names
from zarr_vectors.errors import ZarrVectorsError
from zarr_vectors.validation import validate

PASS, FAIL, SKIP = "pass", "fail", "skip"


@dataclass
class CaseResult:
    id: str
    valid: bool
    status: str
    level: int
    expected_codes: list[str] = field(default_factory=list)
    reported_codes: list[str] = field(default_factory=list)
    read: str = ""
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class Report:
    corpus: str
    broken: list[str] = field(default_factory=list)
    results: list[CaseResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        if self.broken:
            return 2
        return 1 if any(r.status == FAIL for r in self.results) else 0

    def counts(self) -> dict[str, int]:
        out = {PASS: 0, FAIL: 0, SKIP: 0}
        for r in self.results:
            out[r.status] += 1
        return out

    def as_json(self) -> dict[str, Any]:
        return {"corpus": self.corpus, "exit_code": self.exit_code, "broken": self.broken, "counts": self.counts(),
                "seconds": round(self.seconds, 3), "cases": [asdict(r) for r in self.results]}


def _allowed(case: Case) -> tuple[str, ...]:
    return tuple(case.doc["expect"].get("options", {}).get("allow_layouts", ()))


def _compare_read(corpus: Corpus, case: Case, problems: list[str]) -> None:
    for level, section in case.doc["expect"]["read"].items():
        try:
            got = decoded_level(str(corpus.root / case.fixture), int(level), _allowed(case))
        except ZarrVectorsError as exc:
            problems.append(f"read level {level}: {type(exc).__name__}: {exc}")
            continue
        want = section_names(section)
        for name in sorted(got.keys() - want.keys()):
            problems.append(f"level {level} {name}: returned, the case expects none")
        for name, rel in sorted(want.items()):
            if name not in got:
                problems.append(f"level {level} {name}: not returned")
                continue
            try:
                expected = np.load(corpus.root / rel, allow_pickle=False)
            except (OSError, ValueError) as exc:
                problems.append(f"level {level} {name}: {rel} does not load: {exc}")
                continue
            why = same(expected, got[name])
            if why:
                problems.append(f"level {level} {name}: {why}")


def _read_outcome(corpus: Corpus, case: Case) -> str:
    base = corpus.case(case.doc["expect"]["derived_from"])
    levels = [int(k) for k in base.doc["expect"]["read"]] if base.valid else [0]
    for level in levels:
        try:
            decoded_level(str(corpus.root / case.fixture), level, _allowed(case))
        except ZarrVectorsError:
            return "error"
    return "ok"


def run_case(corpus: Corpus, case: Case, max_level: int = 5) -> CaseResult:
    """Validate and read one fixture (its integrity already checked) and compare with its case."""
    start = time.perf_counter()
    expect = case.doc["expect"]
    level = int(expect["validate"]["level"])
    codes = list(expect["validate"]["codes"])
    result = CaseResult(case.id, case.valid, PASS, min(level, max_level), codes)
    if not case.valid and level > max_level:
        result.status = SKIP
        return result
    found = validate(str(corpus.root / case.fixture), result.level, allow_layouts=_allowed(case))
    result.reported_codes = sorted(set(found.codes()))
    errors = sorted({f.code for f in found.findings if f.severity == "error"})
    if case.valid and errors:
        result.problems.append(f"errors {errors} on a valid fixture")
    missing = [c for c in codes if c not in result.reported_codes]
    if missing:
        result.problems.append(f"expected code(s) {missing} not reported at level {result.level}")
    extra = [c for c in result.reported_codes if c not in codes]
    if extra and (case.valid or expect["validate"].get("exact")):
        result.problems.append(f"unexpected code(s) {extra} at level {result.level}")
    if case.valid:
        result.read = "ok"
        _compare_read(corpus, case, result.problems)
        if any(p.startswith("read level") for p in result.problems):
            result.read = "error"
    else:
        result.read = _read_outcome(corpus, case)
        if result.read != expect["read"]:
            result.problems.append(f"read is {result.read!r}, the case expects {expect['read']!r}")
    result.status = FAIL if result.problems else PASS
    result.seconds = time.perf_counter() - start
    return result


def run_corpus(root: str | Path, *, cases: Sequence[str] = (), max_level: int = 5) -> Report:
    """The whole run: load, check integrity of every selected case, then compare each one."""
    start = time.perf_counter()
    report = Report(str(root))
    try:
        corpus = load_corpus(root)
        selected = [corpus.case(c) for c in cases] if cases else corpus.cases
    except CorpusError as exc:
        report.broken.append(str(exc))
        return report
    for case in selected:
        report.broken += check_integrity(corpus, case)
    if report.broken:
        report.seconds = time.perf_counter() - start
        return report
    with dask.config.set(scheduler="threads"):
        for case in selected:
            report.results.append(run_case(corpus, case, max_level))
    report.seconds = time.perf_counter() - start
    return report


def table(report: Report) -> str:
    """The report as a plain-text table, one row per case, problems indented below a failing one."""
    if report.broken:
        return "\n".join([f"broken corpus {report.corpus}:", *(f"  {b}" for b in report.broken)])
    lines = [f"{'case':<56}{'valid':<7}{'level':<7}{'read':<7}{'status':<7}codes"]
    for r in report.results:
        extra = [c for c in r.reported_codes if c not in r.expected_codes]
        codes = " ".join(r.expected_codes) + (f" (+{' '.join(extra)})" if extra else "")
        lines.append(f"{r.id:<56}{'yes' if r.valid else 'no':<7}{r.level:<7}{r.read:<7}{r.status:<7}{codes}")
        lines += [f"    {p}" for p in r.problems]
    c = report.counts()
    lines.append(f"{len(report.results)} cases: {c[PASS]} pass, {c[FAIL]} fail, {c[SKIP]} skipped "
                 f"in {report.seconds:.1f} s")
    return "\n".join(lines)
