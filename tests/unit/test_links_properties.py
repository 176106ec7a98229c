"""Property tests of the links API: write -> read round trips, and decentralised == single write.

Stores live on fsspec's in-memory filesystem (one fresh prefix per example) so that each
property test stays within a few seconds.
"""

from __future__ import annotations

import uuid

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zarr_vectors import links_api as A
from zarr_vectors.format.links import copies_per_record
from zarr_vectors.format.metadata import LevelMetadata
from zarr_vectors.store.grid import GridArray
from zarr_vectors.store.groups import Level, create_store, open_store

OWNING_LEVEL = 2
ROOT_CHUNK = 10.0
# Example counts keep each test well under 3 s (every example builds one or two stores).
ROUND_TRIP = settings(max_examples=45, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DECENTRALISED = settings(max_examples=45, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def memory_store(prefix: str, ndim: int, factors: tuple[tuple[int, ...], ...], vertices: bool):
    """Levels 0..4; level k's chunk_shape is ROOT_CHUNK * factors[k] (per axis)."""
    url = f"memory://{prefix}/s.zarrvectors"
    store = create_store(url, chunk_shape=(ROOT_CHUNK,) * ndim, bounds=((0.0,) * ndim, (1.0,) * ndim), geometry_type="graph")
    for k, f in enumerate(factors):
        cs = tuple(ROOT_CHUNK * x for x in f)
        meta = LevelMetadata(level=k, chunk_shape=cs if any(x != 1 for x in f) else None)
        Level(store, k, meta).write_metadata()
    if vertices:
        GridArray.create(
            store.storage,
            f"{OWNING_LEVEL}/vertices",
            shape=(8,) * ndim,
            origin=(-4,) * ndim,
            attributes={"zv_array": "vertices", "dtype": "float32", "encoding": "raw"},
            compressor=None,
        )
    return open_store(url)


@st.composite
def link_batches(draw, deltas=(0, 0, 1, -1, 2, -2)):
    width = draw(st.integers(1, 4))
    ndim = draw(st.integers(1, 3))
    n = draw(st.integers(0, 10))
    coord = st.integers(-4, 3)
    flat = draw(st.lists(coord, min_size=n * width * ndim, max_size=n * width * ndim))
    chunks = np.array(flat, dtype=np.int64).reshape(n, width, ndim)
    if n and draw(st.booleans()):  # many intra records, as in real data
        chunks[: n // 2] = chunks[: n // 2, :1]
    vi = np.array(draw(st.lists(st.integers(0, 4), min_size=n * width, max_size=n * width)), dtype=np.int64)
    factor = st.tuples(*[st.sampled_from([1, 2, 3, 4])] * ndim)
    factors = tuple(draw(factor) for _ in range(5))
    return {
        "chunks": chunks,
        "vi": vi.reshape(n, width),
        "delta": draw(st.sampled_from(deltas)),
        "directed": draw(st.booleans()),
        "store": draw(st.sampled_from(["canonical", "duplicate"])),
        "factors": factors,
        "vertices": draw(st.booleans()),
        "row_shape": draw(st.sampled_from([(), (2,)])),
    }


@ROUND_TRIP
@given(link_batches())
def test_write_then_read_returns_every_record_in_input_endpoint_order(b):
    chunks, vi, delta = b["chunks"], b["vi"], b["delta"]
    n, width, ndim = chunks.shape
    store = memory_store(uuid.uuid4().hex, ndim, b["factors"], b["vertices"])
    try:
        lv = store.level(OWNING_LEVEL)
        part = A.write_links(lv, delta, chunks, vi, directed=b["directed"], store=b["store"])
        # every copy of every record, endpoints in input order, in enumeration order
        back = A.read_links(lv, delta)
        assert back.chunks.reshape(-1, width, ndim).tolist() == chunks[part.record].tolist()
        assert back.vi.reshape(-1, width).tolist() == vi[part.record].tolist()
        copies = copies_per_record(chunks, delta=delta, store=b["store"])
        assert np.bincount(part.record, minlength=n).tolist() == copies.tolist()
        assert A.finalize_links(lv, delta) == A.LinkCounts(n, int(copies.sum()))
        # offsets anchor against the owning level's chunk grid, scaled to the target's
        r_src, r_trg = A.link_anchor_ratios(lv, delta, ndim)
        if delta:
            assert (r_src, r_trg) == (b["factors"][OWNING_LEVEL], b["factors"][OWNING_LEVEL + delta])
        assert A.list_link_offsets(lv, delta) == list(part.segments)
        for s, cell, start, stop in part.iter_groups():
            got = A.read_chunk_links(lv, cell, delta=delta, offsets=part.segments[s])
            assert got.has_perm == A.links_has_perm(
                part.segment_offsets[s], delta=delta, directed=b["directed"], store=b["store"]
            )
            assert [g.tolist() for g in got.groups] == [part.stored_rows(start, stop).tolist()]
            assert got.records.chunks.tolist() == chunks[part.record[start:stop]].tolist()

        # attributes, input order through the partition: aligned to every copy
        values = (np.arange(n * 2, dtype=np.float64) * 1.5).reshape(n, 2)[:, : (2 if b["row_shape"] else 1)]
        values = values if b["row_shape"] else values[:, 0]
        A.write_link_attributes(lv, "a", delta, values, partition=part)
        assert A.read_link_attributes(lv, "a", delta).tolist() == values[part.record].tolist()
        # attributes already in enumeration order (not possible under duplicate)
        if b["store"] == "canonical":
            A.write_link_attributes(lv, "b", delta, np.arange(n, dtype=np.int32))
            assert A.read_link_attributes(lv, "b", delta).tolist() == list(range(n))
    finally:
        store.storage.delete_prefix("")


def snapshot(storage):
    return {k: storage.get(k) for k in storage.list_files("")}


def owner_of(cells: np.ndarray, owners: int, salt: int) -> np.ndarray:
    primes = np.array([73856093, 19349663, 83492791], dtype=np.int64)[: cells.shape[1]]
    return ((cells * primes).sum(axis=1) + salt) % owners


@DECENTRALISED
@given(link_batches(deltas=(0, 0, 1, -1)), st.integers(1, 4), st.integers(0, 100))
def test_decentralised_owner_writes_plus_finalize_match_one_write_links(b, owners, salt):
    chunks, vi, delta = b["chunks"], b["vi"], b["delta"]
    n, width, ndim = chunks.shape
    prefix = uuid.uuid4().hex
    single = memory_store(f"{prefix}/single", ndim, b["factors"], b["vertices"])
    multi = memory_store(f"{prefix}/multi", ndim, b["factors"], b["vertices"])
    policy = {"directed": b["directed"], "store": b["store"]}
    weights = np.arange(n, dtype=np.float32) + 0.25
    try:
        lv = single.level(OWNING_LEVEL)
        part = A.write_links(lv, delta, chunks, vi, **policy)
        A.write_link_attributes(lv, "w", delta, weights, partition=part)

        # coordinator: policy, arrays and attribute arrays (metadata only)
        lv = multi.level(OWNING_LEVEL)
        ratios = A.link_anchor_ratios(lv, delta, ndim) if delta else None
        plan = A.partition_records_by_offset(chunks, vi, delta=delta, anchor_ratios=ratios, **policy)
        A.create_links_family(lv, delta, link_width=width, sid_ndim=ndim, **policy)
        A.create_links_arrays(lv, delta, plan)
        A.create_link_attribute_arrays(lv, "w", delta, dtype="float32", partition=plan)
        # route: each owner gets, in input order, the records with a placement in its cells
        owner_of_placement = owner_of(plan.cell, owners, salt)
        for o in range(owners):
            mine = np.unique(plan.record[owner_of_placement == o])
            if mine.size == 0:
                continue
            local = A.partition_records_by_offset(chunks[mine], vi[mine], delta=delta, anchor_ratios=ratios, **policy)
            share = local.select_groups(owner_of(local.group_cells(), owners, salt) == o)
            A.write_link_cells(lv, delta, share)
            A.write_link_attribute_cells(lv, "w", delta, weights[mine], share)
        # one reconcile task
        assert A.finalize_links(lv, delta) == A.LinkCounts(n, part.num_physical_records)

        a, b_ = snapshot(single.storage), snapshot(multi.storage)
        assert sorted(a) == sorted(b_)
        for key in a:
            assert a[key] == b_[key], key
    finally:
        single.storage.delete_prefix("")
        multi.storage.delete_prefix("")
