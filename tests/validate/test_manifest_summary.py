"""encoding.summarize_manifest_rows: the vectorised summary agrees with row-by-row decoding, at any int64 chunk."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import ZSTD

import zarr_vectors as zv
from zarr_vectors.encoding import (
    decode_manifest,
    encode_manifest,
    encode_mode0_manifests,
    frame_items,
    merge_manifest_summaries,
    named_coverage,
    summarize_manifest_rows,
    unframe_items,
)
from zarr_vectors.errors import InconsistentStoreError
from zarr_vectors.validation import validate


def _expected(rows: list[bytes]) -> tuple[int, dict]:
    """(non-empty rows, largest fragment per chunk) decoded row by row."""
    nonempty, table = 0, {}
    for row in rows:
        blocks = decode_manifest(row, 3)
        nonempty += bool(blocks)
        for b in blocks:
            table[b.chunk] = max(table.get(b.chunk, -1), int(b.fragments.max()))
    return nonempty, table


def _largest(summary: object, rows: list[bytes], first: int) -> dict:
    """The summary's largest fragments, each checked to be named by the row it cites."""
    for chunk, (f, r) in summary.max_fragment.items():
        assert any(b.chunk == chunk and f in b.fragments for b in decode_manifest(rows[r - first], 3))
    return {chunk: f for chunk, (f, _) in summary.max_fragment.items()}


def test_summary_matches_row_by_row_decoding() -> None:
    rng = np.random.default_rng(5)
    n = 40
    rows_of = np.sort(rng.integers(0, n, 120))
    chunks = rng.integers(-2, 3, (120, 3))
    mode0 = list(encode_mode0_manifests(rows_of, chunks, rng.integers(0, 9, 120), n))
    mixed = [encode_manifest([((0, 1, 2), [4, 5, 6]), ((1, 1, 1), [2])], 3), encode_manifest([], 3)]
    rows = mode0[:20] + mixed + mode0[20:]
    summary = summarize_manifest_rows(rows, 3, first_row=100)
    assert not summary.problems
    assert (summary.nonempty, _largest(summary, rows, 100)) == _expected(rows)
    halves = merge_manifest_summaries([summarize_manifest_rows(rows[:7], 3, first_row=100),
                                       summarize_manifest_rows(rows[7:], 3, first_row=107)])
    assert (halves.nonempty, _largest(halves, rows, 100)) == _expected(rows)


def test_a_bad_row_is_a_problem_not_an_exception() -> None:
    good = encode_manifest([((0, 0, 0), [1])], 3)
    summary = summarize_manifest_rows([good, good[:-1], b"\x01"], 3, first_row=10)
    assert summary.nonempty == 1 and summary.max_fragment == {(0, 0, 0): (1, 10)}
    assert [p.split(":")[0] for p in summary.problems] == ["row 11", "row 12"]


def test_a_mode0_fragment_outside_the_format_is_its_rows_problem_as_through_the_decoder() -> None:
    """The hunt: a mode-0 row naming fragment 2**32 passed the summary (only a negative one was
    looked for, once for all rows), so levels 1-2 passed a store the reader refuses; its other
    blocks still counted.  Now each such row is a problem worded as the decoder words it, and
    left out, whichever path summarises it."""
    import struct

    def row(*blocks: tuple[tuple[int, int, int], int]) -> bytes:
        body = b"".join(struct.pack("<3q", *c) + b"\0" + struct.pack("<q", f) for c, f in blocks)
        return struct.pack("<I", len(blocks)) + body

    good = row(((0, 0, 0), 1))
    rows = [good, row(((5, 5, 5), 7), ((0, 0, 0), 2**32)), row(((0, 0, 0), -3)), good,
            row(((6, 6, 6), 2), ((1, 1, 1), 2**40), ((1, 1, 1), -1))]
    summary = summarize_manifest_rows(rows, 3, first_row=10)
    assert summary.problems == [
        "row 11: manifest: block 1 names fragment 4294967296, outside [0, 2**32)",
        "row 12: manifest: block 0 names fragment -3, outside [0, 2**32)",
        "row 14: manifest: block 1 names fragment 1099511627776, outside [0, 2**32)",
    ]
    assert summary.nonempty == 2 and summary.max_fragment == {(0, 0, 0): (1, 13)}  # bad rows' blocks left out
    for r in (1, 2, 4):  # the decoder's own words, for the same rows
        with pytest.raises(Exception, match=re.escape(summary.problems[[1, 2, 4].index(r)].split(": ", 1)[1])):
            decode_manifest(rows[r], 3)


def test_manifest_chunk_coordinates_at_the_int64_extremes_are_summarised(copy_store: Callable[[str], Path]) -> None:
    """A block naming chunk -2**63 next to chunk 0: the span no longer overflows int64 (was a
    ValueError in _merge_max, L1_CHECK_CRASHED); the store gets the manifest rule's own finding
    and the reader an InconsistentStoreError naming the manifests."""
    low, high = -(2**63), 2**63 - 1
    rows = [encode_manifest([((low, 0, 0), [1]), ((0, 0, 0), [2])], 3), encode_manifest([((high, low, 0), [3])], 3)]
    summary = summarize_manifest_rows(rows, 3)
    assert summary.max_fragment == {(low, 0, 0): (1, 0), (0, 0, 0): (2, 0), (high, low, 0): (3, 1)}

    store = copy_store("points_ids")
    f = store / "0/object_index/manifests/c/0"
    items = unframe_items(ZSTD.decode(f.read_bytes()))
    blocks = decode_manifest(items[0], 3)
    items[0] = encode_manifest([((low, *blocks[0].chunk[1:]), blocks[0].fragments.tolist()),
                                *((b.chunk, b.fragments.tolist()) for b in blocks[1:])], 3)
    f.write_bytes(bytes(ZSTD.encode(frame_items(items))))
    with pytest.raises(InconsistentStoreError, match=r"manifests: a manifest names chunk -9223372036854775808\."):
        zv.read(str(store))
    result = validate(str(store), 5)
    found = {x.code for x in result.findings}
    assert "L3_MANIFEST_CHUNK_MISSING" in found, result.summary()
    assert not [c for c in found if c.endswith("_CHECK_CRASHED")], result.summary()


def _named_expected(rows: list[bytes]) -> dict:
    """How often each (chunk, fragment) is named, capped at 2, decoded row by row."""
    times: dict = {}
    for row in rows:
        for b in decode_manifest(row, 3):
            for f in b.fragments.tolist():
                times.setdefault(b.chunk, {})[f] = min(times.get(b.chunk, {}).get(f, 0) + 1, 2)
    return {c: dict(sorted(t.items())) for c, t in times.items()}


def _named(summary: object, expected: dict) -> dict:
    """The summary's runs as counts (capped at 2) over the fragments the rows name."""
    out = {}
    for c, t in expected.items():
        cover = named_coverage(summary.named.get(c), max(t) + 1)
        out[c] = {f: min(int(cover[f]), 2) for f in range(len(cover)) if cover[f]}
    assert set(summary.named) == set(expected)
    return out


def test_named_fragments_are_counted_as_row_by_row_decoding_counts_them() -> None:
    """The ownership rules' counts (L3_FRAGMENT_SHARED, L3_VERTEX_OWNERS): mode-0 rows in one
    pass, runs and lists expanded, chunks split over two summaries merged."""
    rng = np.random.default_rng(9)
    n = 60
    rows_of = np.sort(rng.integers(0, n, 200))
    mode0 = list(encode_mode0_manifests(rows_of, rng.integers(-1, 2, (200, 3)), rng.integers(0, 6, 200), n))
    mixed = [encode_manifest([((0, 1, 0), [4, 5, 6]), ((1, 1, 1), [2])], 3),
             encode_manifest([((0, 1, 0), [1, 3, 5])], 3)]
    rows = mode0[:30] + mixed + mode0[30:]
    summary = summarize_manifest_rows(rows, 3, count_named=True)
    expected = _named_expected(rows)
    assert _named(summary, expected) == expected
    assert any(2 in t.values() for t in expected.values())  # the draw names some fragment twice
    halves = merge_manifest_summaries([summarize_manifest_rows(rows[:25], 3, count_named=True),
                                       summarize_manifest_rows(rows[25:], 3, first_row=25, count_named=True)])
    assert _named(halves, expected) == expected
    # a 16-byte run naming 2**31 fragments stays one run: coverage is sized by the chunk, not the run
    huge = summarize_manifest_rows([encode_manifest([((0, 0, 0), [0])], 3)[:4 + 24] + b"\x01"
                                    + np.array([0, 2**31], "<i8").tobytes()], 3, count_named=True)
    assert named_coverage(huge.named[(0, 0, 0)], 5).tolist() == [1] * 5
    present = [bool(decode_manifest(row, 3)) for row in rows]  # which objects the level has (L5's dropped ids)
    assert summary.present_rows(len(rows)).tolist() == present == halves.present_rows(len(rows)).tolist()
    assert summarize_manifest_rows(rows, 3).named == {}  # counted only when asked
