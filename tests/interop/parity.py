"""Cross-implementation parity: the reference's validator and reader over the conformance corpus.

    python -m tests.interop.parity [CORPUS] [--case ID ...] [--out docs/conformance-parity.md] [--json FILE]

Every fixture is copied to a scratch directory and handed to zarr-vectors 0.9.2 in its side
environment (``refdriver.py parity``: one subprocess, each call under an alarm and a memory
limit).  Per case the verdict is

* **agree** -- the reference's level-5 validation says what the case says (valid: no
  errors; invalid: some error), and its reader does too (valid: the expected content at
  every level; invalid: it refuses exactly when the case expects a read error);
* **differ** -- it runs, and says otherwise;
* **reference crashes** -- it raises something other than its own error classes
  (``ZVError``), or runs out of time or memory.

Content is compared as multisets (vertex rows with their ids and attributes, links as
the positions of their endpoints, polylines as position sequences), since the order of
vertices and records is a documented choice (docs/decisions.md D8, D18); fields the
reference's generic reader does not return are not compared.  Every case that does not
agree is tied to a docs/decisions.md entry: the case's own ``decision``, else the entry
named for it (``CASE_DECISIONS``), else the entry of its expected code (``CODE_DECISIONS``).  Not
imported by the package.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from tests.interop.refenv import REFERENCE_VERSION, run_reference

REPO = Path(__file__).resolve().parents[2]
Loader = Callable[[str], np.ndarray]  # an expected file's path in the case -> its array
AGREE, DIFFER, CRASH = "agree", "differ", "reference crashes"

#: why the reference's verdict on an invalid case differs from ours, by the case's expected code
CODE_DECISIONS: dict[str, str] = {
    "L2_ZV_VERSION": "D2",
    "L2_OBJECT_INDEX_LAYOUT": "D1",
    "L2_UNKNOWN_CAPABILITY": "D9",
    "L1_BAD_JSON": "D10",
    "L1_BAD_ORIGIN": "D10",
}
CODE_PREFIX_DECISIONS: dict[str, str] = {"L1_JSON_": "D10"}
#: every other rule the reference's validator does not check (docs/validation.md "reference misses")
UNCHECKED_BY_REFERENCE = "D23"
#: cases whose difference a narrower entry explains than their code's, by case id
CASE_DECISIONS: dict[str, str] = {
    "composite-point-cloud-graph": "D19",  # the reference's generic reader returns the point cloud, no edges
    "composite-point-cloud-polyline": "D19",
    "ref-composite-point-cloud-graph": "D19",  # the reference's own composite stores, read as we read them
    "ref-composite-point-cloud-polyline": "D19",
    "bad-no-vertex-fragments": "D24",  # a fragments_tile level reads without vertex_fragments
    "bad-consolidated-copy-leaves-out-a-node": "D24",
    "streamline-1d-trx": "D25",  # the reference's validator rejects every 1-D store
    "bad-mesh-with-width-two": "D19",  # a single kind whose links contradict it: our reader refuses it too
}


@dataclass
class Outcome:
    case: dict[str, Any]
    verdict: str
    validate: str  # what the reference's validator said, in a few words
    read: str  # what its reader did
    detail: str = ""
    decision: str | None = None


# ---------------------------------------------------------------------------
# the corpus
# ---------------------------------------------------------------------------
def load_cases(corpus: Path, ids: list[str] | None = None) -> list[dict[str, Any]]:
    index = json.loads((corpus / "cases.json").read_text(encoding="utf-8"))
    wanted = [c["id"] for c in index["cases"]] if not ids else ids
    known = {c["id"] for c in index["cases"]}
    unknown = [i for i in wanted if i not in known]
    if unknown:
        raise SystemExit(f"parity: no such case(s) in {corpus}: {', '.join(unknown)}")
    return [json.loads((corpus / "cases" / f"{i}.json").read_text(encoding="utf-8")) for i in wanted]


def _levels(case: dict[str, Any], by_id: dict[str, dict[str, Any]]) -> list[int]:
    """The levels to read: a valid case's, or those of the case an invalid one derives from."""
    read = case["expect"].get("read")
    if isinstance(read, dict):
        return sorted(int(k) for k in read)
    source = by_id.get(case["expect"].get("derived_from", ""))
    return _levels(source, {}) if source is not None else [0]


def _npy(corpus: Path, case: dict[str, Any], rel: str) -> np.ndarray:
    for base in (corpus, corpus / "cases"):
        if (base / rel).is_file():
            return np.load(base / rel, allow_pickle=False)
    raise SystemExit(f"parity: case {case['id']}: expected file {rel} is missing")


# ---------------------------------------------------------------------------
# comparing what the reference read with what the case expects
# ---------------------------------------------------------------------------
def _rows(*columns: np.ndarray) -> list[tuple]:
    """Rows of the side-by-side columns as sorted tuples (a multiset); NaN equals NaN (the conventions')."""
    n = len(columns[0])
    values = np.concatenate([np.asarray(c, dtype=np.float64).reshape(n, -1) for c in columns], axis=1)
    nan = np.isnan(values)
    return sorted(map(tuple, np.concatenate([nan, np.where(nan, 0.0, values)], axis=1).tolist()))


def _records(positions: np.ndarray, index: np.ndarray) -> list[tuple]:
    """Records (edges, faces) as the sorted positions of their endpoints: order-free."""
    pts = np.asarray(positions, dtype=np.float64)
    return sorted(tuple(sorted(map(tuple, pts[r].tolist()))) for r in np.asarray(index, dtype=np.int64))


def _parts(positions: np.ndarray, offsets: np.ndarray) -> list[tuple]:
    pts = np.asarray(positions, dtype=np.float64)
    o = np.asarray(offsets, dtype=np.int64)
    return sorted(tuple(map(tuple, pts[a:b].tolist())) for a, b in pairwise(o.tolist()))


def compare_level(expected: dict[str, Any], got: dict[str, np.ndarray], load: Loader) -> list[str]:
    """What differs between one level's expected content and the reference's read (empty: nothing)."""
    pos = load(expected["positions"])
    ref = got["positions"].reshape(len(got["positions"]), -1)  # the reference gives 1-D positions as (n,)
    if ref.shape != pos.shape:
        return [f"positions {ref.shape} vs expected {pos.shape}"]
    problems = []
    if _rows(ref) != _rows(pos):
        problems.append("positions differ")
    if "object_ids" in expected and "object_ids" in got and _rows(ref, got["object_ids"]) != _rows(
            pos, load(expected["object_ids"])):
        problems.append("object ids differ")
    for name, rel in (expected.get("attributes") or {}).items():
        values = got.get(f"attr__{name}")
        if values is None:
            problems.append(f"attribute {name!r} not read")
        elif len(values) != len(pos) or _rows(ref, values) != _rows(pos, load(rel)):
            problems.append(f"attribute {name!r} differs")
    for key in ("edges", "faces"):
        if key in expected:
            if key not in got:
                problems.append(f"no {key} read")
            elif _records(ref, got[key]) != _records(pos, load(expected[key])):
                problems.append(f"{key} differ")
    if "offsets" in expected and "part_offsets" in got and _parts(ref, got["part_offsets"]) != _parts(
            pos, load(expected["offsets"])):
        problems.append("polylines differ")
    return problems


# ---------------------------------------------------------------------------
# verdicts
# ---------------------------------------------------------------------------
def _raised(call: dict[str, Any]) -> str:
    return f"{call['raised']}: {call['message'][:120]}"


def _decision(case: dict[str, Any]) -> str | None:
    expect = case["expect"]
    if expect.get("decision"):
        return expect["decision"]
    if case["id"] in CASE_DECISIONS or expect["valid"]:
        return CASE_DECISIONS.get(case["id"])
    for code in expect["validate"]["codes"]:
        if code in CODE_DECISIONS:
            return CODE_DECISIONS[code]
        for prefix, d in CODE_PREFIX_DECISIONS.items():
            if code.startswith(prefix):
                return d
    return UNCHECKED_BY_REFERENCE


def judge(case: dict[str, Any], result: dict[str, Any], load: Loader) -> Outcome:
    """The verdict on one case from the reference's results (``refdriver.py parity``)."""
    expect = case["expect"]
    crashes, differs = [], []
    v = result["validate"]
    if "raised" in v:
        crashes.append(f"validator raised {_raised(v)}")
        said = "raised"
    else:
        ok = v["result"]["ok"]
        said = "clean" if ok else f"{len(v['result']['errors'])} error(s)"
        if ok != expect["valid"]:
            differs.append("validator passes it" if ok else f"validator reports {v['result']['errors'][0][:160]}")
    reads = []
    for level, call in sorted(result["read"].items(), key=lambda kv: int(kv[0])):
        if "raised" in call:
            reads.append(f"L{level} refused" if call["zv_error"] else f"L{level} raised")
            if not call["zv_error"]:
                crashes.append(f"reader (level {level}) raised {_raised(call)}")
            elif expect["valid"] or expect.get("read") == "ok":
                differs.append(f"reader (level {level}) refused: {_raised(call)}")
            continue
        reads.append(f"L{level} read")
        if expect["valid"]:
            with np.load(call["result"]["npz"], allow_pickle=False) as npz:
                got = {k: npz[k] for k in npz.files}
            differs += [f"level {level}: {p}" for p in compare_level(expect["read"][str(level)], got, load)]
    if expect.get("read") == "error" and all("raised" not in call for call in result["read"].values()):
        differs.append("reader reads every level; we refuse")
    verdict = CRASH if crashes else DIFFER if differs else AGREE
    out = Outcome(case, verdict, said, ", ".join(reads), "; ".join(crashes + differs))
    if verdict != AGREE:
        out.decision = _decision(case)
    return out


def run(corpus: Path, ids: list[str] | None = None, *, seconds: int = 60) -> list[Outcome]:
    cases = load_cases(corpus, ids)
    with tempfile.TemporaryDirectory(prefix="zv-parity-") as tmp:
        scratch = Path(tmp)
        manifest = []
        by_id = {c["id"]: c for c in load_cases(corpus)} if ids else {c["id"]: c for c in cases}
        for case in cases:
            store = scratch / "stores" / case["id"]
            shutil.copytree(corpus / case["fixture"], store, symlinks=True)  # the reference never sees our copy
            manifest.append({"id": case["id"], "store": str(store), "levels": _levels(case, by_id)})
        (scratch / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
        (scratch / "out").mkdir()
        timeout = 120 + len(cases) * (1 + len(max(manifest, key=lambda m: len(m["levels"]))["levels"])) * seconds
        reply = run_reference("parity", str(scratch / "manifest.json"), str(scratch / "out"),
                              "--seconds", str(seconds), timeout=timeout)
        return [judge(c, reply["results"][c["id"]], lambda rel, c=c: _npy(corpus, c, rel)) for c in cases]


# ---------------------------------------------------------------------------
# the table
# ---------------------------------------------------------------------------
def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def decision_titles() -> dict[str, str]:
    """``{"D1": "`object_index` layout", ...}`` from the headings of docs/decisions.md."""
    out = {}
    for line in (REPO / "docs" / "decisions.md").read_text(encoding="utf-8").splitlines():
        head, _, title = line.removeprefix("## ").partition(" — ")
        if line.startswith("## D") and title:
            out[head] = title
    return out


def render(outcomes: list[Outcome], corpus_label: str) -> str:
    counts = Counter(o.verdict for o in outcomes)
    unexplained = [o for o in outcomes if o.verdict != AGREE and not o.decision]
    lines = [
        "# Conformance parity with the reference implementation",
        "",
        (f"The reference (zarr-vectors {REFERENCE_VERSION}) validated (level 5) and read every case of the "
         f"conformance corpus ({corpus_label}); regenerate with"),
        ("`python -m tests.interop.parity conformance --out docs/conformance-parity.md`. Verdicts and how "
         "content is compared: `tests/interop/parity.py`."),
        "",
        (f"**{len(outcomes)} cases: {counts[AGREE]} agree, {counts[DIFFER]} differ, {counts[CRASH]} reference "
         "crashes.**"),
        "",
        "## Permitted divergences",
        "",
        ("Every case that does not agree, with the docs/decisions.md entry that says why our verdict is the "
         "one we keep."),
        "",
    ]
    by_decision: dict[str, list[Outcome]] = {}
    for o in outcomes:
        if o.verdict != AGREE:
            by_decision.setdefault(o.decision or "unexplained", []).append(o)
    titles = decision_titles()
    lines += ["| decision | entry | cases | verdicts |", "|---|---|---|---|"]
    for d, group in sorted(by_decision.items(), key=lambda kv: int(kv[0][1:]) if kv[0][1:].isdigit() else 10**9):
        verdicts = ", ".join(f"{n} {v}" for v, n in sorted(Counter(o.verdict for o in group).items()))
        lines.append(f"| {d} | {_cell(titles.get(d, ''))} | {len(group)} | {verdicts} |")
    if unexplained:
        lines += ["", (f"**{len(unexplained)} case(s) differ with no decision entry: a bug in one implementation "
                       "or a decision still to write down.**")]
    lines += ["", "## Every case", "",
              ("| case | kind | writer | expected | reference validator | reference reader | verdict | decision "
               "| what differs |"), "|---|---|---|---|---|---|---|---|---|"]
    for o in outcomes:
        c = o.case
        expected = "valid" if c["expect"]["valid"] else ", ".join(c["expect"]["validate"]["codes"])
        writer = c.get("writer", {}).get("implementation", "?")
        lines.append("| " + " | ".join(_cell(x) for x in (
            c["id"], c.get("kind", ""), writer, expected, o.validate, o.read, o.verdict, o.decision or "",
            o.detail[:200])) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.interop.parity", description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=REPO / "conformance")
    parser.add_argument("--case", action="append", dest="cases", help="only this case (repeatable)")
    parser.add_argument("--out", type=Path, help="write the Markdown table here")
    parser.add_argument("--json", type=Path, help="write the verdicts as JSON here")
    parser.add_argument("--seconds", type=int, default=60, help="limit per reference call")
    parser.add_argument("--label", help="how the table names the corpus (default: its directory)")
    args = parser.parse_args(argv)
    outcomes = run(args.corpus, args.cases, seconds=args.seconds)
    label = args.label or args.corpus.name
    text = render(outcomes, label)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps([{"id": o.case["id"], "verdict": o.verdict, "decision": o.decision,
                                          "validate": o.validate, "read": o.read, "detail": o.detail}
                                         for o in outcomes], indent=1), encoding="utf-8")
    counts = Counter(o.verdict for o in outcomes)
    print(f"{len(outcomes)} cases: {counts[AGREE]} agree, {counts[DIFFER]} differ, {counts[CRASH]} reference crashes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
