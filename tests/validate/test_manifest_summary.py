"""encoding.summarize_manifest_rows: the vectorised summary agrees with row-by-row decoding."""

from __future__ import annotations

import numpy as np

from zarr_vectors.encoding import (
    decode_manifest,
    encode_manifest,
    encode_mode0_manifests,
    merge_manifest_summaries,
    summarize_manifest_rows,
)


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
    mode0 = encode_mode0_manifests(rows_of, chunks, rng.integers(0, 9, 120), n)
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
