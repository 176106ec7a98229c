"""Regenerate the conformance corpus: ``python -m zarr_vectors.conformance.generate [OUT]``.

OUT defaults to ``conformance/`` beside this checkout's package.  Our valid fixtures
(:mod:`.fixtures`) are written afresh on dask's synchronous scheduler, every invalid one
is a copy of a valid one with one raw-file edit (:mod:`.mutations`), and every case
file, expected array and the index are written from what our validator and reader
return -- after checking that each valid fixture validates clean at level 5 and each
defect raises its code.  The same inputs give the same bytes (a test regenerates into a
temporary directory and compares).  Reference-written fixtures are data: they are copied
from ``--reference-from`` (default: OUT itself) and checked against their case files'
hashes; ``--reference`` first rewrites them with the reference in its side environment
(:mod:`.reference`).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import dask
import numpy as np

from zarr_vectors.conformance import reference
from zarr_vectors.conformance.caseschema import CASE_SCHEMA
from zarr_vectors.conformance.corpus import CONVENTIONS, CORPUS_VERSION, CorpusError, file_entries
from zarr_vectors.conformance.decode import decoded_level, read_section
from zarr_vectors.conformance.defect import DECISIONS, Defect
from zarr_vectors.conformance.fixtures import FIXTURES, Fixture
from zarr_vectors.conformance.mutations import DEFECTS
from zarr_vectors.errors import ZarrVectorsError
from zarr_vectors.validation import validate
from zarr_vectors.validation.findings import CATALOGUE

OURS = {"implementation": "zarr-vectors-dask", "version": "corpus generator 1"}
DEFAULT_OUT = Path(__file__).resolve().parents[2] / "conformance"


class GenerationError(Exception):
    """A fixture or defect does not do what its case would say (a generator bug, not a corpus)."""


_ENTRY = re.compile(r'\{\s+"path": ("[^"]*"),\s+"sha256": ("[0-9a-f]+"),\s+"bytes": (\d+)\s+\}')


def _dump(path: Path, doc: Any) -> None:
    """Indented JSON, one line per listed file (case files list every file of their fixture)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = _ENTRY.sub(r'{"path": \1, "sha256": \2, "bytes": \3}', json.dumps(doc, indent=2))
    path.write_text(text + "\n", encoding="utf-8")


def _levels(store: Path) -> list[int]:
    return sorted(int(p.name) for p in store.iterdir() if p.is_dir() and p.name.isdigit() and p.name == str(int(p.name)))


def _no_empty_dirs(store: Path) -> None:
    empty = [p for p in store.rglob("*") if p.is_dir() and not any(p.iterdir())]
    if empty:  # git keeps no empty directory: the committed fixture would differ
        raise GenerationError(f"{store}: empty directories {empty[:3]}")


def _case(case_id: str, description: str, kind: str, writer: dict[str, str], out: Path,
          expect: dict[str, Any]) -> dict[str, Any]:
    fixture = out / "fixtures" / case_id
    _no_empty_dirs(fixture)
    return {"id": case_id, "description": description, "kind": kind, "fixture": f"fixtures/{case_id}",
            "writer": writer, "files": [e.as_json() for e in file_entries(fixture)], "expect": expect}


def _valid_case(case_id: str, description: str, kind: str, writer: dict[str, str], out: Path,
                allow_layouts: tuple[str, ...] = ()) -> dict[str, Any]:
    store = out / "fixtures" / case_id
    result = validate(str(store), 5, allow_layouts=allow_layouts)
    if result.errors or any(f.code != "L2_OBJECT_INDEX_LAYOUT" for f in result.findings):
        raise GenerationError(f"valid fixture {case_id} is not clean:\n{result.summary()}")
    sections = {}
    for level in _levels(store):
        arrays = decoded_level(str(store), level, allow_layouts)
        for name, value in arrays.items():
            path = out / "expected" / case_id / str(level) / f"{name}.npy"
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, np.ascontiguousarray(value), allow_pickle=False)
        sections[str(level)] = read_section(case_id, level, sorted(arrays))
    expect: dict[str, Any] = {"valid": True, "validate": {"level": 5, "codes": sorted(set(result.codes()))}}
    if allow_layouts:
        expect["options"] = {"allow_layouts": list(allow_layouts)}
    expect["read"] = sections
    return _case(case_id, description, kind, writer, out, expect)


def _read_outcome(store: Path, levels: list[int], allow_layouts: tuple[str, ...] = ()) -> str:
    for level in levels:
        try:
            decoded_level(str(store), level, allow_layouts)
        except ZarrVectorsError:
            return "error"
    return "ok"


def _invalid_case(d: Defect, base: dict[str, Any], out: Path) -> dict[str, Any]:
    case_id = f"bad-{d.name}"
    store = out / "fixtures" / case_id
    shutil.copytree(out / "fixtures" / d.base, store)
    d.apply(store)
    level = CATALOGUE[d.code].level
    result = validate(str(store), level, allow_layouts=d.allow_layouts)
    if d.code not in result.codes():
        raise GenerationError(f"{case_id}: expected {d.code} at level {level}\n{result.summary()}")
    expect = {"valid": False, "derived_from": d.base, "defect": d.description,
              "validate": {"level": level, "codes": [d.code]},
              "read": _read_outcome(store, [int(k) for k in base["expect"]["read"]], d.allow_layouts),
              "decision": DECISIONS.get(d.code)}
    if d.allow_layouts:
        expect["options"] = {"allow_layouts": list(d.allow_layouts)}
    return _case(case_id, d.description, base["kind"], base["writer"], out, expect)


def _ours(f: Fixture, out: Path) -> dict[str, Any]:
    f.build(out / "fixtures" / f.id)
    return _valid_case(f.id, f.description, f.kind, OURS, out)


def _copy_reference(source: Path, out: Path) -> list[dict[str, Any]]:
    """Reference-written fixtures: copied as data, their bytes checked against the source's case files."""
    cases = []
    for ref in reference.FIXTURES:
        src_case = source / "cases" / f"{ref.id}.json"
        if not src_case.exists():
            raise CorpusError(f"{src_case} is missing: write the reference fixtures first (--reference)")
        doc = json.loads(src_case.read_text(encoding="utf-8"))
        dst = out / "fixtures" / ref.id
        if source.resolve() != out.resolve():
            shutil.copytree(source / "fixtures" / ref.id, dst)
        got = [e.as_json() for e in file_entries(dst)]
        if got != doc["files"]:
            raise CorpusError(f"reference fixture {ref.id}: its files are not the ones its case file lists")
        codes = set(validate(str(dst), 5).codes())
        # the reference writes object_index layout vlen_manifests_v2: valid when that layout is allowed (D1)
        allow = ("vlen_manifests_v2",) if codes == {"L2_OBJECT_INDEX_LAYOUT"} else ()
        cases.append(_valid_case(ref.id, ref.description, ref.kind, doc["writer"], out, allow))
    return cases


def _clear(out: Path, keep_reference: bool) -> None:
    for sub in ("cases", "expected", "fixtures"):
        top = out / sub
        if not top.exists():
            continue
        for p in top.iterdir():
            if keep_reference and sub == "fixtures" and p.name in reference.IDS:
                continue
            if keep_reference and sub == "cases" and p.stem in reference.IDS:
                continue
            shutil.rmtree(p) if p.is_dir() else p.unlink()


def generate(out: Path, *, reference_from: Path | None = None, write_reference: bool = False) -> dict[str, Any]:
    """Write the whole corpus into ``out``; returns the index (cases.json)."""
    out.mkdir(parents=True, exist_ok=True)
    source = reference_from or out
    in_place = source.resolve() == out.resolve()
    if write_reference:
        reference.write_fixtures(out)
    _clear(out, keep_reference=in_place)
    with dask.config.set(scheduler="synchronous"):
        by_id = {f.id: _ours(f, out) for f in FIXTURES}
        refs = _copy_reference(source, out)
        bad, failed = [], []
        for d in DEFECTS:
            try:
                bad.append(_invalid_case(d, by_id[d.base], out))
            except Exception as exc:  # noqa: BLE001 - every failing defect is listed, then raised
                failed.append(f"{d.name}: {type(exc).__name__}: {exc}")
        if failed:
            raise GenerationError(f"{len(failed)} defects failed:\n" + "\n".join(failed))
    cases = [*by_id.values(), *refs, *bad]
    for doc in cases:
        _dump(out / "cases" / f"{doc['id']}.json", doc)
    index = {"corpus_version": CORPUS_VERSION, "conventions": CONVENTIONS,
             "cases": [{"id": c["id"], "valid": c["expect"]["valid"], "kind": c["kind"],
                        "writer": c["writer"]["implementation"]} for c in cases]}
    _dump(out / "cases.json", index)
    _dump(out / "case.schema.json", CASE_SCHEMA)
    return index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zarr_vectors.conformance.generate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT, help="corpus directory (default: %(default)s)")
    parser.add_argument("--reference-from", type=Path, default=None,
                        help="corpus whose reference-written fixtures are copied (default: OUT)")
    parser.add_argument("--reference", action="store_true",
                        help="first rewrite the reference-written fixtures with zarr-vectors in its side environment")
    args = parser.parse_args(argv)
    index = generate(args.out, reference_from=args.reference_from, write_reference=args.reference)
    valid = sum(1 for c in index["cases"] if c["valid"])
    print(f"{len(index['cases'])} cases ({valid} valid, {len(index['cases']) - valid} invalid) in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
