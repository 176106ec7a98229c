"""Request accounting on the command line: ``zv build --json`` / text / ``--report``, ``zv info``,
``zv validate --json``, each stage's requests gathered from the cluster's worker processes."""

from __future__ import annotations

import pytest
from pipeline_helpers import journal, points_frame

from tests.s3server import boto_client
from zarr_vectors.store.accounting import KINDS

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

FIELDS = {*KINDS, "bytes_read", "bytes_written"}


@pytest.fixture
def table(tmp_path):
    src = tmp_path / "pts.parquet"
    points_frame(3000, seed=23, objects=5, float32=True).to_parquet(src, index=False)
    return src


def test_build_json_reports_each_stages_requests(tmp_path, cli, scheduler, table):
    out, report = tmp_path / "s.zv", tmp_path / "perf.html"
    run = cli("build", "points", table, out, "--chunk-shape", "25", "--pyramid", "2", "--validate", "5",
              "--json", "--report", report, "--scheduler-address", scheduler)
    assert run.rc == 0, run.err
    stages = run.json()["stages"]
    assert list(stages) == ["write", "pyramid", "validate"]
    for name, info in stages.items():
        doc = info["requests"]
        assert FIELDS <= set(doc), name
        assert doc["by_stage"], name
        for kind in FIELDS:  # the total is the sum of its steps
            assert doc[kind] == sum(step.get(kind, 0) for step in doc["by_stage"].values()), (name, kind)
    write, pyramid, check = (stages[s]["requests"] for s in ("write", "pyramid", "validate"))
    cells = [p for p in (out / "0" / "vertices" / "c").rglob("*") if p.is_file()]
    assert write["by_stage"]["write vertices"]["PUT"] >= len(cells) > 1  # done by the tasks, on the workers
    assert write["bytes_written"] >= sum(p.stat().st_size for p in cells)
    assert pyramid["GET"] > 0 and pyramid["PUT"] > 0
    assert check["by_stage"]["validate"]["GET"] > 0 and check["by_stage"]["validate"]["PUT"] == 0  # it only reads
    assert journal(out)["stages"]["write"]["requests"] == write
    html = report.read_text()
    assert 'id="zv-requests"' in html and "write: write vertices" in html
    assert html.rstrip().lower().endswith("</html>")  # inserted inside the document


def test_build_text_and_info_show_requests(tmp_path, cli, scheduler, table):
    out = tmp_path / "s.zv"
    run = cli("build", "points", table, out, "--chunk-shape", "25", "--scheduler-address", scheduler)
    assert run.rc == 0, run.err
    line = next(line for line in run.out.splitlines() if line.startswith("write "))
    assert " PUT, " in line and "B written" in line
    info = cli("info", out)
    assert info.rc == 0, info.err
    assert "(this command)" in info.out and "requests by stage:" in info.out
    assert any(line.strip().startswith("write ") and " PUT, " in line for line in info.out.splitlines())


def test_validate_json_reports_its_requests(tmp_path, cli, scheduler, table):
    out = tmp_path / "s.zv"
    assert cli("build", "points", table, out, "--chunk-shape", "25", "--scheduler-address", scheduler).rc == 0
    run = cli("validate", out, "--json", "--scheduler-address", scheduler)
    assert run.rc == 0, run.err
    doc = run.json()["requests"]
    files = [p for p in out.rglob("*") if p.is_file()]
    assert doc["PUT"] == doc["DELETE"] == 0
    assert doc["GET"] >= len([p for p in files if p.name == "zarr.json"])
    assert 0 < doc["bytes_read"]


@pytest.mark.s3
def test_build_on_s3_counts_what_the_server_saw(tmp_path, cli, s3_server, s3_bucket, local_cluster, table):
    """The stages' PUTs, gathered from two worker processes, and the journal's own saves are the
    server's PUTs; no stage counts a request the server did not see."""
    bucket, options = s3_bucket
    opts = ["--storage-option", f"endpoint_url={options['endpoint_url']}", "--storage-option", "key=test",
            "--storage-option", "secret=test", "--storage-option", "client_kwargs.region_name=us-east-1"]
    url = f"s3://{bucket}/out/p.zv"
    s3_server.reset()
    run = cli("build", "points", table, url, "--chunk-shape", "25", "--pyramid", "2", "--validate", "5", "--json",
              *opts, "--scheduler-address", local_cluster.scheduler.address)
    assert run.rc == 0, run.err
    seen = s3_server.requests()
    stages = run.json()["stages"]
    total = {k: sum(s["requests"][k] for s in stages.values()) for k in FIELDS}
    journal = run.json()["journal_requests"]
    assert journal["PUT"] >= 2  # running, then done: every other save may be superseded before it is written
    assert journal["GET"] == journal["LIST"] == journal["DELETE"] == 0
    assert total["PUT"] + journal["PUT"] == seen["PUT"]
    assert total["HEAD"] <= seen.get("HEAD", 0)
    assert total["GET"] + total["LIST"] <= seen["GET"]
    s3 = boto_client(options["endpoint_url"])
    stored = sum(o["Size"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="out/p.zv/")["Contents"])
    assert total["bytes_written"] >= stored


def test_detached_job_journals_its_stages_requests(tmp_path, cli, scheduler, table):
    """A detached job runs on a worker and submits its stages from there: still counted per stage."""
    from pipeline_helpers import wait_for

    out = tmp_path / "s.zv"
    run = cli("build", "points", table, out, "--chunk-shape", "25", "--validate", "3", "--detach", "--json",
              "--scheduler-address", scheduler)
    assert run.rc == 0, run.err

    def finished():
        state = journal(out) if (tmp_path / "s.zv.zvjob.json").exists() else {}
        assert state.get("status") != "failed", state.get("error")
        return state if state.get("status") == "done" else None

    state = wait_for(finished, timeout=120, interval=0.2, what="detached job")
    write = state["stages"]["write"]["requests"]
    cells = [p for p in (out / "0" / "vertices" / "c").rglob("*") if p.is_file()]
    assert write["by_stage"]["write vertices"]["PUT"] >= len(cells) > 1
    assert "incomplete" not in write
    assert state["stages"]["validate"]["requests"]["GET"] > 0


def test_failed_stage_journals_the_requests_it_made(tmp_path, table, monkeypatch):
    """A stage that fails half-way still says what it asked of the store before failing."""
    import dask

    from pipeline import jobs
    from zarr_vectors.errors import StageFailedError
    from zarr_vectors.store.backend import Storage

    out = tmp_path / "s.zv"

    def broken(spec):
        def write() -> dict:
            Storage(spec.out).put_many({"a": b"12", "b": b"345"})
            raise RuntimeError("disk on fire")

        return {"write": write}

    monkeypatch.setattr(jobs, "_stage_functions", broken)
    spec = jobs.BuildSpec(kind="points", inputs=[str(table)], out=str(out), chunk_shape=25.0)
    with dask.config.set(scheduler="synchronous"), pytest.raises(StageFailedError, match="disk on fire") as failed:
        jobs.run_build(spec)
    assert failed.value.stage == "write" and isinstance(failed.value.cause, RuntimeError)
    stage = journal(out)["stages"]["write"]
    assert stage["status"] == "failed"
    assert stage["requests"]["by_stage"]["client"] == {"GET": 0, "PUT": 2, "LIST": 0, "HEAD": 0, "DELETE": 0,
                                                       "bytes_read": 0, "bytes_written": 5}
