"""Coarse levels carry vertex attributes (docs/decisions.md D22): each reduction against numpy
on a tiny input, the level metadata that records it, the reader at the coarse level, the
validator clean on it and finding a corrupted member, and the bad arguments refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.errors import InputError, MetadataError
from zarr_vectors.format.coarsen import combine_reduced, default_reduction, reduce_rows
from zarr_vectors.validation import validate

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

CHUNK, BIN = 40.0, 20.0  # level 1 bins are 40: one metavertex per level-0 chunk


def tiny(path: Path, object_ids: np.ndarray | None = None) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    n = 120
    pos = rng.uniform(-30, 90, (n, 3)).astype(np.float32)
    attrs = {
        "w": rng.normal(size=n).astype(np.float32),
        "rgb": rng.uniform(0, 1, (n, 3)).astype(np.float64),
        "label": rng.integers(-5, 50, n).astype(np.int32),
        "flag": rng.integers(0, 2, n).astype(bool),
    }
    zv.write_points(str(path), pos, attributes=attrs, object_ids=object_ids, chunk_shape=CHUNK, bin_shape=BIN)
    return {"positions": pos, **attrs}


def expected(store: Path, name: str, how: str, bin_shape: float) -> dict[tuple, np.ndarray]:
    """Per level-1 bin, the reduction of the level-0 rows in it, in storage order (D18: "first" is the first)."""
    level0 = zv.read(str(store), level=0)
    bins = np.floor(level0.positions.astype(np.float64) / bin_shape).astype(np.int64)
    values = level0.attributes[name]
    out = {}
    for b in {tuple(r) for r in bins.tolist()}:
        rows = values[(bins == b).all(axis=1)]
        out[b] = {"mean": rows.astype(np.float64).mean(axis=0), "min": rows.min(axis=0), "max": rows.max(axis=0),
                  "first": rows[0]}[how]
    return out


def by_bin(store: Path, level: int, name: str, bin_shape: float) -> dict[tuple, np.ndarray]:
    got = zv.read(str(store), level=level)
    bins = np.floor(got.positions.astype(np.float64) / bin_shape).astype(np.int64)
    return {tuple(b): v for b, v in zip(bins.tolist(), got.attributes[name])}


@pytest.mark.parametrize("how", ["mean", "min", "max", "first"])
def test_each_reduction_matches_numpy(tmp_path, how):
    store = tmp_path / "s.zv"
    data = tiny(store)
    zv.build_pyramid(str(store), factors=[2], aggregate={"w": how, "rgb": how, "label": how})
    for name in ("w", "rgb", "label"):
        want = expected(store, name, how, 2 * BIN)
        got = by_bin(store, 1, name, 2 * BIN)
        assert sorted(got) == sorted(want)
        dtype = data[name].dtype
        for b, v in got.items():
            w = np.rint(want[b]) if how == "mean" and dtype.kind != "f" else want[b]
            np.testing.assert_allclose(v, np.asarray(w).astype(dtype), rtol=1e-6, err_msg=f"{name} bin {b}")
            assert v.dtype == dtype


def test_defaults_recorded_and_carried_to_every_level(tmp_path):
    store = tmp_path / "s.zv"
    data = tiny(store, object_ids=np.arange(120) % 7)
    zv.build_pyramid(str(store), factors=[2, 2], aggregate={"w": "max"})
    meta = json.loads((store / "1" / "zarr.json").read_text())["attributes"]["zarr_vectors_level"]
    assert meta["attribute_aggregation"] == {"flag": "first", "label": "first", "rgb": "mean", "w": "max"}
    assert "vertex_attributes" in meta["arrays_present"]
    level0 = json.loads((store / "0" / "zarr.json").read_text())["attributes"]["zarr_vectors_level"]
    assert "attribute_aggregation" not in level0
    assert zv.open_store(str(store)).level(2).meta.attribute_aggregation["w"] == "max"
    top = zv.read(str(store), level=2)
    assert set(top.attributes) == {"w", "rgb", "label", "flag"}
    assert top.attributes["rgb"].shape == (len(top), 3)
    assert top.attributes["w"].max() == data["w"].max()  # a max of maxes is the max
    report = validate(str(store), 5)
    assert report.ok, report.summary()
    assert default_reduction(np.dtype("float16")) == "mean" and default_reduction(np.dtype("uint8")) == "first"


def test_partials_combine_to_the_whole_reduction():
    """Reducing per (cell, bin) and then per bin gives the reduction of all rows (mean over the counts)."""
    rng = np.random.default_rng(0)
    values = rng.normal(size=(50, 2))
    part = rng.integers(0, 10, 50)
    bin_of_part = np.arange(10) // 3  # partial rows 0-2 -> bin 0, ...
    counts = np.bincount(bin_of_part[part], minlength=4)
    for how in ("mean", "min", "max", "first"):
        partial = reduce_rows(values, part, 10, how)
        got = combine_reduced(partial, bin_of_part, 4, counts, how, values.dtype)
        for b in range(4):
            rows = values[bin_of_part[part] == b]
            want = {"mean": rows.mean(0), "min": rows.min(0), "max": rows.max(0),
                    "first": values[np.flatnonzero(bin_of_part[part] == b)[np.argmin(part[bin_of_part[part] == b])]]}
            np.testing.assert_allclose(got[b], want[how], err_msg=how)


@pytest.mark.parametrize(("dtype", "base"), [("uint64", 2**64 - 5000), ("int64", 2**63 - 5000), ("int64", -(2**63)),
                                           ("uint64", 0), ("int32", 2**31 - 5000), ("int8", -128)])
def test_an_integer_mean_is_the_rounded_exact_mean_near_the_type_limits(tmp_path, dtype, base):
    """Regression (hunt): float64 sums of uint64 values near 2**64 made a mean of 2**64, which
    wrapped to 0 (int64: to INT64_MIN) and was written with success.  Checked against Python's
    exact integers, rounded half to even as np.rint rounds a mean."""
    rng = np.random.default_rng(1)
    info = np.iinfo(dtype)
    values = np.asarray(base, dtype) + rng.integers(0, min(4000, info.max - base + 1), (60, 2)).astype(dtype)
    part = rng.integers(0, 10, 60)
    bin_of_part = np.arange(10) // 3
    counts = np.bincount(bin_of_part[part], minlength=4)
    got = combine_reduced(reduce_rows(values, part, 10, "mean"), bin_of_part, 4, counts, "mean", np.dtype(dtype))
    assert got.dtype == np.dtype(dtype)
    for b in range(4):
        rows = values[bin_of_part[part] == b].astype(object)
        for c in range(2):
            total, n = int(sum(rows[:, c])), len(rows)
            q, r = divmod(total, n)
            want = q + (1 if 2 * r > n or (2 * r == n and q % 2) else 0)
            assert int(got[b, c]) == want, (b, c)


def test_validator_finds_a_corrupted_member_and_the_reader_refuses_it(tmp_path):
    store = tmp_path / "s.zv"
    tiny(store)
    zv.build_pyramid(str(store), factors=[2])
    doc_path = store / "1" / "zarr.json"
    doc = json.loads(doc_path.read_text())
    for bad, where in (({"w": "median"}, "/w"), ({"nope": "mean"}, "/nope"), ([1, 2], "")):
        doc["attributes"]["zarr_vectors_level"]["attribute_aggregation"] = bad
        doc_path.write_text(json.dumps(doc))
        report = validate(str(store), 2)
        found = [f for f in report.findings if f.code == "L2_ATTRIBUTE_AGGREGATION"]
        assert found and found[0].pointer.endswith("attribute_aggregation" + (where if bad != {"w": "median"} else ""))
        if bad != {"nope": "mean"}:  # a bad value is refused by the strict reader too; a stray name is L2's
            with pytest.raises(MetadataError, match="attribute_aggregation"):
                zv.read(str(store), level=1)


def test_bad_aggregate_arguments_are_refused_before_writing(tmp_path):
    store = tmp_path / "s.zv"
    tiny(store)
    with pytest.raises(InputError, match="no vertex attribute"):
        zv.build_pyramid(str(store), factors=[2], aggregate={"nope": "mean"})
    with pytest.raises(InputError, match="must be one of"):
        zv.build_pyramid(str(store), factors=[2], aggregate={"w": "median"})
    with pytest.raises(InputError, match="aggregate must map vertex attribute names to reductions, found 'mean'"):
        zv.build_pyramid(str(store), factors=[2], aggregate="mean")  # regression (hunt): dict()'s ValueError
    assert zv.open_store(str(store)).level_numbers() == [0]


def test_command_line_aggregate(tmp_path, capsys):
    import dask

    from pipeline.cli import main

    store = tmp_path / "s.zv"
    tiny(store)
    with dask.config.set(scheduler="threads"):  # no embedded cluster for a tiny store
        assert main(["pyramid", str(store), "--factor", "2", "--aggregate", "w=min", "--aggregate", "label=max"]) == 0
    assert zv.open_store(str(store)).level(1).meta.attribute_aggregation == {
        "flag": "first", "label": "max", "rgb": "mean", "w": "min"}
    assert main(["pyramid", str(store), "--factor", "2", "--aggregate", "w"]) == 2
    assert "NAME=REDUCTION" in capsys.readouterr().err


def test_level5_finds_a_coarse_value_no_reduction_gives(tmp_path):
    from zarr_vectors.store.grid import write_cells_many

    store = tmp_path / "s.zv"
    data = tiny(store)
    zv.build_pyramid(str(store), factors=[2], aggregate={"w": "min"})
    assert "L5_ATTRIBUTE_AGGREGATION" not in validate(str(store), 5).codes()
    grid = zv.open_store(str(store)).level(1).array("vertex_attributes/w")
    chunk = min(grid.nonempty_chunk_coords())
    values = np.frombuffer(grid.read_cells([chunk])[0], dtype="<f4").copy()
    values[0] = data["w"].max() + 1.0  # above every level-0 value: no min (or any reduction) gives it
    write_cells_many([(grid, {tuple(chunk): values.tobytes()})])
    report = validate(str(store), 5)
    assert report.codes("error") == ["L5_ATTRIBUTE_AGGREGATION"], report.summary()
    assert "vertex_attributes/w" in report.findings[0].node
    assert validate(str(store), 4).ok  # a level-5 rule only


def test_zv_build_aggregate(tmp_path, capsys):
    import dask
    import pandas as pd

    from pipeline.cli import main

    rng = np.random.default_rng(2)
    src = tmp_path / "pts.csv"
    pd.DataFrame({"x": rng.uniform(0, 100, 300), "y": rng.uniform(0, 100, 300), "z": rng.uniform(0, 100, 300),
                  "intensity": rng.random(300)}).to_csv(src, index=False)
    out = tmp_path / "s.zv"
    assert main(["build", "points", str(src), str(out), "--aggregate", "intensity=max"]) == 2
    assert "needs --pyramid" in capsys.readouterr().err and not out.exists()
    with dask.config.set(scheduler="threads"):
        assert main(["build", "points", str(src), str(out), "--chunk-shape", "50", "--pyramid", "2",
                     "--aggregate", "intensity=max"]) == 0
    assert zv.open_store(str(out)).level(1).meta.attribute_aggregation == {"intensity": "max"}
    assert zv.read(str(out), level=1).attributes["intensity"].max() == zv.read(str(out)).attributes["intensity"].max()
