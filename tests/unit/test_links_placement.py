"""Link placement (docs/format.md §7.2-§7.4): the worked examples, the anchor, and an oracle.

The oracle below is a deliberately naive per-record transcription of the placement
rules; the vectorised :func:`partition_records_by_offset` must agree with it on every
record, placement and position.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zarr_vectors.encoding import lehmer_encode
from zarr_vectors.errors import ArrayError, InputError
from zarr_vectors.format.links import (
    LinkPartition,
    anchor_chunks,
    copies_per_record,
    links_has_perm,
    partition_records_by_offset,
    partition_records_by_rank,
)
from zarr_vectors.format.paths import format_offsets


def placements(p: LinkPartition) -> list[tuple[str, tuple[int, ...], list[int], int]]:
    """(segment, cell, stored row, record) of every placement, in partition order."""
    out = []
    for s, cell, start, stop in p.iter_groups():
        rows = p.stored_rows(start, stop)
        for k in range(stop - start):
            out.append((p.segments[s], cell, rows[k].tolist(), int(p.record[start + k])))
    return out


def one(chunks, vi, **policy):
    return partition_records_by_offset(np.array([chunks]), np.array([vi]), **policy)


# -- docs/format.md §7.3 worked examples ---------------------------------------------------------
def test_mesh_face_3_0_4():
    p = one([(1, 0, 0), (0, 0, 0), (0, 1, 0)], [0, 0, 0])
    assert placements(p) == [("0.+1.0_+1.0.0", (0, 0, 0), [3, 0, 0, 0], 0)]


def test_mesh_face_5_3_4():
    p = one([(1, 1, 1), (1, 0, 0), (0, 1, 0)], [0, 0, 0])
    assert placements(p) == [("+1.-1.0_+1.0.+1", (0, 1, 0), [5, 0, 0, 0], 0)]


def test_edge_2_0():
    p = one([(1, 0, 0), (0, 0, 0)], [0, 0])
    assert placements(p) == [("+1.0.0", (0, 0, 0), [1, 0, 0], 0)]


def test_duplicate_l3_record_three_rows():
    p = one([(1, 0, 0), (0, 0, 0), (0, 1, 0)], [1, 2, 0], store="duplicate")
    assert placements(p) == [
        ("+1.-1.0_0.-1.0", (0, 1, 0), [4, 0, 1, 2], 0),
        ("+1.0.0_0.+1.0", (0, 0, 0), [2, 2, 1, 0], 0),
        ("-1.0.0_-1.+1.0", (1, 0, 0), [0, 1, 2, 0], 0),
    ]
    assert p.num_links == 1 and p.num_physical_records == 3


# -- the four rules -------------------------------------------------------------------------
def test_intra_keeps_input_order_under_every_policy():
    for directed in (False, True):
        for store in ("canonical", "duplicate"):
            p = one([(2, 2), (2, 2), (2, 2)], [5, 1, 3], directed=directed, store=store)
            assert placements(p) == [("0.0_0.0", (2, 2), [5, 1, 3], 0)]


def test_undirected_sort_ties_keep_input_order():
    # two endpoints share chunk and vi: the stable sort keeps them in input order
    p = one([(1,), (0,), (0,)], [7, 4, 4])
    [(segment, cell, row, _)] = placements(p)
    assert (segment, cell) == ("0_+1", (0,))
    assert row == [lehmer_encode([1, 2, 0]), 4, 4, 7]


def test_sort_is_numeric_on_signed_coordinates():
    # -10 < -2 < 3 numerically (a string sort would put "-10" after "-2")
    p = one([(3,), (-2,), (-10,)], [0, 1, 2])
    [(segment, cell, row, _)] = placements(p)
    assert cell == (-10,)
    assert segment == "+8_+13"
    assert row == [lehmer_encode([2, 1, 0]), 2, 1, 0]


def test_directed_canonical_is_identity_without_perm():
    p = one([(1, 0), (0, 0)], [3, 4], directed=True)
    assert placements(p) == [("-1.0", (1, 0), [3, 4], 0)]
    back = one([(0, 0), (1, 0)], [4, 3], directed=True)
    assert placements(back) == [("+1.0", (0, 0), [4, 3], 0)]


def test_directed_duplicate_still_has_perm():
    p = one([(1, 0), (0, 0)], [3, 4], directed=True, store="duplicate")
    assert placements(p) == [("+1.0", (0, 0), [1, 4, 3], 0), ("-1.0", (1, 0), [0, 3, 4], 0)]


def test_duplicate_one_copy_per_distinct_chunk_lead_is_smallest_vi():
    # endpoints 0 and 2 share chunk (0,); the lead of that chunk is the smaller (chunk, vi)
    p = one([(0,), (1,), (0,), (1,)], [9, 5, 2, 1], store="duplicate")
    rows = {cell: row for _, cell, row, _ in placements(p)}
    assert set(rows) == {(0,), (1,)}
    assert rows[(0,)] == [lehmer_encode([2, 0, 1, 3]), 2, 9, 5, 1]
    assert rows[(1,)] == [lehmer_encode([3, 0, 1, 2]), 1, 9, 5, 2]


def test_self_segment_for_link_width_one():
    p = partition_records_by_offset(np.array([[(4, 4)], [(0, 1)]]), np.array([[2], [3]]))
    assert placements(p) == [("self", (0, 1), [3], 1), ("self", (4, 4), [2], 0)]


def test_links_has_perm_table():
    cross = [(0, 0, 1)]
    intra = [(0, 0, 0)]
    assert links_has_perm(cross, delta=0, directed=False, store="canonical")
    assert links_has_perm(cross, delta=0, directed=False, store="duplicate")
    assert not links_has_perm(cross, delta=0, directed=True, store="canonical")
    assert links_has_perm(cross, delta=0, directed=True, store="duplicate")
    assert not links_has_perm(cross, delta=1, directed=False, store="duplicate")
    assert not links_has_perm(intra, delta=0, directed=False, store="duplicate")
    assert not links_has_perm((), delta=0, directed=False, store="canonical")
    # a zero offset next to a non-zero one is not intra
    assert links_has_perm([(0, 0, 0), (0, 1, 0)], delta=0, directed=False, store="canonical")


# -- the cross-level anchor (docs/format.md §7.4 counter-example) -----------------------------------
@pytest.mark.parametrize(
    ("src", "trg", "naive"),
    [
        (3, 2, -1),  # [300,400) -> level-1 chunk 2 = [400,600); container is L1 chunk 1
        (1, 1, 0),  # [100,200) -> [200,400); container L1 chunk 0
        (0, 1, 1),
        (-1, 0, 1),  # negative coords: [-100,0) lies in L1 chunk -1 = [-200,0)
        (-2, 0, 2),
        (-3, -1, 2),  # [-300,-200) lies in L1 chunk -2; truncation toward 0 would say -1
        (-5, -2, 3),
    ],
)
def test_anchor_counter_example_root_100_level1_200(src, trg, naive):
    assert trg - src == naive
    p = one([(src,), (trg,)], [0, 0], delta=1, directed=True, anchor_ratios=((1,), (2,)))
    assert placements(p) == [("+1", (src,), [0, 0], 0)]


def test_anchor_towards_a_finer_level():
    # level-1 chunk 1 = [200,400) (chunk 200) -> level-0 chunk 3 = [300,400) (chunk 100)
    p = one([(1, -1), (3, -1)], [0, 0], delta=-1, directed=True, anchor_ratios=((2, 2), (1, 1)))
    assert placements(p) == [("+1.+1", (1, -1), [0, 0], 0)]
    assert anchor_chunks(np.array([[-3, 7]]), np.array([1, 1]), np.array([2, 2])).tolist() == [[-2, 3]]


def test_cross_level_never_sorts_and_is_never_intra():
    p = one([(5,), (0,), (1,)], [1, 2, 3], delta=2, store="duplicate", anchor_ratios=((1,), (1,)))
    assert placements(p) == [("-5_-4", (5,), [1, 2, 3], 0)]
    q = one([(0,), (0,)], [1, 2], delta=-1, anchor_ratios=((1,), (1,)))
    assert placements(q) == [("0", (0,), [1, 2], 0)]


def test_cross_level_needs_ratios():
    with pytest.raises(InputError):
        one([(0,), (0,)], [0, 0], delta=1)


# -- input checks ---------------------------------------------------------------------------
def test_ragged_chunk_arity_is_an_array_error():
    with pytest.raises(ArrayError):
        partition_records_by_offset([[(0, 0), (0, 0, 0)]], [[0, 1]])


def test_bad_shapes_and_values():
    with pytest.raises(InputError):
        partition_records_by_offset(np.zeros((1, 2, 3), int), np.zeros((1, 3), int))
    with pytest.raises(InputError):
        partition_records_by_offset(np.zeros((1, 2, 3), int), np.array([[0, -1]]))
    with pytest.raises(InputError):
        partition_records_by_offset(np.zeros((1, 2, 3)), np.zeros((1, 2), int))
    with pytest.raises(InputError):
        partition_records_by_offset(np.zeros((1, 2, 3), int), np.zeros((1, 2), int), store="both")


# -- partition helpers ----------------------------------------------------------------------
def test_scatter_fans_out_duplicates_and_select_groups_keeps_numbering():
    chunks = np.array([[(0,), (1,)], [(1,), (1,)], [(2,), (0,)]])
    vi = np.array([[0, 1], [2, 3], [4, 5]])
    p = partition_records_by_offset(chunks, vi, store="duplicate")
    values = np.array([10.0, 11.0, 12.0])
    assert p.scatter(values).tolist() == values[p.record].tolist()
    assert sorted(p.record.tolist()) == [0, 0, 1, 2, 2]
    keep = np.array([cell[0] == 1 for cell in p.group_cells().tolist()])
    sub = p.select_groups(keep)
    assert sub.num_links == 3
    assert set(tuple(c) for c in sub.group_cells().tolist()) == {(1,)}
    assert sub.scatter(values).tolist() == values[sub.record].tolist()
    with pytest.raises(ArrayError):
        p.scatter(values[:2])


# -- the oracle -----------------------------------------------------------------------------
def oracle(chunks, vi, *, delta, directed, store, ratios=None):
    """Per-record transcription of docs/format.md §7.2/§7.4: (segment, cell, row, record)."""
    out = []
    for r, (rec_chunks, rec_vi) in enumerate(zip(chunks, vi)):
        cs = [tuple(c) for c in rec_chunks]
        width = len(cs)
        ident = tuple(range(width))
        key = lambda k: (cs[k], rec_vi[k])  # noqa: E731 - sorted() is stable
        if delta != 0 or all(c == cs[0] for c in cs):
            sigmas = [ident]
        elif store == "canonical":
            sigmas = [ident if directed else tuple(sorted(range(width), key=key))]
        else:
            leads, seen = [], set()
            for k in sorted(range(width), key=key):
                if cs[k] not in seen:
                    seen.add(cs[k])
                    leads.append(k)
            sigmas = [(p,) + tuple(k for k in range(width) if k != p) for p in leads]
        for sigma in sigmas:
            src = cs[sigma[0]]
            if delta:
                anchor = tuple((c * a) // b for c, a, b in zip(src, *ratios))
            else:
                anchor = src
            offs = tuple(tuple(x - a for x, a in zip(cs[sigma[k]], anchor)) for k in range(1, width))
            perm = links_has_perm(offs, delta=delta, directed=directed, store=store)
            row = ([lehmer_encode(sigma)] if perm else []) + [int(rec_vi[k]) for k in sigma]
            out.append((format_offsets(offs), src, row, r))
    return sorted(out, key=lambda t: (t[0], t[1], t[3]))


@st.composite
def batches(draw):
    width = draw(st.integers(1, 4))
    ndim = draw(st.integers(1, 3))
    n = draw(st.integers(0, 12))
    coord = st.integers(-3, 3)
    chunks = draw(st.lists(st.lists(st.tuples(*[coord] * ndim), min_size=width, max_size=width), min_size=n, max_size=n))
    vi = draw(st.lists(st.lists(st.integers(0, 3), min_size=width, max_size=width), min_size=n, max_size=n))
    delta = draw(st.sampled_from([0, 0, 1, -1, 2, -2]))
    ratios = (
        tuple(draw(st.sampled_from([1, 2, 4])) for _ in range(ndim)),
        tuple(draw(st.sampled_from([1, 2, 4])) for _ in range(ndim)),
    )
    return (
        np.array(chunks, dtype=np.int64).reshape(n, width, ndim),
        np.array(vi, dtype=np.int64).reshape(n, width),
        delta,
        draw(st.booleans()),
        draw(st.sampled_from(["canonical", "duplicate"])),
        ratios,
    )


@settings(max_examples=150, deadline=None)
@given(batches())
def test_vectorised_placement_matches_oracle(batch):
    chunks, vi, delta, directed, store, ratios = batch
    p = partition_records_by_offset(
        chunks, vi, delta=delta, directed=directed, store=store, anchor_ratios=ratios if delta else None
    )
    expected = oracle(chunks.tolist(), vi.tolist(), delta=delta, directed=directed, store=store, ratios=ratios)
    assert placements(p) == expected
    assert list(p.segments) == sorted(set(p.segments))
    copies = copies_per_record(chunks, delta=delta, store=store)
    assert np.bincount(p.record, minlength=len(chunks)).tolist() == copies.tolist()


def _as_ranks(chunks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cells ascending, rank of every endpoint's chunk), as a write plan numbers them."""
    flat = chunks.reshape(-1, chunks.shape[-1])
    cells, inverse = np.unique(flat, axis=0, return_inverse=True)  # rows sort lexicographically = chunk order
    return cells, inverse.reshape(chunks.shape[:2])


@settings(max_examples=150, deadline=None)
@given(batches())
def test_partition_by_rank_matches_partition_by_offset(batch):
    """Link owners place by cell rank: the same placements, in the same order, as by coordinates."""
    chunks, vi, _, directed, store, _ = batch
    if chunks.shape[0] == 0:
        return
    cells, ranks = _as_ranks(chunks)
    by_rank = partition_records_by_rank(cells, ranks, vi, directed=directed, store=store)
    by_offset = partition_records_by_offset(chunks, vi, directed=directed, store=store)
    assert placements(by_rank) == placements(by_offset)
    assert by_rank.segments == by_offset.segments and by_rank.num_links == by_offset.num_links


def test_partition_by_rank_of_a_mostly_intra_mesh_matches_by_offset():
    """A large batch of mostly intra-chunk faces (the case ranks are for), every column equal."""
    rng = np.random.default_rng(3)
    chunks = np.repeat(rng.integers(-2, 3, (5000, 1, 3)), 3, axis=1)
    cross = rng.random(5000) < 0.05
    chunks[cross, 1] += rng.integers(-1, 2, (int(cross.sum()), 3))
    vi = rng.integers(0, 50, (5000, 3))
    cells, ranks = _as_ranks(chunks)
    a = partition_records_by_rank(cells, ranks, vi)
    b = partition_records_by_offset(chunks, vi)
    for name in ("segment", "cell", "record", "vi", "perm", "group_starts"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.segments == b.segments


@pytest.mark.parametrize("ranks", [[[0, 2]], [[-1, -1]], [[1, 1], [-1, 0]]])
def test_partition_by_rank_refuses_ranks_outside_the_cells(ranks):
    """Above and below: the intra rows are gathered unchecked (``np.take`` in mode "clip")."""
    vi = np.zeros((len(ranks), 2), np.int64)
    with pytest.raises(InputError, match="ranks must index the 2 cells"):
        partition_records_by_rank(np.zeros((2, 3), np.int64), np.array(ranks), vi)
