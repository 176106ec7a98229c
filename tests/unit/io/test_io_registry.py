"""The format registry: every format module is found, a file is matched by its name, and refusals name the file."""

from __future__ import annotations

import pytest

from zarr_vectors.errors import InputError
from zarr_vectors.io import registry


def test_every_listed_module_defines_its_format():
    names = {f.name for f in registry.formats()}
    assert {"parquet", "csv", "npz", "las", "graphml", "edgelist"} <= names
    for fmt in registry.formats():
        assert fmt.extensions and all(e.startswith(".") and e == e.lower() for e in fmt.extensions)
        assert fmt.kinds and fmt.read is not None


@pytest.mark.parametrize("path, name", [
    ("a.parquet", "parquet"), ("A.PQ", "parquet"), ("t.csv.gz", "csv"), ("t.tsv", "csv"), ("t.npz", "npz"),
    ("cloud.LAZ", "las"), ("g.graphml", "graphml"), ("e.edgelist", "edgelist"), ("s3://b/k/x.las", "las"),
])
def test_files_are_matched_by_extension(path, name):
    assert registry.format_for(path).name == name


def test_a_local_directory_is_a_parquet_dataset(tmp_path):
    assert registry.format_for(str(tmp_path)).name == "parquet"


def test_unknown_names_and_kinds_are_refused_naming_the_file():
    with pytest.raises(InputError, match=r"'x\.txt': unknown file format \(known extensions: .*\.las.*\.parquet"):
        registry.format_for("x.txt")
    with pytest.raises(InputError, match=r"'c\.las': a las file holds points, not graph"):
        registry.format_for("c.las", "graph")
    assert registry.format_for("g.graphml", "graph").name == "graphml"
    assert registry.build_kind("point_cloud") == "points" and registry.build_kind("streamline") == "streamlines"


def test_a_format_records_direction_exactly_when_its_writer_takes_it():
    """``zv export`` passes the store's links policy as ``directed`` to the formats that say they
    record it; a writer taking it unasked, or a format claiming it without a writer that takes it,
    would lose a graph's direction or fail the export."""
    import inspect

    for fmt in registry.formats():
        takes = fmt.write is not None and "directed" in inspect.signature(fmt.write).parameters
        assert fmt.records_direction == takes, fmt.name
    assert registry.by_name("graphml").records_direction
