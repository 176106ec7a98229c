"""The committed conformance corpus: it passes offline, its runner's exit codes, its regeneration, its coverage."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from zarr_vectors.conformance import generate
from zarr_vectors.conformance.corpus import CorpusError, load_corpus
from zarr_vectors.conformance.reference import IDS as REFERENCE_IDS
from zarr_vectors.conformance.run import run_corpus
from zarr_vectors.validation.findings import CATALOGUE

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "conformance"

#: Runs ``zv conformance`` with every socket refused: the runner must never need the network.
OFFLINE = """
import socket, sys
def refuse(*a, **k):
    raise OSError("networking is blocked in this test")
class NoSocket(socket.socket):
    def __init__(self, *a, **k):
        refuse()
socket.socket = NoSocket
socket.create_connection = refuse
socket.socketpair = refuse
from pipeline.cli import main
sys.exit(main(["conformance", *sys.argv[1:]]))
"""


def zv_offline(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", OFFLINE, *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def small_copy(tmp_path: Path, *case_ids: str) -> Path:
    """The index, every case file, and the fixtures and expected arrays of ``case_ids`` only."""
    dst = tmp_path / "corpus"
    dst.mkdir()
    shutil.copy(CORPUS / "cases.json", dst)
    shutil.copytree(CORPUS / "cases", dst / "cases")
    for case_id in case_ids:
        shutil.copytree(CORPUS / "fixtures" / case_id, dst / "fixtures" / case_id)
        if (CORPUS / "expected" / case_id).exists():
            shutil.copytree(CORPUS / "expected" / case_id, dst / "expected" / case_id)
    return dst


@pytest.mark.slow
def test_committed_corpus_passes_offline() -> None:
    proc = zv_offline("--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["counts"]["fail"] == 0 and report["counts"]["pass"] >= 150
    assert report["broken"] == []


def test_changed_expected_array_is_a_mismatch(tmp_path: Path) -> None:
    corpus = small_copy(tmp_path, "points-basic", "bad-no-root-json")
    target = corpus / "expected/points-basic/0/positions.npy"
    positions = np.load(target)
    positions[3, 1] += 1.0
    np.save(target, positions)
    proc = zv_offline(str(corpus), "--case", "points-basic", "--case", "bad-no-root-json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.startswith("points-basic "))
    assert " fail " in row
    assert "level 0 positions: 1 values differ, first at (3, 1)" in proc.stdout
    assert next(line for line in proc.stdout.splitlines() if line.startswith("bad-no-root-json ")).count(" pass ")


def test_changed_fixture_byte_is_a_broken_corpus(tmp_path: Path) -> None:
    corpus = small_copy(tmp_path, "points-basic")
    cell = next(p for p in sorted((corpus / "fixtures/points-basic/0/vertices/c").rglob("*")) if p.is_file())
    raw = bytearray(cell.read_bytes())
    raw[len(raw) // 2] ^= 0x40
    cell.write_bytes(bytes(raw))
    proc = zv_offline(str(corpus), "--case", "points-basic")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "broken corpus" in proc.stdout and cell.relative_to(corpus / "fixtures/points-basic").as_posix() in proc.stdout


def test_garbled_or_unknown_corpus_is_broken(tmp_path: Path) -> None:
    corpus = small_copy(tmp_path, "points-basic")
    (corpus / "cases/points-2d.json").write_text("{not json", encoding="utf-8")
    report = run_corpus(corpus, cases=["points-basic"])
    assert report.exit_code == 2 and "points-2d.json is not JSON" in report.broken[0]
    index = json.loads((CORPUS / "cases.json").read_text(encoding="utf-8"))
    (corpus / "cases.json").write_text(json.dumps({**index, "corpus_version": 99}), encoding="utf-8")
    report = run_corpus(corpus)
    assert report.exit_code == 2 and "corpus_version must be 1" in report.broken[0]


def test_listed_file_missing_is_broken(tmp_path: Path) -> None:
    corpus = small_copy(tmp_path, "points-basic")
    (corpus / "fixtures/points-basic/0/zarr.json").unlink()
    report = run_corpus(corpus, cases=["points-basic"])
    assert report.exit_code == 2 and report.broken == ["fixtures/points-basic/0/zarr.json: listed but missing"]


def test_missing_expected_array_is_broken_and_a_garbled_one_a_mismatch(tmp_path: Path) -> None:
    corpus = small_copy(tmp_path, "graph-directed-canonical")
    edges = corpus / "expected/graph-directed-canonical/0/edges.npy"
    edges.write_bytes(b"not an npy file")
    report = run_corpus(corpus, cases=["graph-directed-canonical"])
    assert report.exit_code == 1 and "level 0 edges: expected/graph-directed-canonical/0/edges.npy does not load" \
        in report.results[0].problems[0]
    edges.unlink()
    report = run_corpus(corpus, cases=["graph-directed-canonical"])
    assert report.exit_code == 2
    missing = "expected/graph-directed-canonical/0/edges.npy: named by case graph-directed-canonical but missing"
    assert report.broken == [missing]


def test_level_caps_validation(tmp_path: Path) -> None:
    corpus = small_copy(tmp_path, "points-basic", "bad-garbage-cell", "bad-no-bounds")
    report = run_corpus(corpus, cases=["points-basic", "bad-garbage-cell", "bad-no-bounds"], max_level=2)
    assert [(r.id, r.status, r.level) for r in report.results] == [
        ("points-basic", "pass", 2), ("bad-garbage-cell", "skip", 2), ("bad-no-bounds", "pass", 2)]
    assert report.exit_code == 0


def test_case_files_follow_the_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((CORPUS / "case.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    corpus = load_corpus(CORPUS)
    for case in corpus.cases:
        errors = [e.message for e in validator.iter_errors(case.doc)]
        assert not errors, (case.id, errors[:3])


def test_corpus_counts_coverage_and_size() -> None:
    corpus = load_corpus(CORPUS)
    valid = [c for c in corpus.cases if c.valid]
    invalid = [c for c in corpus.cases if not c.valid]
    assert len(corpus.cases) >= 150
    assert {c.id for c in valid if c.doc["writer"]["implementation"] == "zarr-vectors"} == REFERENCE_IDS
    assert {c.doc["kind"] for c in valid} == {"point_cloud", "line", "polyline", "streamline", "skeleton", "graph",
                                              "mesh"}
    covered = {code for c in invalid for code in c.doc["expect"]["validate"]["codes"]}
    uncoverable = {code for code in CATALOGUE if code.endswith("_CHECK_CRASHED")}
    assert covered | uncoverable == set(CATALOGUE), sorted(set(CATALOGUE) - covered - uncoverable)
    for c in invalid:
        assert c.doc["expect"]["derived_from"] in {v.id for v in valid}
        assert c.doc["expect"]["validate"]["level"] == CATALOGUE[c.doc["expect"]["validate"]["codes"][0]].level
    size = sum(p.stat().st_size for p in CORPUS.rglob("*") if p.is_file())
    assert size < 6_000_000, size  # a repository budget: 265 cases took 5.0 MB, 1.4 MB of it the case files


def test_reference_fixtures_are_checked_by_hash(tmp_path: Path) -> None:
    source = small_copy(tmp_path, *sorted(REFERENCE_IDS))
    victim = source / "fixtures/ref-points/zarr.json"
    victim.write_bytes(victim.read_bytes().replace(b'"zarr_format": 3', b'"zarr_format":  3'))
    out = tmp_path / "out"
    (out / "fixtures").mkdir(parents=True)
    with pytest.raises(CorpusError, match="ref-points: its files are not the ones its case file lists"):
        generate._copy_reference(source, out)


@pytest.mark.slow
def test_regeneration_is_byte_identical(tmp_path: Path) -> None:
    out = tmp_path / "regen"
    generate.generate(out, reference_from=CORPUS)

    def tree(root: Path) -> dict[str, bytes]:
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
                if p.is_file() and p.relative_to(root).parts[0] in ("cases", "fixtures", "expected")
                or p.name in ("cases.json", "case.schema.json")}

    want, got = tree(CORPUS), tree(out)
    assert sorted(want) == sorted(got)
    changed = [k for k in want if want[k] != got[k]]
    assert not changed, changed[:10]


def test_help_names_the_default_corpus() -> None:
    from pipeline.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    text = " ".join(sub.choices["conformance"].format_help().split())
    assert f"this checkout's conformance/, {CORPUS}" in text and "Exit 0: all pass; 1:" in text
