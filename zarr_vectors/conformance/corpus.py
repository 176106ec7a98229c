"""The conformance corpus on disk: its layout, pinned conventions, loading and integrity.

Layout (docs/conformance.md): ``cases.json`` (index), ``cases/<id>.json`` (one per
case), ``fixtures/<id>/`` (the store directory), ``expected/<id>/<level>/*.npy``
(decoded arrays of valid fixtures) and ``case.schema.json``.  Integrity -- every case
file present and well formed, every fixture file listed with its sha256 and byte count
and nothing else on disk -- is checked before anything is validated or read: a corpus
that fails it is broken (exit 2), not a mismatch.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CORPUS_VERSION = 1
WRITERS = ("zarr-vectors-dask", "zarr-vectors")

#: Written once into cases.json; what a conforming reader's answers are compared under.
CONVENTIONS: dict[str, Any] = {
    "enumeration_order": (
        "vertices in storage order (docs/decisions.md D18): chunks in ascending numeric coordinate order, rows in "
        "cell order; polylines, streamlines and lines in traversal order, polyline by polyline in object id order. "
        "edges/faces and their attributes in the reader's record order (D8: cells in ascending chunk order, "
        "families and segments in name order, records in cell order), endpoints in input order"),
    "indices": "edges, faces and offsets are int64 and index into positions of the same level",
    "dtypes": ("positions and attributes in the stored dtype; object_ids, objects, edges, faces, offsets int64; "
               "object_ids is one id per vertex (smallest owner, -1 where none: D20)"),
    "tolerances": {"float": {"rtol": 0.0, "atol": 0.0, "nan_equal": True}, "integer": "exact",
                   "why": "every expected value is a stored value, decoded, never recomputed"},
    "levels": "each level listed under expect.read is read whole (no bounding box)",
    "validate": ("codes at least: a case passes when every expected code is reported at the case's level; "
                 "extra codes are listed but fail only when the case says exact: true. A valid case is validated "
                 "at level 5 and must report no error, and exactly the warning codes it lists (usually none)"),
    "options": ("expect.options.allow_layouts, where present, is passed to validate and read: the reference "
                "writes object_index layout vlen_manifests_v2, valid here when that layout is allowed (D1), and "
                "then reported as the warning L2_OBJECT_INDEX_LAYOUT"),
    "read_error": ("an invalid case's read is 'error' when reading some level that its derived_from case reads "
                   "raises the implementation's error for a bad store, 'ok' when every one of them reads"),
    "arrays": "expected arrays are .npy files (format 1.0, little-endian); absent means the reader returns none",
}


class CorpusError(Exception):
    """The corpus itself is broken: a missing or garbled case file, a hash mismatch, an unknown version."""


@dataclass(frozen=True)
class FileEntry:
    path: str
    sha256: str
    bytes: int

    def as_json(self) -> dict[str, Any]:
        return {"path": self.path, "sha256": self.sha256, "bytes": self.bytes}


@dataclass
class Case:
    id: str
    doc: dict[str, Any]

    @property
    def valid(self) -> bool:
        return bool(self.doc["expect"]["valid"])

    @property
    def fixture(self) -> str:
        return str(self.doc["fixture"])


@dataclass
class Corpus:
    root: Path
    index: dict[str, Any]
    cases: list[Case] = field(default_factory=list)

    def case(self, case_id: str) -> Case:
        for c in self.cases:
            if c.id == case_id:
                return c
        raise CorpusError(f"no case {case_id!r} in {self.root / 'cases.json'}")


def file_entries(fixture: Path) -> list[FileEntry]:
    """Every regular file under ``fixture``, sorted by relative POSIX path, with its hash and size."""
    out = []
    for p in sorted(fixture.rglob("*"), key=lambda q: q.relative_to(fixture).as_posix()):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            out.append(FileEntry(p.relative_to(fixture).as_posix(), hashlib.sha256(data).hexdigest(), len(data)))
    return out


def _load_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CorpusError(f"{what} {path} is missing") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorpusError(f"{what} {path} is not JSON: {exc}") from None


_CASE_KEYS = ("id", "description", "kind", "fixture", "writer", "files", "expect")


def _check_case(doc: Any, case_id: str, path: Path) -> None:
    if not isinstance(doc, dict) or any(k not in doc for k in _CASE_KEYS):
        raise CorpusError(f"case file {path} lacks one of {list(_CASE_KEYS)}")
    if doc["id"] != case_id:
        raise CorpusError(f"case file {path} says id {doc['id']!r}")
    if doc["fixture"] != f"fixtures/{case_id}":
        raise CorpusError(f"case file {path}: fixture must be 'fixtures/{case_id}', found {doc['fixture']!r}")
    if doc["writer"].get("implementation") not in WRITERS:
        raise CorpusError(f"case file {path}: unknown writer {doc['writer']!r}")
    expect = doc["expect"]
    if not isinstance(expect, dict) or not isinstance(expect.get("valid"), bool) or "validate" not in expect:
        raise CorpusError(f"case file {path}: expect must say valid (a boolean) and validate")
    if not expect["valid"] and ("derived_from" not in expect or expect.get("read") not in ("error", "ok")):
        raise CorpusError(f"case file {path}: an invalid case needs derived_from and read 'error' or 'ok'")


def load_corpus(root: str | Path) -> Corpus:
    """Read the index and every case file (structure only; :func:`check_integrity` checks the bytes)."""
    root = Path(root)
    index = _load_json(root / "cases.json", "index")
    if not isinstance(index, dict) or index.get("corpus_version") != CORPUS_VERSION:
        raise CorpusError(f"{root / 'cases.json'}: corpus_version must be {CORPUS_VERSION}, "
                          f"found {index.get('corpus_version') if isinstance(index, dict) else index!r}")
    if not isinstance(index.get("cases"), list) or not isinstance(index.get("conventions"), dict):
        raise CorpusError(f"{root / 'cases.json'}: needs 'conventions' (an object) and 'cases' (a list)")
    corpus = Corpus(root, index)
    seen = set()
    for entry in index["cases"]:
        case_id = entry.get("id") if isinstance(entry, dict) else None
        if not isinstance(case_id, str) or case_id in seen:
            raise CorpusError(f"{root / 'cases.json'}: bad or repeated case entry {entry!r}")
        seen.add(case_id)
        path = root / "cases" / f"{case_id}.json"
        doc = _load_json(path, "case file")
        _check_case(doc, case_id, path)
        if entry.get("valid") != doc["expect"]["valid"] or entry.get("kind") != doc["kind"]:
            raise CorpusError(f"{root / 'cases.json'}: the entry of {case_id!r} disagrees with its case file")
        corpus.cases.append(Case(case_id, doc))
    return corpus


def check_integrity(corpus: Corpus, case: Case) -> list[str]:
    """Why ``case``'s fixture is not the bytes its case file lists (empty: it is)."""
    fixture = corpus.root / case.fixture
    if not fixture.is_dir():
        return [f"fixture directory {fixture} is missing"]
    listed = {f["path"]: f for f in case.doc["files"]}
    found = {e.path: e for e in file_entries(fixture)}
    problems = [f"{case.fixture}/{p}: listed but missing" for p in sorted(listed.keys() - found.keys())]
    problems += [f"{case.fixture}/{p}: on disk but not listed" for p in sorted(found.keys() - listed.keys())]
    for p in sorted(listed.keys() & found.keys()):
        want, got = listed[p], found[p]
        if want.get("bytes") != got.bytes or want.get("sha256") != got.sha256:
            problems.append(f"{case.fixture}/{p}: {got.bytes} bytes sha256 {got.sha256[:12]}..., the case says "
                            f"{want.get('bytes')} bytes sha256 {str(want.get('sha256'))[:12]}...")
    if case.valid:
        for section in case.doc["expect"]["read"].values():
            for rel in _paths(section):
                if not (corpus.root / rel).is_file():
                    problems.append(f"{rel}: named by case {case.id} but missing")
    return problems


def _paths(section: dict[str, Any]) -> list[str]:
    return [p for v in section.values() for p in (v.values() if isinstance(v, dict) else [v])]
