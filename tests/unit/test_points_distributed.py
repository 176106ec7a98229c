"""``write_points`` under a real LocalCluster (two worker processes) writes exactly the
bytes the same write on local threads does."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from distributed import get_task_stream
from dask.utils import key_split
from file_tree import tree

import zarr_vectors as zv
from zarr_vectors.execution.runner import current_client

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


def storage_order(pos, cs, ids):
    ch = np.floor(pos.astype(np.float64) / cs).astype(np.int64)
    return np.lexsort((np.arange(len(pos)), ids, ch[:, 2], ch[:, 1], ch[:, 0]))


@pytest.fixture
def inputs():
    rng = np.random.default_rng(41)
    n = 6000
    pos = rng.uniform(-25, 75, (n, 3))
    ids = rng.integers(0, 50, n)
    attrs = {"rgb": rng.integers(0, 256, (n, 3)).astype("u1"), "t": rng.random(n).astype("f4")}
    obj = {"w": rng.random(50)}
    return pos, ids, attrs, obj


def test_cluster_write_equals_local_write(tmp_path, local_cluster, inputs, zv_config):
    pos, ids, attrs, obj = inputs
    # several input blocks and several owner tasks, so routing and merging really happen on the workers
    zv_config("write.block-rows", 1000)
    zv_config("write.min-rows-per-task", 800)
    kw = dict(chunk_shape=20, object_ids=ids, attributes=attrs, object_attributes=obj)
    assert current_client() is None
    local = zv.write_points(str(tmp_path / "local" / "s.zv"), pos, **kw)
    with local_cluster.as_current(), get_task_stream(client=local_cluster) as stream:
        assert current_client() is local_cluster
        remote = zv.write_points(str(tmp_path / "cluster" / "s.zv"), pos, **kw)
    assert current_client() is None
    assert remote.num_tasks > 1
    # the graph ran on the two worker processes: at least one task per owner, spread over both
    assert len(stream.data) > remote.num_tasks
    assert len({t["worker"] for t in stream.data}) == 2
    # each owner fetched only its share of every routed block, as tasks of their own
    assert sum(key_split(t["key"]) == "pick" for t in stream.data) > remote.num_tasks
    assert (remote.num_vertices, remote.num_cells, remote.num_objects) == (local.num_vertices, local.num_cells, 50)
    a, b = tree(tmp_path / "local" / "s.zv"), tree(tmp_path / "cluster" / "s.zv")
    assert sorted(a) == sorted(b)
    assert [k for k in a if a[k] != b[k]] == []
    data = zv.read(str(tmp_path / "cluster" / "s.zv"))
    order = storage_order(pos, 20, ids)
    np.testing.assert_array_equal(data.positions, pos[order])
    np.testing.assert_array_equal(data.object_ids, ids[order])
    np.testing.assert_array_equal(data.attributes["rgb"], attrs["rgb"][order])
    np.testing.assert_array_equal(data.object_attributes["w"], obj["w"])


def test_cluster_write_of_dask_input(tmp_path, local_cluster, inputs, zv_config):
    pos, _, attrs, _ = inputs
    zv_config("write.min-rows-per-task", 1000)
    kw = dict(chunk_shape=20, bin_shape=5)
    zv.write_points(str(tmp_path / "local" / "s.zv"), pos.astype("f4"), attributes=attrs, **kw)
    with local_cluster.as_current(), get_task_stream(client=local_cluster) as stream:
        dpos = da.from_array(pos, chunks=(700, 3)).astype("f4")
        dattrs = {k: da.from_array(v, chunks=(1100,) + v.shape[1:]) for k, v in attrs.items()}
        result = zv.write_points(str(tmp_path / "cluster" / "s.zv"), dpos, attributes=dattrs, **kw)
    assert result.num_vertices == len(pos) and result.num_tasks > 1
    assert len(stream.data) > result.num_tasks
    assert tree(tmp_path / "local" / "s.zv") == tree(tmp_path / "cluster" / "s.zv")
    data = zv.read(str(tmp_path / "cluster" / "s.zv"))
    assert data.positions.dtype == np.float32 and len(data) == len(pos)
    assert sorted(map(tuple, data.positions.tolist())) == sorted(map(tuple, pos.astype("f4").tolist()))
