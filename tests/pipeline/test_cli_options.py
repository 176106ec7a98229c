"""``zv build`` options and exit codes, ``zv info``, ``zv status``, ``zv validate`` on built stores."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from file_tree import tree
from pipeline_helpers import journal, points_frame, write_parquet_parts

import zarr_vectors as zv
from zarr_vectors.validation import validate

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


@pytest.fixture
def table(tmp_path):
    df = points_frame(3000, seed=21, objects=7, float32=True)
    src = tmp_path / "pts.parquet"
    df.to_parquet(src, index=False)
    return df, src


def build(cli, scheduler, src, out, *extra):
    return cli("build", "points", src, out, "--chunk-shape", "25", "--scheduler-address", scheduler, *extra)


# ---------------------------------------------------------------------------
# --json, --report, info, status
# ---------------------------------------------------------------------------
def test_json_summary_reports_stages(tmp_path, cli, scheduler, table):
    df, src = table
    out = tmp_path / "s.zv"
    run = build(cli, scheduler, src, out, "--validate", "4", "--json")
    assert run.rc == 0, run.err
    assert run.err == ""  # no progress bars or dashboard line in --json mode
    summary = run.json()
    assert summary["ok"] is True and summary["error"] is None
    assert summary["store"] == str(out)
    assert list(summary["stages"]) == ["write", "validate"]
    write, check = summary["stages"]["write"], summary["stages"]["validate"]
    assert write["status"] == "done" and write["kind"] == "point_cloud"
    assert (write["num_vertices"], write["num_objects"], write["num_links"]) == (3000, 7, 0)
    assert write["num_cells"] == len(np.unique(np.floor(df[["x", "y", "z"]].to_numpy(np.float64) / 25), axis=0))
    assert check == {**check, "status": "done", "level": 4, "errors": 0}
    assert isinstance(write["seconds"], float) and write["seconds"] > 0
    assert journal(out)["job_id"] == summary["job_id"]


def test_text_output_progress_and_report(tmp_path, cli, scheduler, table):
    _, src = table
    out, report = tmp_path / "s.zv", tmp_path / "perf.html"
    run = build(cli, scheduler, src, out, "--report", report)
    assert run.rc == 0, run.err
    # not a terminal: one plain line per runner step when it ends (no redrawn bars)
    assert "\r" not in run.err and "[" not in run.err
    steps = dict(re.findall(r"^(\S.*?) +(\d+) tasks? +[\d.]+s$", run.err, re.M))
    assert {"scan", "write vertices", "reconcile"} <= set(steps) and all(int(n) > 0 for n in steps.values())
    assert "dask dashboard: http" in run.err
    assert f"performance report: {report}" in run.out
    html = report.read_text()
    assert html.lstrip().lower().startswith("<!doctype html") and "Dask Performance Report" in html


def test_info(tmp_path, cli, scheduler, table):
    df, src = table
    out = tmp_path / "s.zv"
    assert build(cli, scheduler, src, out).rc == 0
    run = cli("info", out)
    assert run.rc == 0, run.err
    lines = dict(line.split(":", 1) for line in run.out.splitlines() if ":" in line)
    assert lines["store"].strip() == str(out)
    assert lines["geometry"].strip() == "point_cloud"
    assert lines["chunk_shape"].strip() == "[25.0, 25.0, 25.0]"
    cells = len(np.unique(np.floor(df[["x", "y", "z"]].to_numpy(np.float64) / 25), axis=0))
    assert lines["level 0"].strip().startswith(f"3000 vertices, {cells} chunks;")
    assert lines["consolidated"].strip() == "no"
    assert lines["  sharding"].strip() == "none"
    assert lines["  attributes"].strip() == ", ".join(f"{c} ({df[c].dtype})" for c in df.columns
                                                      if c not in ("x", "y", "z", "object_id"))
    files = [p for p in out.rglob("*") if p.is_file()]
    assert lines["total"].strip().startswith(f"{len(files)} files")  # every storage object, by level and array
    vertices = [p for p in files if p.relative_to(out).parts[:2] == ("0", "vertices")]
    assert re.search(rf"^  vertices +{len(vertices)} files +", run.out, re.M)
    lo, hi = json.loads(lines["bounds"].strip())
    pos = df[["x", "y", "z"]].to_numpy()
    np.testing.assert_allclose(lo, pos.min(axis=0), rtol=1e-5)  # rounded to 6 significant digits
    np.testing.assert_allclose(hi, pos.max(axis=0), rtol=1e-5)
    assert all(float(f"{v:.6g}") == v for v in lo + hi)
    assert cli("info", tmp_path / "missing.zv").rc == 2


def test_store_commands_run_on_the_cluster_given(tmp_path, cli, scheduler, local_cluster, table):
    """zv pyramid / shard / validate on a running cluster: their tasks run on its workers."""
    _, src = table
    out = tmp_path / "s.zv"
    assert build(cli, scheduler, src, out).rc == 0
    local_cluster.get_task_stream()  # registers the scheduler's task stream from here on
    start = time.time()
    for argv in (["pyramid", out, "--factor", "2"], ["shard", out, "--shard-shape", "2"], ["validate", out]):
        run = cli(*argv, "--scheduler-address", scheduler)
        assert run.rc == 0, run.err
        assert "dask dashboard: http" in run.err
    ran = {str(t["key"][0] if isinstance(t["key"], tuple) else t["key"]).rsplit("-", 1)[0].rsplit("-", 4)[0]
           for t in local_cluster.get_task_stream(start=start)}
    assert {"bin_group", "_pack_task", "decode_manifest_chunk"} <= ran, sorted(ran)
    assert len(zv.read(str(out), level=1)) > 0 and validate(str(out), 5).ok


def test_status_by_store_and_by_job_id(tmp_path, cli, scheduler, table):
    _, src = table
    out = tmp_path / "s.zv"
    run = build(cli, scheduler, src, out, "--validate", "3", "--json")
    assert run.rc == 0, run.err
    job = run.json()["job_id"]
    by_id, by_store = cli("status", job, "--json"), cli("status", out, "--json")
    assert by_id.rc == by_store.rc == 0
    state = by_id.json()
    assert state == by_store.json()
    assert state["job_id"] == job and state["status"] == "done" and state["store"] == str(out)
    assert state["planned"] == ["write", "validate"]
    assert [state["stages"][s]["status"] for s in state["planned"]] == ["done", "done"]
    assert state["stages"]["write"]["num_vertices"] == 3000
    assert state["stages"]["write"]["tasks_done"] == state["stages"]["write"]["tasks_total"]
    text = cli("status", job)
    assert text.rc == 0
    assert text.out.splitlines()[0] == f"job {job}: done  (store {out})"
    assert [line.split()[:2] for line in text.out.splitlines()[1:]] == [["write", "done"], ["validate", "done"]]
    unknown = cli("status", "0123456789ab")
    assert unknown.rc == 2 and "no job journal" in unknown.err


# ---------------------------------------------------------------------------
# --dry-run
# ---------------------------------------------------------------------------
def test_dry_run_prints_a_checked_plan_and_writes_nothing(tmp_path, cli, scheduler, zv_config):
    df = points_frame(6000, seed=22)
    src = write_parquet_parts(df, tmp_path / "in.parquet", parts=4)
    out = tmp_path / "s.zv"
    zv_config("write.min-rows-per-task", 700)  # several owners for a small input
    run = build(cli, scheduler, src, out, "--dry-run", "--json", "--validate", "5")
    assert run.rc == 0, run.err
    plan = run.json()
    assert not out.exists() and not Path(str(out) + ".zvjob.json").exists()
    assert list(tmp_path.iterdir()) == [tmp_path / "home", tmp_path / "in.parquet"]
    assert plan["kind"] == "points" and plan["vertices"] == 6000 and plan["stages"] == ["write", "validate"]
    assert plan["checks"] == {"owners_disjoint": True, "every_cell_owned": True}
    # the occupied cells, in the grid's C order (= lexicographic order of chunk coordinates)
    chunk = np.floor(df[["x", "y", "z"]].to_numpy(np.float64) / 25).astype(int)
    cells, counts = np.unique(chunk, axis=0, return_counts=True)
    keys = [".".join(map(str, c)) for c in cells.tolist()]
    assert plan["cells"] == len(keys)
    assert plan["grid"] == {"origin": cells.min(axis=0).tolist(), "shape": (np.ptp(cells, axis=0) + 1).tolist()}
    owners = plan["owners"]
    assert len(owners) > 3
    start = 0
    for owner in owners:  # consecutive runs: disjoint, and together every cell exactly once
        assert owner["cells"] >= 1
        assert owner["first"] == keys[start] and owner["last"] == keys[start + owner["cells"] - 1]
        assert owner["rows"] == counts[start : start + owner["cells"]].sum()
        start += owner["cells"]
    assert start == len(keys) and sum(o["rows"] for o in owners) == 6000
    # the text form is the same plan, indented
    text = build(cli, scheduler, src, out, "--dry-run", "--validate", "5")
    assert text.rc == 0 and json.loads(text.out) == plan
    assert not out.exists()


def test_dry_run_of_a_graph_plans_its_vertex_table(tmp_path, cli, scheduler):
    from pipeline_helpers import graph_frames

    g = graph_frames(400, 900)
    vsrc, esrc = tmp_path / "v.parquet", tmp_path / "e.parquet"
    g.vertices.to_parquet(vsrc, index=False)
    g.edges.to_parquet(esrc, index=False)
    run = cli("build", "graph", vsrc, esrc, tmp_path / "g.zv", "--chunk-shape", "50", "--dry-run", "--json",
              "--scheduler-address", scheduler)
    assert run.rc == 0, run.err
    plan = run.json()
    cells = np.unique(np.floor(g.vertices[["x", "y", "z"]].to_numpy() / 50).astype(int), axis=0)
    assert (plan["kind"], plan["vertices"], plan["cells"]) == ("graph", 400, len(cells))
    assert sum(o["cells"] for o in plan["owners"]) == len(cells)
    assert not (tmp_path / "g.zv").exists()


# ---------------------------------------------------------------------------
# exit codes
# ---------------------------------------------------------------------------
def test_exit_2_for_a_missing_input(tmp_path, cli, scheduler):
    out = tmp_path / "s.zv"
    run = build(cli, scheduler, tmp_path / "nope.parquet", out)
    assert run.rc == 2
    assert f"input not found: '{tmp_path / 'nope.parquet'}'" in run.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]  # no store, no journal


def test_exit_2_for_a_bad_kind_is_the_process_exit_code(tmp_path, table):
    _, src = table
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", "build", "pointz", str(src), str(tmp_path / "s.zv")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "invalid choice: 'pointz'" in proc.stderr
    assert not (tmp_path / "s.zv").exists()


@pytest.mark.parametrize("shape, message", [
    ("abc", "expected comma-separated numbers, got 'abc'"),
    ("-5", "chunk shape entries must be finite and > 0, found -5.0"),
    ("0,10,10", "chunk shape entries must be finite and > 0, found [0.0, 10.0, 10.0]"),
    ("nan", "chunk shape entries must be finite and > 0, found nan"),
])
def test_exit_2_for_a_bad_chunk_shape(tmp_path, cli, scheduler, table, shape, message):
    _, src = table
    run = cli("build", "points", src, tmp_path / "s.zv", "--chunk-shape", shape, "--scheduler-address", scheduler)
    assert run.rc == 2
    assert message in run.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "pts.parquet"]


def test_exit_2_for_a_chunk_shape_of_the_wrong_rank(tmp_path, cli, scheduler, table):
    """The input's schema says how many axes there are: refused before the job starts, so no store and no journal."""
    _, src = table
    out = tmp_path / "s.zv"
    run = cli("build", "points", src, out, "--chunk-shape", "10,10", "--scheduler-address", scheduler)
    assert run.rc == 2
    assert "chunk_shape has 2 entries but positions have 3 columns" in run.err
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "pts.parquet"]  # no journal either


def test_exit_2_for_an_existing_store_without_overwrite(tmp_path, cli, scheduler, table):
    df, src = table
    out = tmp_path / "s.zv"
    first = build(cli, scheduler, src, out, "--json")
    assert first.rc == 0
    before, journal_before = tree(out), journal(out)
    again = build(cli, scheduler, src, out)
    assert again.rc == 2
    assert "already exists" in again.err and "--overwrite" in again.err
    assert tree(out) == before
    assert journal(out) == journal_before  # the refused job leaves the first job's journal alone
    assert cli("status", out).rc == 0
    replaced = build(cli, scheduler, src, out, "--overwrite", "--json", "--chunk-shape", "50")
    assert replaced.rc == 0, replaced.err
    assert zv.open_store(str(out)).root.chunk_shape == (50.0, 50.0, 50.0)
    assert journal(out)["job_id"] == replaced.json()["job_id"] != first.json()["job_id"]


def test_exit_2_for_an_input_inside_the_output_and_for_an_output_that_is_no_store(tmp_path, cli, scheduler, table):
    """Regression (hunt): ``zv build points dir/pts.parquet dir --overwrite`` emptied ``dir``,
    its input included, and exited 0.  Both are refused before the job starts: nothing is
    deleted and no journal is written."""
    _, src = table
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep")
    inside = folder / "pts.parquet"
    inside.write_bytes(open(src, "rb").read())
    before = tree(folder)
    run = build(cli, scheduler, inside, folder, "--overwrite")
    assert run.rc == 2 and "lies inside the output" in run.err, run.err
    run = build(cli, scheduler, src, folder, "--overwrite")
    assert run.rc == 2 and "which no Zarr Vectors store holds" in run.err, run.err
    assert tree(folder) == before and not (tmp_path / "project.zvjob.json").exists()


def test_exit_1_when_validation_finds_errors(tmp_path, cli, scheduler, table):
    _, src = table
    out = tmp_path / "s.zv"
    assert build(cli, scheduler, src, out).rc == 0
    assert cli("validate", out, "--level", "5").rc == 0
    # corrupt: drop one vertices cell the level's presence list names
    cell = sorted((out / "0" / "vertices" / "c").rglob("*"))
    victim = next(p for p in cell if p.is_file())
    victim.unlink()
    check = cli("validate", out, "--level", "3", "--json")
    assert check.rc == 1
    result = check.json()
    assert result["ok"] is False and result["errors"]
    # the build's own validate stage fails the same way: exit 1, the journal says why
    run = build(cli, scheduler, src, out, "--resume", "--validate", "3")
    assert run.rc == 1
    assert "validation at level 3 found" in run.err
    state = journal(out)
    assert state["status"] == "failed" and state["stages"]["validate"]["status"] == "failed"
    assert state["stages"]["write"]["status"] == "done"  # not redone on resume
    assert cli("status", out).rc == 1


# ---------------------------------------------------------------------------
# an in-process scheduler named in dask.config: no cluster starts
# ---------------------------------------------------------------------------
@pytest.fixture
def no_cluster(monkeypatch):
    """Starting an embedded cluster fails the test."""
    import pipeline.cluster

    def refuse(**_: object) -> None:
        raise AssertionError("an embedded LocalCluster was started")

    monkeypatch.setattr(pipeline.cluster, "local_cluster", refuse)


@pytest.mark.parametrize("scheduler", ["threads", "synchronous"])
def test_local_scheduler_in_dask_config_starts_no_cluster(tmp_path, cli, table, no_cluster, scheduler):
    import dask

    df, src = table
    out = tmp_path / "s.zv"
    with dask.config.set(scheduler=scheduler):
        run = cli("build", "points", src, out, "--chunk-shape", "25", "--validate", "3")
        assert run.rc == 0, run.err
        assert "dashboard" not in run.err
        check = cli("validate", out, "--level", "5")
        assert check.rc == 0, check.err
        assert "dashboard" not in check.err and "PASS" in check.out
        assert cli("pyramid", out, "--factor", "2").rc == 0
        assert cli("shard", out, "--shard-shape", "2").rc == 0
        report = cli("build", "points", src, tmp_path / "r.zv", "--chunk-shape", "25", "--report", tmp_path / "r.html")
        assert report.rc == 2 and "--report needs a Dask cluster" in report.err
    assert len(zv.read(str(out))) == len(df) and validate(str(out), 5).ok


def test_an_address_wins_over_a_local_scheduler(tmp_path, cli, scheduler, table, no_cluster):
    import dask

    _, src = table
    out = tmp_path / "s.zv"
    with dask.config.set(scheduler="threads"):
        run = build(cli, scheduler, src, out)
        assert run.rc == 0, run.err
        assert "dask dashboard: http" in run.err  # it ran on the cluster given


def test_dask_scheduler_environment_runs_zv_validate_in_process(tmp_path, cli, scheduler, table):
    """``DASK_SCHEDULER=threads zv validate`` (a fresh process): no cluster, no dashboard, the usual verdict."""
    import os

    _, src = table
    out = tmp_path / "s.zv"
    assert build(cli, scheduler, src, out).rc == 0
    env = {**os.environ, "DASK_SCHEDULER": "threads"}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", "validate", str(out)], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "dashboard" not in proc.stderr and "PASS" in proc.stdout
    (out / "zarr.json").unlink()
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", "validate", str(out), "--json"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 1 and json.loads(proc.stdout)["ok"] is False


@pytest.mark.parametrize("factor", ["0.5", "nan", "2,0", "1e307"])
def test_exit_2_for_a_pyramid_factor_below_1_before_anything_is_written(tmp_path, cli, scheduler, table, factor):
    """Regression (hunt): the factors were checked by the pyramid stage, after the write -- a
    store and a journal were left, and with ``--overwrite`` the old store was already gone.  A
    factor whose bin overflows (1e307) wrote an unreadable store (a later hunt)."""
    _, src = table
    out = tmp_path / "s.zv"
    run = build(cli, scheduler, src, out, "--pyramid", factor)
    expected = "level 1's bin would be [inf], not finite" if factor == "1e307" else "must be a finite number"
    assert run.rc == 2 and expected in run.err, run.err
    assert not out.exists() and not (tmp_path / "s.zv.zvjob.json").exists()


def test_a_job_index_that_cannot_be_written_is_a_warning_not_a_failed_build(tmp_path, cli, table, monkeypatch):
    """Regression (hunt): with a home directory that could not hold ``~/.cache/zv/jobs`` (a file
    where it should be) every build failed with NotADirectoryError and wrote no store."""
    _, src = table
    home = tmp_path / "home-file"
    home.write_text("not a directory")
    monkeypatch.setenv("HOME", str(home))
    out = tmp_path / "s.zv"
    run = cli("build", "points", src, out)
    assert run.rc == 0, run.err
    assert run.err.count("not recorded in") == 1 and "ask `zv status` with the store's path" in run.err
    assert cli("status", out).rc == 0


@pytest.mark.parametrize("name", ["nosuch", "x", "object_id"], ids=["missing", "an-axis", "the-object-ids"])
def test_exit_2_for_an_aggregate_of_no_vertex_attribute_before_anything_is_written(tmp_path, cli, scheduler, table,
                                                                                   name):
    """The ``--aggregate`` names were checked by the pyramid stage, after the write (with
    ``--overwrite`` the old store already gone); an attribute the input has still passes."""
    _, src = table
    out = tmp_path / "s.zv"
    run = build(cli, scheduler, src, out, "--pyramid", "2", "--aggregate", f"{name}=max")
    assert run.rc == 2 and "which the input has no vertex attribute of" in run.err, run.err
    assert not out.exists() and not (tmp_path / "s.zv.zvjob.json").exists()
    assert build(cli, scheduler, src, out, "--pyramid", "2", "--aggregate", "intensity=max").rc == 0


@pytest.mark.parametrize("kind, suffixes", [("points", [".parquet"]), ("points", [".csv"]),
                                            ("graph", [".parquet", ".edges.parquet"])],
                         ids=["parquet", "csv", "graph-tables"])
def test_exit_2_for_an_input_of_no_rows_before_anything_is_written(tmp_path, cli, kind, suffixes):
    """An input of no rows was refused by the write stage, after the job had started: exit 1 and
    a journal left beside the path (and numpy's "input contained no data" warning for a CSV)."""
    import warnings

    import pandas as pd

    empty = pd.DataFrame({"x": [], "y": [], "z": []}, dtype="f4")
    inputs = []
    for suffix in suffixes:
        path = tmp_path / f"in{suffix}"
        frame = pd.DataFrame({"source": [], "target": []}, dtype="i8") if suffix == ".edges.parquet" else empty
        frame.to_csv(path, index=False) if suffix == ".csv" else frame.to_parquet(path, index=False)
        inputs.append(path)
    out = tmp_path / "s.zv"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        run = cli("build", kind, *inputs, out, "--chunk-shape", "25")
    assert run.rc == 2 and f"{inputs[0]}: the input has no vertices (no rows)" in run.err, run.err
    assert not [w for w in seen if "no data" in str(w.message)]  # the refusal is the one word about it
    assert not out.exists() and not (tmp_path / "s.zv.zvjob.json").exists()


def test_ctrl_c_is_one_line_and_exit_130(cli, monkeypatch):
    """Regression (hunt): a real Ctrl-C ended ``zv build`` with a ``KeyboardInterrupt`` traceback
    (its journal and note were written).  Now one line naming the command, and the shell's 130."""
    import pipeline.cli

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline.cli, "_status", interrupted)
    run = cli("status", "anything")
    assert (run.rc, run.err) == (130, "zv status: interrupted\n")
