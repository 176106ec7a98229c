"""FragmentIndex v1: how a cell's rows are grouped into fragments (docs/format.md §6.2).

Used by ``vertex_fragments`` and ``link_fragments``. A fragment is either a range
``(start, count)`` of rows or an explicit list of row indices. The encoding must be
byte-identical to the reference (bitmap padded to 8 bytes, ``csr_offsets`` always present
when F > 0, header only when F == 0) so that stores compare equal across implementations.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from zarr_vectors import config
from zarr_vectors.errors import EncodingError, InputError, ResourceLimitError

MAGIC = 0x5A564647
VERSION = 1
_HEADER = struct.Struct("<IHHII")
_U32_MAX = 2**32 - 1
_I64_MAX = np.iinfo(np.int64).max
_EXPANDED_ROW_BYTES = 16  # expand() returns an int64 fragment id and an int64 row per selected row


def _bitmap_bytes(num_fragments: int) -> int:
    """Bitmap length: ceil(F/8) bytes rounded up to a multiple of 8."""
    return (num_fragments + 63) // 64 * 8


def max_encoded_size(num_fragments: int, explicit_rows: int) -> int:
    """Most bytes a FragmentIndex of at most ``num_fragments`` fragments and ``explicit_rows``
    explicit row indices can take: every fragment costed as a 16-byte range plus a 4-byte
    csr offset (the dearer of the two kinds, and both), so no split of F is larger."""
    f = max(0, int(num_fragments))
    return _HEADER.size + _bitmap_bytes(f) + 20 * f + 4 + 8 * max(0, int(explicit_rows))


def _int_vector(values: object, name: str) -> np.ndarray:
    """``values`` as a 1-D int64 array, or InputError naming ``name``."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise InputError(f"FragmentIndex: {name} must be 1-D, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise InputError(f"FragmentIndex: {name} must be integers, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def rows_back_to_back(
    starts: np.ndarray, counts: np.ndarray, explicit: np.ndarray, csr_indices: np.ndarray
) -> np.ndarray:
    """The rows of fragments one after another (int64): ``counts[i]`` rows from ``starts[i]``
    (:meth:`FragmentIndex.starts`) -- consecutive rows for a range, for an ``explicit`` fragment
    the rows ``csr_indices`` holds from that position."""
    rows = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()), dtype=np.int64)
    if explicit.any():
        at = np.repeat(explicit, counts)
        rows[at] = csr_indices[rows[at]]
    return rows


def _problem(
    is_range: np.ndarray,
    starts: np.ndarray,
    counts: np.ndarray,
    offsets: np.ndarray,
    indices: np.ndarray,
) -> str | None:
    """The first inconsistency among the five arrays, or None when they form an index."""
    num_ranges = int(np.count_nonzero(is_range))
    if starts.size != num_ranges or counts.size != num_ranges:
        return (
            f"{num_ranges} range fragments but {starts.size} starts and {counts.size} counts"
        )
    num_explicit = is_range.size - num_ranges
    if offsets.size != num_explicit + 1:
        return f"{num_explicit} explicit fragments need {num_explicit + 1} csr_offsets, got {offsets.size}"
    if offsets[0] != 0:
        return f"csr_offsets start at {int(offsets[0])}, not 0"
    steps = offsets[1:] - offsets[:-1]
    if num_explicit and steps.min() < 0:
        e = int(np.argmax(steps < 0))
        return f"csr_offsets decrease at explicit fragment {e} ({int(offsets[e])} > {int(offsets[e + 1])})"
    if int(offsets[-1]) != indices.size:
        return f"csr_offsets end at {int(offsets[-1])} but there are {indices.size} csr_indices"
    if indices.size and indices.min() < 0:
        i = int(np.argmax(indices < 0))
        return f"explicit row index {int(indices[i])} at csr position {i} is negative"
    if num_ranges and (starts.min() < 0 or counts.min() < 0):
        k = int(np.argmax((starts < 0) | (counts < 0)))
        return f"range #{k} ({int(starts[k])}, {int(counts[k])}) has a negative start or count"
    past = starts > _I64_MAX - counts  # start + count would wrap: compared without computing it
    if past.any():
        k = int(np.argmax(past))
        return f"range #{k} ({int(starts[k])}, {int(counts[k])}) ends past 2**63 - 1"
    return None


@dataclass(frozen=True, eq=False)
class FragmentIndex:
    """Rows of one cell grouped into fragments.

    Fragment f is range ``#k`` with k = number of ranges before f when ``is_range[f]``,
    otherwise explicit ``#(f - k)`` whose rows are
    ``csr_indices[csr_offsets[e]:csr_offsets[e + 1]]``.
    """

    is_range: np.ndarray
    range_starts: np.ndarray
    range_counts: np.ndarray
    csr_offsets: np.ndarray
    csr_indices: np.ndarray

    def __post_init__(self) -> None:
        is_range = np.asarray(self.is_range)
        if is_range.ndim != 1 or (is_range.size and is_range.dtype != np.bool_):
            raise InputError(
                f"FragmentIndex: is_range must be a 1-D bool array, got {is_range.dtype} {is_range.shape}"
            )
        object.__setattr__(self, "is_range", is_range.astype(np.bool_, copy=False))
        for name in ("range_starts", "range_counts", "csr_offsets", "csr_indices"):
            object.__setattr__(self, name, _int_vector(getattr(self, name), name))
        problem = _problem(
            self.is_range, self.range_starts, self.range_counts, self.csr_offsets, self.csr_indices
        )
        if problem:
            raise InputError(f"FragmentIndex: {problem}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FragmentIndex):
            return NotImplemented
        return all(
            np.array_equal(getattr(self, n), getattr(other, n))
            for n in ("is_range", "range_starts", "range_counts", "csr_offsets", "csr_indices")
        )

    # ---- constructors -------------------------------------------------------------

    @classmethod
    def from_ranges(
        cls, starts: np.ndarray | Sequence[int], counts: np.ndarray | Sequence[int]
    ) -> FragmentIndex:
        """All-range index, one fragment per ``(starts[i], counts[i])`` (writer hot path)."""
        s = _int_vector(starts, "starts")
        c = _int_vector(counts, "counts")
        if s.shape != c.shape:
            raise InputError(f"FragmentIndex: {s.size} starts but {c.size} counts")
        return cls(np.ones(s.size, dtype=np.bool_), s, c, np.zeros(1, np.int64), np.zeros(0, np.int64))

    @classmethod
    def from_counts(cls, counts: np.ndarray | Sequence[int]) -> FragmentIndex:
        """Ranges tiling the cell in order: fragment i holds the next ``counts[i]`` rows."""
        c = _int_vector(counts, "counts")
        return cls.from_ranges(np.cumsum(c) - c, c)

    @classmethod
    def from_fragments(
        cls, frags: Sequence[tuple[int, int] | Sequence[int] | np.ndarray]
    ) -> FragmentIndex:
        """Index from mixed fragments, as the reference writer takes them.

        A tuple ``(start, count)`` is always a range; a list or array is an explicit row
        list, stored as a range when it is ``start, start+1, ...`` with ``start >= 0``.
        """
        is_range = np.zeros(len(frags), dtype=np.bool_)
        starts: list[int] = []
        counts: list[int] = []
        explicit: list[np.ndarray] = []
        for f, frag in enumerate(frags):
            if isinstance(frag, tuple):
                if len(frag) != 2:
                    raise InputError(
                        f"FragmentIndex: fragment {f} tuple must be (start, count), got {frag!r}"
                    )
                try:
                    start, count = operator.index(frag[0]), operator.index(frag[1])
                except TypeError:
                    raise InputError(
                        f"FragmentIndex: fragment {f} tuple must hold integers, got {frag!r}"
                    ) from None
            else:
                rows = _int_vector(frag, f"fragment {f}")
                if not (rows.size and rows[0] >= 0 and np.all(np.diff(rows) == 1)):
                    explicit.append(rows)
                    continue
                start, count = int(rows[0]), rows.size
            is_range[f] = True
            starts.append(start)
            counts.append(count)
        offsets = np.zeros(len(explicit) + 1, dtype=np.int64)
        np.cumsum([e.size for e in explicit], out=offsets[1:])
        indices = np.concatenate(explicit) if explicit else np.zeros(0, np.int64)
        return cls(is_range, np.array(starts, np.int64), np.array(counts, np.int64), offsets, indices)

    # ---- queries ------------------------------------------------------------------

    @property
    def num_fragments(self) -> int:
        return int(self.is_range.size)

    def row_counts(self) -> np.ndarray:
        """Number of selected rows of every fragment (int64, length F)."""
        out = np.empty(self.num_fragments, dtype=np.int64)
        out[self.is_range] = self.range_counts
        out[~self.is_range] = np.diff(self.csr_offsets)
        return out

    def starts(self) -> np.ndarray:
        """Where each fragment's rows begin (int64, length F): a range's first row; for an explicit
        fragment, its first position in ``csr_indices``."""
        out = np.empty(self.num_fragments, dtype=np.int64)
        out[self.is_range] = self.range_starts
        out[~self.is_range] = self.csr_offsets[:-1]
        return out

    def first_last_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """First and last row of every fragment (-1 for an empty one), nothing expanded: where a
        run of a polyline begins and ends."""
        first = np.full(self.num_fragments, -1, dtype=np.int64)
        last = first.copy()
        ranged = np.flatnonzero(self.is_range)
        used = self.range_counts > 0
        first[ranged[used]] = self.range_starts[used]
        last[ranged[used]] = self.range_starts[used] + self.range_counts[used] - 1
        explicit = np.flatnonzero(~self.is_range)
        used = np.diff(self.csr_offsets) > 0
        first[explicit[used]] = self.csr_indices[self.csr_offsets[:-1][used]]
        last[explicit[used]] = self.csr_indices[self.csr_offsets[1:][used] - 1]
        return first, last

    def rows(self, f: int) -> np.ndarray:
        """Row indices of fragment ``f``, in order."""
        if not 0 <= f < self.num_fragments:
            raise InputError(f"FragmentIndex: fragment {f} out of range for F={self.num_fragments}")
        k = int(np.count_nonzero(self.is_range[:f]))
        if self.is_range[f]:
            start = int(self.range_starts[k])
            return np.arange(start, start + int(self.range_counts[k]), dtype=np.int64)
        e = f - k
        return self.csr_indices[self.csr_offsets[e] : self.csr_offsets[e + 1]]

    def expanded_counts(self) -> np.ndarray:
        """:meth:`row_counts`, refused (ResourceLimitError) when every fragment's rows together,
        expanded, would exceed ``zarr_vectors.limits.max-decoded-bytes``.

        Ranges may overlap, so a small index can select far more rows than its cell holds.
        """
        counts = self.row_counts()
        ceiling = int(config.get("limits.max-decoded-bytes"))
        if float(counts.sum(dtype=np.float64)) * _EXPANDED_ROW_BYTES > ceiling:  # float: the int64 sum may wrap
            raise ResourceLimitError(
                f"FragmentIndex: its {self.num_fragments} fragments select "
                f"{float(counts.sum(dtype=np.float64)):.0f} rows, more than zarr_vectors.limits.max-decoded-bytes "
                f"({ceiling}) holds expanded"
            )
        return counts

    def expand(self) -> tuple[np.ndarray, np.ndarray]:
        """(fragment id, row index) of every selected row, fragments in order; held to the
        limit of :meth:`expanded_counts`."""
        counts = self.expanded_counts()
        frag_ids = np.repeat(np.arange(self.num_fragments, dtype=np.int64), counts)
        return frag_ids, rows_back_to_back(self.starts(), counts, ~self.is_range, self.csr_indices)

    def fragment_rows(self) -> list[np.ndarray]:
        """Row indices of every fragment, in order: :meth:`rows` of each, in one bounded pass."""
        _, rows = self.expand()
        ends = np.cumsum(self.row_counts()).tolist()
        return [rows[a:b] for a, b in zip([0, *ends[:-1]], ends)]

    def max_row(self) -> int:
        """Largest row any fragment selects, -1 when none (rows must lie in the cell)."""
        best = -1
        used = self.range_counts > 0
        if used.any():
            best = int((self.range_starts[used] + self.range_counts[used]).max()) - 1
        if self.csr_indices.size:
            best = max(best, int(self.csr_indices.max()))
        return best

    def is_tiling(self, n_rows: int) -> bool:
        """True when all fragments are ranges covering ``[0, n_rows)`` back-to-back in order."""
        if not self.is_range.all():
            return False
        ends = np.cumsum(self.range_counts)
        total = int(ends[-1]) if ends.size else 0
        return total == n_rows and bool(np.array_equal(self.range_starts, ends - self.range_counts))

    # ---- bytes --------------------------------------------------------------------

    def encode(self) -> bytes:
        """The FragmentIndex v1 bytes, identical to the reference writer's."""
        num_fragments = self.num_fragments
        num_ranges = int(self.range_starts.size)
        if num_fragments > _U32_MAX:
            raise InputError(f"FragmentIndex: F={num_fragments} exceeds the u32 field")
        if int(self.csr_offsets[-1]) > _U32_MAX:
            raise InputError(
                f"FragmentIndex: {int(self.csr_offsets[-1])} explicit rows exceed the u32 csr_offsets"
            )
        header = _HEADER.pack(MAGIC, VERSION, 0, num_fragments, num_ranges)
        if num_fragments == 0:
            return header
        bitmap = np.zeros(_bitmap_bytes(num_fragments), dtype=np.uint8)
        packed = np.packbits(self.is_range, bitorder="little")
        bitmap[: packed.size] = packed
        table = np.empty((num_ranges, 2), dtype="<i8")
        table[:, 0] = self.range_starts
        table[:, 1] = self.range_counts
        return b"".join(
            (
                header,
                bitmap.tobytes(),
                table.tobytes(),
                self.csr_offsets.astype("<u4").tobytes(),
                self.csr_indices.astype("<i8").tobytes(),
            )
        )

    @classmethod
    def decode(cls, buf: bytes | memoryview) -> FragmentIndex:
        """Parse FragmentIndex v1 bytes; anything but an exact, valid blob raises EncodingError."""
        mv = memoryview(buf).cast("B")
        size = len(mv)
        if size < _HEADER.size:
            raise EncodingError(f"FragmentIndex: {size} bytes, shorter than the 16-byte header")
        magic, version, flags, num_fragments, num_ranges = _HEADER.unpack_from(mv, 0)
        if magic != MAGIC:
            raise EncodingError(f"FragmentIndex: bad magic {bytes(mv[:4]).hex()} (expected 4746565a)")
        if version != VERSION:
            raise EncodingError(f"FragmentIndex: unsupported version {version} (expected 1)")
        if flags != 0:
            raise EncodingError(f"FragmentIndex: flags {flags:#06x} are not zero")
        if num_ranges > num_fragments:
            raise EncodingError(f"FragmentIndex: R={num_ranges} exceeds F={num_fragments}")
        if num_fragments == 0:
            if size != _HEADER.size:
                raise EncodingError(
                    f"FragmentIndex: {size - _HEADER.size} trailing bytes after an F=0 header"
                )
            return cls(np.zeros(0, np.bool_), np.zeros(0, np.int64), np.zeros(0, np.int64),
                       np.zeros(1, np.int64), np.zeros(0, np.int64))
        num_explicit = num_fragments - num_ranges
        bitmap_end = _HEADER.size + _bitmap_bytes(num_fragments)
        table_end = bitmap_end + 16 * num_ranges
        offsets_end = table_end + 4 * (num_explicit + 1)
        if offsets_end > size:
            raise EncodingError(
                f"FragmentIndex: truncated: F={num_fragments} R={num_ranges} need at least "
                f"{offsets_end} bytes, blob has {size}"
            )
        bits = np.unpackbits(np.frombuffer(mv[_HEADER.size : bitmap_end], np.uint8), bitorder="little")
        if bits[num_fragments:].any():
            raise EncodingError(
                f"FragmentIndex: bitmap padding after fragment {num_fragments - 1} is not zero"
            )
        is_range = bits[:num_fragments].astype(np.bool_)
        popcount = int(np.count_nonzero(is_range))
        if popcount != num_ranges:
            raise EncodingError(f"FragmentIndex: bitmap has {popcount} range bits but R={num_ranges}")
        table = np.frombuffer(mv[bitmap_end:table_end], "<i8").reshape(num_ranges, 2)
        offsets = np.frombuffer(mv[table_end:offsets_end], "<u4").astype(np.int64)
        expected = offsets_end + 8 * int(offsets[-1])
        if expected != size:
            what = "truncated" if expected > size else f"{size - expected} trailing bytes"
            raise EncodingError(
                f"FragmentIndex: {what}: csr_offsets end at {int(offsets[-1])} explicit rows, "
                f"so the blob should have {expected} bytes, it has {size}"
            )
        indices = np.frombuffer(mv[offsets_end:], "<i8")
        try:
            return cls(is_range, table[:, 0], table[:, 1], offsets, indices)
        except InputError as err:
            raise EncodingError(str(err)) from None
