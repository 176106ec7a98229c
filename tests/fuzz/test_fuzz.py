"""The store fuzzer in the test suite (docs/DESIGN.md, *Store fuzzer*).

``test_fuzz_corpus_has_no_failures`` runs one case per applicable (operator, seed store)
pair -- every operator on every kind of seed store -- and fails on any crash, hang,
escape, memory blow-up or silent wrong answer, printing each failing case with the
command that replays it.  The fast tests check the harness itself: the oracle sees
every class in deliberately misbehaving targets, a clean store is OK, and every
operator is deterministic.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from .operators import load_all, mutate
from .oracle import FAILURES
from .report import describe, summary
from .run import pairs, run
from .seeds import SEEDS
from .storeio import inventory

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_fuzz_corpus_has_no_failures():
    # one case per (seed store, operator) pair, rng seed 0; a HANG is confirmed by a rerun alone
    result = run(None, jobs=2, skip_after_hang=True, confirm_hangs=True)
    print(summary(result))
    assert len(result.results) >= 500
    ops = load_all()
    assert {op for op, _ in result.coverage} == set(ops), "an operator ran on no seed store"
    assert {seed for _, seed in result.coverage} == set(SEEDS), "a seed store got no case"
    assert not result.failures, f"{len(result.failures)} of {len(result.results)} cases failed:\n\n" + "\n\n".join(
        describe(r) for r in result.failures)


def _fake_cases(kinds) -> list[dict]:
    return [{"seed": "points", "op": "identity", "rng": 0, "fake": kind} for kind in kinds]


@pytest.fixture(scope="module")
def fake_run():
    from .fakes import KINDS

    # the hang fake hangs in each of its three targets, one after another, for the whole
    # timeout: a run of its own with a short one (the others start up well within it)
    others = [k for k in KINDS if k != "hang"]
    results = run(only=_fake_cases(others), jobs=2, timeout=15).results
    results += run(only=_fake_cases(["hang"]), jobs=1, timeout=4).results
    return {r["case"]["fake"]: r for r in results}


def _failures(result: dict, cls: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in result["failures"]:
        if f["class"] == cls:
            out.setdefault(f["target"], []).append(f["signature"])
    return out


def test_oracle_passes_clean_and_typed_targets(fake_run):
    assert fake_run["ok"]["class"] == "OK", describe(fake_run["ok"])
    assert fake_run["ok"]["failures"] == []
    typed = fake_run["typed"]
    assert typed["class"] == "OK", describe(typed)  # an InconsistentStoreError is the promised answer
    assert typed["targets"]["read:0"]["outcome"] == "typed"
    assert fake_run["nofollow"]["class"] == "OK", describe(fake_run["nofollow"])  # O_NOFOLLOW / missing: no escape


def test_oracle_detects_crashes(fake_run):
    crashes = _failures(fake_run["crash"], "CRASH")
    assert fake_run["crash"]["class"] == "CRASH"
    assert any(s.startswith("L3_CHECK_CRASHED KeyError at tests/fuzz/fakes.py") or
               s.startswith("L3_CHECK_CRASHED KeyError") for s in crashes["validate"]), crashes
    assert crashes["read:0"] == [crashes["read:0"][0]] and "untyped from read(): IndexError" in crashes["read:0"][0]
    assert "zv validate failed: ValueError" in crashes["cli"][0]  # one JSON error line, exit 1: still a crash


def test_oracle_detects_hangs_and_names_the_line(fake_run):
    hangs = _failures(fake_run["hang"], "HANG")
    assert fake_run["hang"]["class"] == "HANG"
    assert set(hangs) == {"validate", "read:0", "cli"}, hangs
    assert hangs["validate"][0].startswith("HANG in validate at tests/fuzz/fakes.py:"), hangs
    assert hangs["validate"][0].endswith("(validate)") and hangs["read:0"][0].endswith("(read)"), hangs
    assert hangs["cli"][0].startswith("HANG in cli at pipeline/cli.py:"), hangs  # innermost project frame


def test_oracle_detects_escapes(fake_run):
    escapes = _failures(fake_run["escape"], "ESCAPE")
    assert fake_run["escape"]["class"] == "ESCAPE"
    assert {"validate", "read:0", "cli"} <= set(escapes), escapes
    messages = [f["message"] for f in fake_run["escape"]["failures"] if f["class"] == "ESCAPE"]
    assert any("os.listdir / -> /" in m for m in messages) and any("/etc/passwd" in m for m in messages), messages


def test_oracle_detects_memory_blowups(fake_run):
    assert fake_run["memory"]["class"] == "MEMORY"
    assert any("MemoryError" in s for s in _failures(fake_run["memory"], "MEMORY")["read:0"])
    rss = _failures(fake_run["rss"], "MEMORY")
    assert fake_run["rss"]["class"] == "MEMORY" and "MEMORY peak RSS in validate" in rss["validate"], rss


def test_oracle_detects_silent_wrong_answers(fake_run):
    wrong = fake_run["wrong"]
    assert wrong["class"] == "WRONG", describe(wrong)
    assert _failures(wrong, "WRONG") == {"read:0": ["WRONG read:0: positions differs"]}


def test_every_class_is_reported_with_a_reproducing_command(fake_run):
    for kind, result in fake_run.items():
        if result["class"] in FAILURES:
            text = describe(result)
            assert "reproduce: PYTHONPATH=. .venv/bin/python -m tests.fuzz.run --only points:identity:0" in text


# ---------------------------------------------------------------------------------------
# the operators
# ---------------------------------------------------------------------------------------
def _snapshot(root: Path) -> dict[str, object]:
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                target = os.readlink(p)
                out[rel] = ("link", target.replace(str(root.parent), "<case>"))
            elif p.is_fifo():
                out[rel] = ("fifo",)
            elif p.is_dir():
                out[rel] = ("dir",)
            else:
                out[rel] = ("file", p.read_bytes())
    return out


def test_there_are_forty_operators_across_every_family():
    ops = load_all()
    assert len(ops) >= 40
    assert {op.family for op in ops.values()} == {"json", "cell", "payload", "bomb", "shard", "tree"}
    assert all(op.doc for op in ops.values()), [n for n, op in ops.items() if not op.doc]


@pytest.fixture
def scratch():
    import tempfile

    from .forkserver import scratch_root

    with tempfile.TemporaryDirectory(dir=scratch_root()) as d:
        yield Path(d)


@pytest.mark.parametrize("seed", ["graph", "sharded"])
def test_operators_are_deterministic_and_change_the_store(scratch, seed):
    tmp_path = scratch
    base = tmp_path / "seed.zv"
    SEEDS[seed](str(base))
    inv = inventory(str(base))
    applicable = [name for s, name in pairs({seed: inv}) if s == seed]
    assert applicable
    before = _snapshot(base)
    for name in applicable:
        trees = []
        for run_no in (1, 2):
            case = tmp_path / f"{name}-{run_no}"
            store = case / "store"
            (case / "outside").mkdir(parents=True)
            shutil.copytree(base, store, symlinks=True)
            mutate(load_all()[name], store, case / "outside", inv, 3, seed)
            trees.append({k: v for k, v in _snapshot(store).items()})
            for p in (case / "store", case / "outside"):
                shutil.rmtree(p)
        assert trees[0] == trees[1], f"{name} is not deterministic"
        assert trees[0] != before, f"{name} left the store unchanged"
