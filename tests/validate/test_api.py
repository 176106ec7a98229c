"""The validator's entry points: result shape, D7 ordering, crashes as findings, stores, CLI, docs."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import dask
import fsspec
import numpy as np
import pytest
from conftest import edit_attrs, first_chunk, read_payload, write_payload

import zarr_vectors as zv
from pipeline.cli import main as zv_main
from zarr_vectors.errors import InputError, StoreNotFoundError
from zarr_vectors.validation import ValidationResult, validate
from zarr_vectors.validation.findings import CATALOGUE, catalogue_markdown

REPO = Path(__file__).resolve().parents[2]


def test_result_shape(base_stores: dict[str, Path]) -> None:
    result = validate(str(base_stores["points"]), 5)
    assert isinstance(result, ValidationResult)
    assert result.ok and result.errors == [] and result.warnings == []
    assert result.levels_run == [1, 2, 3, 4, 5]
    assert all(line[0] in "12345" and line[1:3] == ": " for line in result.passed)
    assert any("L4_POINT_OUTSIDE_BIN" in line for line in result.passed)
    assert "PASS" in result.summary()
    # the verdict and counts in one line, not every passed rule
    assert repr(result) == (f"ValidationResult(level=5, store={str(base_stores['points'])!r}, ok=True, 0 errors, "
                            f"0 warnings, {len(result.passed)} passed)")
    doc = result.to_json()
    assert set(doc) == {"ok", "level", "errors", "warnings", "passed", "findings"}


def test_level_argument(base_stores: dict[str, Path]) -> None:
    assert validate(str(base_stores["points"]), 2).levels_run == [1, 2]
    with pytest.raises(InputError):
        validate(str(base_stores["points"]), 6)


def test_level1_error_stops_deeper_levels(copy_store: Callable[[str], Path]) -> None:
    store = copy_store("points")
    edit_attrs(store, "0/vertices", lambda a: a.__setitem__("zv_array", "mystery"))
    result = validate(str(store), 5)
    assert result.levels_run == [1]
    assert [f.code for f in result.findings] == ["L1_ZV_ARRAY_UNKNOWN"]
    not_run = [p for p in result.passed if "not run" in p]
    assert [p.split(":")[0] for p in not_run] == ["2", "3", "4", "5"]


def test_level2_error_stops_deeper_levels(copy_store: Callable[[str], Path]) -> None:
    store = copy_store("points")
    edit_attrs(store, "", lambda a: a["zarr_vectors"].__setitem__("zv_version", "0.8.0"))
    result = validate(str(store), 5)
    assert result.levels_run == [1, 2]
    assert sum("not run" in p for p in result.passed) == 3


def test_level3_errors_do_not_stop_levels_4_and_5(copy_store: Callable[[str], Path]) -> None:
    store = copy_store("graph")
    edit_attrs(store, "0", lambda a: a["zarr_vectors_level"].__setitem__("vertex_count", 1))
    edit_attrs(store, "", lambda a: a["zarr_vectors"].__setitem__("links_convention", "implicit_sequential"))
    result = validate(str(store), 5)
    assert result.levels_run == [1, 2, 3, 4, 5]
    assert {"L3_VERTEX_COUNT", "L4_LINKS_CONVENTION"} <= {f.code for f in result.findings}


def test_exception_in_a_check_is_a_finding(copy_store: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    from zarr_vectors.validation.consistency import vertices

    def boom(*args: object, **kw: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(vertices, "_check_fragment_ranges", boom)
    result = validate(str(copy_store("points")), 5)
    crashed = [f for f in result.findings if f.code == "L3_CHECK_CRASHED"]
    assert crashed and "disk on fire" in crashed[0].message
    assert not result.ok


def test_unreachable_store_raises(tmp_path: Path) -> None:
    with pytest.raises(StoreNotFoundError):
        validate(str(tmp_path / "nothing-here"), 5)


def test_directory_without_root(tmp_path: Path) -> None:
    (tmp_path / "s" / "0").mkdir(parents=True)
    (tmp_path / "s" / "0" / "x").write_text("x")
    result = validate(str(tmp_path / "s"), 5)
    assert "L1_STORE_EMPTY" in {f.code for f in result.findings}


def test_batch_sizes_are_dask_settings(copy_store: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """validate.*-batch-bytes size the level-3 tasks (read while planning); findings do not depend on them."""
    import dask

    from zarr_vectors.validation import consistency
    from zarr_vectors.validation.consistency import cells, links

    store = copy_store("graph")
    edit_attrs(store, "0", lambda a: a["zarr_vectors_level"].__setitem__("vertex_count", 1))
    planned: list[int] = []

    def spy(units: list, target: int) -> list:
        planned.append(target)
        return cells.batches(units, target)

    for module in (consistency, links):
        monkeypatch.setattr(module, "batches", spy)
    default = validate(str(store), 5)
    with dask.config.set({"zarr_vectors.validate.min-batch-bytes": 1, "zarr_vectors.validate.max-batch-bytes": 64}):
        small = validate(str(store), 5)
    assert small.findings == default.findings and "L3_VERTEX_COUNT" in small.codes()
    assert max(planned[len(planned) // 2:]) <= 64 < min(planned[: len(planned) // 2])


def test_memory_store(base_stores: dict[str, Path]) -> None:
    fs = fsspec.filesystem("memory")
    src = base_stores["graph"]
    for f in src.rglob("*"):
        if f.is_file():
            fs.pipe_file(f"/zv-test-graph/{f.relative_to(src).as_posix()}", f.read_bytes())
    try:
        result = validate("memory://zv-test-graph", 5)
        assert result.ok and not result.warnings, result.summary()
        fs.rm("/zv-test-graph/0/links/0/zarr.json")
        broken = validate("memory://zv-test-graph", 5)
        assert "L1_MISSING_NODE" in {f.code for f in broken.findings}
    finally:
        fs.rm("/zv-test-graph", recursive=True)


@pytest.mark.s3
def test_s3_store(base_stores: dict[str, Path], s3_bucket: tuple[str, dict]) -> None:
    bucket, options = s3_bucket
    fs = fsspec.filesystem("s3", **options)
    src = base_stores["points_ids"]
    fs.pipe({f"{bucket}/stores/p.zv/{f.relative_to(src).as_posix()}": f.read_bytes()
             for f in src.rglob("*") if f.is_file()})
    result = validate(f"s3://{bucket}/stores/p.zv", 5, storage_options=options)
    assert result.ok and not result.warnings, result.summary()
    c = first_chunk(src, "0/vertices")
    del c
    fs.rm(f"{bucket}/stores/p.zv/0/vertex_fragments/zarr.json")
    result = validate(f"s3://{bucket}/stores/p.zv", 5, storage_options=options)
    assert "L1_MISSING_VERTEX_FRAGMENTS" in {f.code for f in result.findings}


# ---------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------
def test_cli_ok_and_json(base_stores: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert zv_main(["validate", str(base_stores["points"])]) == 0
    assert "PASS" in capsys.readouterr().out
    assert zv_main(["validate", str(base_stores["points"]), "--json", "--level", "3"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is True and doc["level"] == 3 and doc["errors"] == []
    assert isinstance(doc["passed"], list) and isinstance(doc["findings"], list)


def test_cli_errors_exit_1(copy_store: Callable[[str], Path], capsys: pytest.CaptureFixture[str]) -> None:
    store = copy_store("points")
    c = first_chunk(store, "0/vertices")
    write_payload(store, "0/vertices", c, read_payload(store, "0/vertices", c)[:-1])
    assert zv_main(["validate", str(store), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False
    finding = next(f for f in doc["findings"] if f["code"] == "L3_VERTEX_ROWS")
    assert set(finding) == {"level", "code", "severity", "node", "cell", "pointer", "message"}
    assert finding["code"] == "L3_VERTEX_ROWS" and finding["level"] == 3 and finding["cell"]


def test_cli_allow_layout(copy_store: Callable[[str], Path], capsys: pytest.CaptureFixture[str]) -> None:
    store = copy_store("points_ids")
    edit_attrs(store, "0/object_index", lambda a: a.__setitem__("layout", "vlen_manifests_v9"))
    assert zv_main(["validate", str(store), "--allow-layout", "vlen_manifests_v2"]) == 1
    capsys.readouterr()


def test_cli_usage_and_unreachable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert zv_main(["validate", str(tmp_path / "missing")]) == 2
    with pytest.raises(SystemExit) as exc:
        zv_main(["validate", str(tmp_path), "--level", "9"])
    assert exc.value.code == 2
    assert zv_main(["validate", str(tmp_path), "--storage-option", "novalue"]) == 2
    capsys.readouterr()


def test_cli_storage_options_parse() -> None:
    from pipeline.cli import _storage_options

    assert _storage_options(["anon=true", "client_kwargs.region_name=us-east-1", "endpoint_url=http://x:1"]) == {
        "anon": True, "client_kwargs": {"region_name": "us-east-1"}, "endpoint_url": "http://x:1"}


# ---------------------------------------------------------------------------
# the code list
# ---------------------------------------------------------------------------
def test_docs_list_every_code() -> None:
    text = (REPO / "docs" / "validation-codes.md").read_text(encoding="utf-8")
    assert text == catalogue_markdown(), "regenerate docs/validation-codes.md from findings.catalogue_markdown()"
    for code, rule in CATALOGUE.items():
        assert code.startswith(f"L{rule.level}_")


def test_copy_independent(base_stores: dict[str, Path], tmp_path: Path) -> None:
    # the base stores are shared: a test that mutated one in place would poison the rest
    dst = tmp_path / "x.zv"
    shutil.copytree(base_stores["points"], dst)
    assert validate(str(base_stores["points"]), 1).ok


@pytest.mark.parametrize("method", ["get", "get_ranges"])  # what a local validation reads cells and shards with
def test_a_storage_that_stops_answering_is_raised_not_reported(tmp_path: Path, monkeypatch, method) -> None:
    """An outage says nothing about the store: validate raises it instead of reporting crashed
    checks (and the counts the checks that did run would get wrong) as the store's defects."""
    from zarr_vectors.errors import StorageRequestError
    from zarr_vectors.store.backend import LocalStorage

    out = tmp_path / "s.zv"
    zv.write_points(str(out), np.random.default_rng(5).uniform(0, 100, (2000, 3)), chunk_shape=25.0)
    zv.build_pyramid(str(out), factors=[2])
    zv.shard_store(str(out), 2)
    assert zv.validate(str(out), level=5).ok
    real = getattr(LocalStorage, method)
    calls = []

    def flaky(self, *args, **kwargs):
        calls.append(1)
        if len(calls) > 3:  # past the first reads: the walk and the documents went through
            raise StorageRequestError(f"store {self.url!r}: GenericError: Error performing GET … [Connection refused]")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(LocalStorage, method, flaky)
    with dask.config.set(scheduler="synchronous"), pytest.raises(StorageRequestError, match="Connection refused"):
        zv.validate(str(out), level=5)
    assert len(calls) > 3
