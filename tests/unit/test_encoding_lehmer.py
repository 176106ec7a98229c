"""Lehmer code of perm_idx (docs/format.md §7.3): the table, worked records, round trips."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zarr_vectors.encoding import (
    MAX_ROWS_WIDTH,
    lehmer_decode,
    lehmer_decode_rows,
    lehmer_encode,
    lehmer_encode_rows,
)
from zarr_vectors.errors import EncodingError, InputError

TABLE = {
    1: [(0,)],
    2: [(0, 1), (1, 0)],
    3: [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)],
}


@pytest.mark.parametrize("width", sorted(TABLE))
def test_table(width: int) -> None:
    perms = TABLE[width]
    assert [lehmer_encode(p) for p in perms] == list(range(len(perms)))
    assert [lehmer_decode(c, width) for c in range(len(perms))] == perms
    assert lehmer_encode_rows(np.array(perms)).tolist() == list(range(len(perms)))
    assert lehmer_decode_rows(np.arange(len(perms)), width).tolist() == [list(p) for p in perms]


@pytest.mark.parametrize(
    ("sigma", "code"),
    [
        ((1, 2, 0), 3),  # mesh face [3,0,4] -> row [3,0,0,0]
        ((2, 1, 0), 5),  # mesh face [5,3,4]
        ((1, 0), 1),  # edge [2,0] -> row [1,0,0]
        ((1, 0, 2), 2),  # duplicate record, copy in cell 0.0.0: [2,2,1,0]
        ((2, 0, 1), 4),  # copy in cell 0.1.0: [4,0,1,2]
        ((0, 1, 2), 0),  # copy in cell 1.0.0: [0,1,2,0]
    ],
)
def test_worked_codes(sigma: tuple[int, ...], code: int) -> None:
    assert lehmer_encode(sigma) == code
    assert lehmer_decode(code, len(sigma)) == sigma


def test_code_is_lexicographic_rank() -> None:
    for width in range(1, 7):
        perms = np.array(list(itertools.permutations(range(width))))
        assert lehmer_encode_rows(perms).tolist() == list(range(math.factorial(width)))
        assert np.array_equal(lehmer_decode_rows(np.arange(len(perms)), width), perms)


def test_widest_rows() -> None:
    top = math.factorial(MAX_ROWS_WIDTH) - 1
    reverse = list(range(MAX_ROWS_WIDTH - 1, -1, -1))
    assert lehmer_encode_rows(np.array([reverse])).tolist() == [top]
    assert lehmer_decode_rows(np.array([top, 0]), MAX_ROWS_WIDTH).tolist() == [reverse, sorted(reverse)]


def test_scalar_functions_take_any_width() -> None:
    perm = tuple(range(29, -1, -1))
    assert lehmer_encode(perm) == math.factorial(30) - 1
    assert lehmer_decode(math.factorial(30) - 1, 30) == perm


@given(st.integers(1, 9).flatmap(lambda n: st.permutations(range(n))))
def test_round_trip(perm: list[int]) -> None:
    code = lehmer_encode(perm)
    assert 0 <= code < math.factorial(len(perm))
    assert lehmer_decode(code, len(perm)) == tuple(perm)


@given(st.data())
def test_rows_match_scalar(data: st.DataObject) -> None:
    width = data.draw(st.integers(1, MAX_ROWS_WIDTH))
    perms = data.draw(st.lists(st.permutations(range(width)), max_size=20))
    arr = np.array(perms, dtype=np.int64).reshape(-1, width)
    codes = lehmer_encode_rows(arr)
    assert codes.dtype == np.int64
    assert codes.tolist() == [lehmer_encode(p) for p in perms]
    assert np.array_equal(lehmer_decode_rows(codes, width), arr)


def test_rejects() -> None:
    with pytest.raises(EncodingError, match=r"perm_idx 6 at row 1 is outside \[0, 6\) for L=3"):
        lehmer_decode_rows(np.array([5, 6, 7]), 3)
    with pytest.raises(EncodingError, match="perm_idx -1 at row 0"):
        lehmer_decode_rows(np.array([-1]), 2)
    with pytest.raises(EncodingError, match=r"perm_idx 2 is outside \[0, 2\)"):
        lehmer_decode(2, 2)
    with pytest.raises(EncodingError, match="perm_idx -1"):
        lehmer_decode(-1, 3)
    with pytest.raises(InputError, match="not a permutation"):
        lehmer_encode([0, 0])
    with pytest.raises(InputError, match=r"row 1 \[1, 1\] is not a permutation"):
        lehmer_encode_rows(np.array([[0, 1], [1, 1]]))
    with pytest.raises(InputError, match=r"\[1, 20\]"):
        lehmer_encode_rows(np.zeros((1, 21), dtype=np.int64))
    with pytest.raises(InputError, match=r"\[1, 20\]"):
        lehmer_decode_rows(np.zeros(1, dtype=np.int64), 21)
    with pytest.raises(InputError, match="width must be >= 1"):
        lehmer_decode(0, 0)
