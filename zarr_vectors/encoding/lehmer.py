"""Lehmer code of the storage permutation, the ``perm_idx`` link column (docs/format.md §7.3).

``perm_idx = sum r_i * (L-1-i)!`` with ``r_i`` = number of later values smaller than
``sigma[i]``: the lexicographic rank of sigma among the permutations of ``0..L-1``. Sigma
maps stored position to input position, so decoding restores a record's input order.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

import numpy as np

from zarr_vectors.errors import EncodingError, InputError

MAX_ROWS_WIDTH = 20
"""Widest permutation the vectorised functions take: 20! - 1 still fits in an int64."""

_FACTORIALS = np.array([math.factorial(i) for i in range(MAX_ROWS_WIDTH + 1)], dtype=np.int64)


def lehmer_encode(perm: Sequence[int]) -> int:
    """Lehmer code of one permutation of ``0..L-1`` (any L)."""
    values = [operator.index(v) for v in perm]
    if sorted(values) != list(range(len(values))):
        raise InputError(f"Lehmer: {values} is not a permutation of 0..{len(values) - 1}")
    code = 0
    for i, v in enumerate(values):
        code = code * (len(values) - i) + sum(w < v for w in values[i + 1 :])
    return code


def lehmer_decode(code: int, width: int) -> tuple[int, ...]:
    """The permutation of ``0..width-1`` whose Lehmer code is ``code``."""
    if width < 1:
        raise InputError(f"Lehmer: width must be >= 1, got {width}")
    code = operator.index(code)
    original = code
    digits = []
    for radix in range(1, width + 1):
        code, r = divmod(code, radix)
        digits.append(r)
    if original < 0 or code:  # the digits consume exactly the codes below width!, so it is never computed
        bound = math.factorial(width) if width <= MAX_ROWS_WIDTH else f"{width}!"
        raise EncodingError(f"Lehmer: perm_idx {original} is outside [0, {bound}) for L={width}")
    remaining = list(range(width))
    return tuple(remaining.pop(r) for r in reversed(digits))


def _check_width(width: int) -> None:
    if not 1 <= width <= MAX_ROWS_WIDTH:
        raise InputError(f"Lehmer: vectorised width must be in [1, {MAX_ROWS_WIDTH}], got {width}")


def lehmer_encode_rows(perms: np.ndarray) -> np.ndarray:
    """Lehmer codes (int64) of every row of an ``(n, L)`` array of permutations."""
    p = np.asarray(perms)
    if p.ndim != 2:
        raise InputError(f"Lehmer: perms must be 2-D (n, L), got shape {p.shape}")
    width = p.shape[1]
    _check_width(width)
    if p.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    if p.dtype.kind not in "iu":
        raise InputError(f"Lehmer: perms must be integers, got dtype {p.dtype}")
    valid = (np.sort(p, axis=1) == np.arange(width)).all(axis=1)
    if not valid.all():
        i = int(np.argmin(valid))
        raise InputError(f"Lehmer: row {i} {p[i].tolist()} is not a permutation of 0..{width - 1}")
    codes = np.zeros(p.shape[0], dtype=np.int64)
    for i in range(width):
        codes = codes * (width - i) + (p[:, i + 1 :] < p[:, i : i + 1]).sum(axis=1)
    return codes


def lehmer_decode_rows(codes: np.ndarray, width: int) -> np.ndarray:
    """Permutations ``(n, width)`` (int64) of a 1-D array of Lehmer codes."""
    _check_width(width)
    c = np.asarray(codes)
    if c.ndim != 1:
        raise InputError(f"Lehmer: codes must be 1-D, got shape {c.shape}")
    if c.size == 0:
        return np.zeros((0, width), dtype=np.int64)
    if c.dtype.kind not in "iu":
        raise InputError(f"Lehmer: codes must be integers, got dtype {c.dtype}")
    limit = int(_FACTORIALS[width])
    bad = (c < 0) | (c >= limit)
    if bad.any():
        i = int(np.argmax(bad))
        raise EncodingError(f"Lehmer: perm_idx {int(c[i])} at row {i} is outside [0, {limit}) for L={width}")
    c = c.astype(np.int64)
    n = c.size
    available = np.ones((n, width), dtype=bool)
    out = np.empty((n, width), dtype=np.int64)
    row = np.arange(n)
    for i in range(width):
        digit = (c // _FACTORIALS[width - 1 - i]) % (width - i)
        rank = np.cumsum(available, axis=1) - 1
        choice = np.argmax(available & (rank == digit[:, None]), axis=1)
        out[:, i] = choice
        available[row, choice] = False
    return out
