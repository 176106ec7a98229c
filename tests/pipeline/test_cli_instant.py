"""Issue 15 items 3-4: small work starts no cluster, refused work starts nothing, output people read.

Everything here runs on local threads in this process (a cluster only where a test
asks for one, and then the session's), on inputs of a few hundred rows.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import dask
import numpy as np
import pytest
from pipeline_helpers import points_frame

import pipeline.cluster
import zarr_vectors as zv
from pipeline.progress import TextProgress
from zarr_vectors.validation import ValidationResult

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


@pytest.fixture
def csv(tmp_path) -> Path:
    src = tmp_path / "pts.csv"
    points_frame(300, seed=5).to_csv(src, index=False)
    return src


@pytest.fixture
def connects(monkeypatch) -> list[dict]:
    """Every cluster a command asks for, by its arguments; none is started (the call fails the command)."""
    calls: list[dict] = []

    @contextmanager
    def refuse(**kwargs):
        calls.append(kwargs)
        raise AssertionError("a cluster was started")
        yield  # pragma: no cover - a context manager's shape

    monkeypatch.setattr(pipeline.cluster, "connect", refuse)
    return calls


def _no_journal(tmp_path: Path) -> None:
    assert not list(tmp_path.rglob("*.zvjob.json")), sorted(tmp_path.rglob("*"))


def test_small_work_runs_on_local_threads_and_says_so(tmp_path, cli, csv, connects):
    out = tmp_path / "s.zv"
    build = cli("build", "points", csv, out, "--chunk-shape", "25", "--pyramid", "2", "--validate", "5")
    assert build.rc == 0, build.err
    first = build.err.splitlines()[0]
    assert re.fullmatch(r"running on local threads \(small job: [\d.]+ KiB of input < 256\.0 MiB, "
                        r"zarr_vectors\.cli\.cluster-threshold\)", first), first
    assert "dashboard" not in build.err
    # the summary: counts of every level, then the verdict
    level0, level1 = (re.search(rf"^level {n}: (\d+) vertices, (\d+) chunks$", build.out, re.M) for n in (0, 1))
    assert level0 and level1, build.out
    assert int(level0[1]) == 300 and int(level1[1]) == zv.open_store(str(out)).level(1).meta.vertex_count
    assert int(level0[2]) == len(zv.open_store(str(out)).level(0).array("vertices").nonempty_chunks)
    assert "validation (level 5): PASS" in build.out
    for argv in (["validate", out], ["shard", out, "--shard-shape", "2"], ["pyramid", out, "--factor", "4"]):
        run = cli(*argv)
        assert run.rc == 0, run.err
        assert run.err.startswith("running on local threads (small job: ") and "KiB of store" in run.err
    assert connects == []
    assert cli("info", out).rc == 0 and connects == []


@pytest.mark.slow
def test_large_or_asked_for_work_goes_to_a_cluster(tmp_path, cli, csv, monkeypatch, local_cluster):
    """Above the threshold (here 1 KiB), or with --cluster, the command asks for an embedded cluster."""
    from distributed import Client

    asked: list[dict] = []

    @contextmanager
    def session_cluster(**kwargs):  # the session's cluster stands in for a new one
        asked.append(kwargs)
        with Client(local_cluster.scheduler.address) as client:
            yield client

    monkeypatch.setattr(pipeline.cluster, "connect", session_cluster)
    out = tmp_path / "s.zv"
    with dask.config.set({"zarr_vectors.cli.cluster-threshold": "1KiB"}):
        run = cli("build", "points", csv, out, "--chunk-shape", "25")
    assert run.rc == 0, run.err
    n = os.cpu_count()
    assert run.err.startswith(f"starting a local cluster of {n} workers (large job: ")
    assert ">= 1.0 KiB, zarr_vectors.cli.cluster-threshold)" in run.err.splitlines()[0]
    assert "dask dashboard: http" in run.err  # the job ran on that client
    check = cli("validate", out, "--cluster", "--workers", "3")
    assert check.rc == 0, check.err
    assert check.err.startswith("starting a local cluster of 3 workers (asked for: --cluster, --workers)")
    assert [a["workers"] for a in asked] == [n, 3]


@pytest.mark.parametrize("case", ["missing column", "bin shape", "output is a file", "corrupt parquet",
                                  "missing input", "detach and report"])
def test_refused_before_anything_starts(tmp_path, cli, csv, connects, case):
    """Exit 2, one line naming the option, column or file, no cluster, no store and no journal."""
    out, extra = tmp_path / "s.zv", []
    src = csv
    if case == "missing column":
        src = tmp_path / "ab.csv"
        src.write_text("x,q\n1,2\n3,4\n")
        expect = f"{src}: vertex table: needs coordinate columns x, y[, z]"
    elif case == "bin shape":
        extra, expect = ["--bin-shape", "10"], "bin_shape [10.0, 10.0, 10.0] does not divide chunk_shape"
    elif case == "output is a file":
        out.write_text("not a store")
        expect = f"output {str(out)!r} is a file, not a store directory"
    elif case == "corrupt parquet":
        src = tmp_path / "bad.parquet"
        src.write_bytes(b"PAR1 this is not a parquet file")
        expect = f"{str(src)!r} cannot be read: "
    elif case == "missing input":
        src, expect = tmp_path / "none.csv", "input not found"
    else:
        extra, expect = ["--detach", "--report", tmp_path / "r.html", "--scheduler-address", "tcp://127.0.0.1:1"], \
            "--report cannot be honoured with --detach"
    run = cli("build", "points", src, out, "--chunk-shape", "25", *extra)
    assert run.rc == 2
    assert len(run.err.splitlines()) == 1 and expect in run.err, run.err
    assert run.out == "" and connects == []
    assert out.is_file() if case == "output is a file" else not out.exists()
    _no_journal(tmp_path)


def test_report_is_self_contained(tmp_path, cli, csv, scheduler):
    report = tmp_path / "perf.html"
    run = cli("build", "points", csv, tmp_path / "s.zv", "--chunk-shape", "25", "--report", report,
              "--scheduler-address", scheduler)
    assert run.rc == 0, run.err
    html = report.read_text()
    assert "Bokeh" in html and len(html) > 100_000  # the library itself is inside
    assert not re.findall(r"<script[^>]*\bsrc\s*=\s*[\"']?(?:https?:)?//", html, re.I)


def test_a_failed_validation_says_fail(tmp_path, cli, csv, monkeypatch):
    monkeypatch.setattr(zv, "validate", lambda *a, **k: ValidationResult(level=2, errors=["L2_X: broken"]))
    run = cli("build", "points", csv, tmp_path / "s.zv", "--chunk-shape", "25", "--validate", "2")
    assert run.rc == 1
    assert "validation (level 2): FAIL" in run.out and "PASS" not in run.out
    assert "stage 'validate' failed: ValidationFailedError" in run.err


def test_progress_bars_only_on_a_terminal():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for stream, bars in ((io.StringIO(), False), (Terminal(), True)):
        progress = TextProgress(stream)
        for stage, tasks in (("scan", 3), ("pyramid level 1: layout", 1), ("write vertices", 1200)):
            progress.on_stage_start(stage, tasks)
            for _ in range(tasks):
                progress.on_task_end(stage)
            progress.on_stage_end(stage)
        text = stream.getvalue()
        assert ("\r" in text) is bars
        if not bars:  # one line a step, columns aligned for the steps' longest names and counts
            lines = text.splitlines()
            assert [line[:30] for line in lines] == ["scan                         3",
                                                     "pyramid level 1: layout      1",
                                                     "write vertices            1200"], text
            assert [line[30:37] for line in lines] == [" tasks ", " task  ", " tasks "], text
            assert all(re.fullmatch(r" +\d+\.\ds", line[37:]) for line in lines), text
        else:
            assert "[##############################] 3/3" in text


def test_info_names_attributes_and_sharding(tmp_path, cli):
    df = points_frame(400, seed=9)
    out = str(tmp_path / "s.zv")
    zv.write_points(out, df[["x", "y", "z"]].to_numpy(), attributes={"intensity": df["intensity"].to_numpy()},
                    chunk_shape=25)
    zv.shard_store(out, 2)
    run = cli("info", out)
    assert run.rc == 0, run.err
    assert re.search(r"^  attributes: +intensity \(float32\)$", run.out, re.M)
    assert re.search(r"^  sharding: +shards of \[2, 2, 2\] cells$", run.out, re.M)
    files = [p for p in (tmp_path / "s.zv" / "0" / "vertices").rglob("*") if p.is_file()]  # shards + zarr.json
    assert len(files) == 9 and re.search(r"^  vertices +9 files ", run.out, re.M)


def test_info_says_a_level_the_root_names_is_missing(tmp_path, cli):
    """Regression (hunt): with level 0 gone, ``zv info`` listed levels 1 and 2 and exited 0; with level
    1's document gone too it said "has no level 1 (levels: [1, 2])"."""
    import shutil

    out = tmp_path / "s.zv"
    zv.write_points(str(out), np.random.default_rng(1).random((400, 3)) * 100, chunk_shape=25.0)
    zv.build_pyramid(str(out), factors=[2, 4])
    assert cli("info", out).rc == 0
    shutil.rmtree(out / "0")
    (out / "1" / "zarr.json").unlink()
    run = cli("info", out)
    assert run.rc == 1, run
    assert re.search(r"^level 0: +MISSING -- the root's multiscales names it, but 0/zarr.json is not in the store$",
                     run.out, re.MULTILINE), run.out
    assert re.search(r"^level 1: +MISSING -- ", run.out, re.MULTILINE)
    assert re.search(r"^level 2: +\d+ vertices", run.out, re.MULTILINE)
    with pytest.raises(zv.errors.InputError, match=r"level 1's folder holds no zarr\.json"):
        zv.read(str(out), level=1)


def test_info_names_edge_attributes(tmp_path, cli):
    out = tmp_path / "g.zv"
    rng = np.random.default_rng(0)
    edges = np.stack([np.arange(199), np.arange(1, 200)], 1)
    zv.write_graph(str(out), rng.random((200, 3)) * 100, edges, chunk_shape=25.0,
                   edge_attributes={"weight": rng.random(199).astype("f4"), "kind": np.arange(199, dtype="i2")})
    run = cli("info", out)
    assert run.rc == 0, run.err
    assert re.search(r"^  link attrs: +kind \(int16\), weight \(float32\)$", run.out, re.M), run.out
    points = tmp_path / "p.zv"
    zv.write_points(str(points), rng.random((50, 3)) * 100, chunk_shape=25.0)
    assert "link attrs" not in cli("info", points).out


def test_validate_prints_the_missing_cell_before_what_it_breaks(tmp_path, cli):
    out = tmp_path / "g.zv"
    rng = np.random.default_rng(0)
    zv.write_graph(str(out), rng.random((200, 3)) * 100, np.stack([np.arange(199), np.arange(1, 200)], 1),
                   chunk_shape=50, attributes={"w": rng.random(200)})
    cell = next(p for p in sorted((out / "0" / "vertices" / "c").rglob("*")) if p.is_file())
    cell.unlink()
    run = cli("validate", out)
    assert run.rc == 1
    errors = [line for line in run.out.splitlines() if line.startswith("  ERROR")]
    assert len(errors) > 3  # the missing cell, and what it breaks: counts, attributes, fragments, links
    assert errors[0].startswith("  ERROR [L3_NONEMPTY_MISSING] 3: 0/vertices cell ")
    assert any("L3_VERTEX_COUNT" in line for line in errors[1:])


def test_version_and_a_closed_pipe(tmp_path, cli):
    version = cli("--version")
    assert version.rc == 0 and re.fullmatch(r"zv \S+ \(zarr-vectors-dask; writes Zarr Vectors format [\d.]+\)\n",
                                            version.out)
    out = str(tmp_path / "s.zv")
    zv.write_points(out, np.random.default_rng(1).random((50, 3)), chunk_shape=0.5)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "info", out], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    proc.stdout.close()  # the reader is gone before the first line is written (`zv info | head -0`)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert err == ""  # no traceback, no "Exception ignored"


def test_csv_read_whole_builds_the_store_the_dataframe_path_builds(tmp_path, cli, connects):
    """numpy (a small all-numeric CSV), pandas (a larger one) and the lazy dataframe path (a CSV over the
    cluster threshold on DASK_SCHEDULER=threads) give the same store: values and attribute types."""
    df = points_frame(250, seed=3, objects=4)
    src = tmp_path / "pts.csv"
    df.to_csv(src, index=False)
    settings = {"numpy": {}, "pandas": {"zarr_vectors.sources.eager-csv-bytes": "0B"},
                "dataframe": {"zarr_vectors.cli.cluster-threshold": "1B", "scheduler": "threads"}}
    stores = {}
    for name, setting in settings.items():
        with dask.config.set(setting):
            run = cli("build", "points", src, tmp_path / f"{name}.zv", "--chunk-shape", "25")
        assert run.rc == 0, run.err
        assert ("read input" in run.err) is (name == "dataframe")  # the lazy path parses once, into memory
        stores[name] = zv.read(str(tmp_path / f"{name}.zv"))
    for name in ("pandas", "dataframe"):
        a, b = stores["numpy"], stores[name]
        np.testing.assert_array_equal(a.positions, b.positions)
        np.testing.assert_array_equal(a.object_ids, b.object_ids)
        assert {k: v.dtype for k, v in a.attributes.items()} == {k: v.dtype for k, v in b.attributes.items()} \
            == {"intensity": np.float64, "label": np.int64}
        for k in a.attributes:
            np.testing.assert_array_equal(a.attributes[k], b.attributes[k])
