"""Segment grammar of the links families (docs/format.md §7.4, docs/format.md §7.1, docs/decisions.md D16)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zarr_vectors.format.paths import (
    format_chunk_key,
    format_delta,
    format_offsets,
    intra_offsets,
    is_intra,
    link_attributes_group_path,
    link_attributes_path,
    links_group_path,
    links_path,
    parse_chunk_key,
    parse_delta,
    parse_offsets,
)

# (segment, link_width, sid_ndim, parsed): docs/format.md §7.1 "seen on disk" plus the table of docs/format.md §7.1.
SEGMENTS = [
    ("0.0.0", 2, 3, ((0, 0, 0),)),
    ("+1.0.0", 2, 3, ((1, 0, 0),)),
    ("-1.0.0", 2, 3, ((-1, 0, 0),)),
    ("0.+1.+1", 2, 3, ((0, 1, 1),)),
    ("+1.+1.+1", 2, 3, ((1, 1, 1),)),
    ("+2.+3.+3", 2, 3, ((2, 3, 3),)),
    ("0.0.+1", 2, 3, ((0, 0, 1),)),
    ("0.0.-1", 2, 3, ((0, 0, -1),)),
    ("0.0.0_0.0.0", 3, 3, ((0, 0, 0), (0, 0, 0))),
    ("0.0.0_0.+1.0", 3, 3, ((0, 0, 0), (0, 1, 0))),
    ("0.+1.0_+1.0.0", 3, 3, ((0, 1, 0), (1, 0, 0))),
    ("0.0.+1_0.+1.0", 3, 3, ((0, 0, 1), (0, 1, 0))),
    ("+1.-1.0_+1.0.+1", 3, 3, ((1, -1, 0), (1, 0, 1))),
    ("+1.0.0_0.+1.0", 3, 3, ((1, 0, 0), (0, 1, 0))),
    ("-1.0.0_-1.+1.0", 3, 3, ((-1, 0, 0), (-1, 1, 0))),
    ("self", 1, 3, ()),
    ("+12.-340", 2, 2, ((12, -340),)),
]


@pytest.mark.parametrize(("delta", "text"), [(0, "0"), (1, "+1"), (-1, "-1"), (2, "+2"), (-2, "-2"), (10, "+10")])
def test_delta_round_trip(delta: int, text: str) -> None:
    assert format_delta(delta) == text
    assert parse_delta(text) == delta


def test_format_delta_accepts_numpy_and_refuses_bool_and_float() -> None:
    assert format_delta(np.int64(-3)) == "-3"
    with pytest.raises(TypeError):
        format_delta(True)
    with pytest.raises(TypeError):
        format_delta(1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text", ["+0", "-0", "01", "+01", "-01", "1", " +1", "+1 ", "+", "-", "", "١", "+١", "+1\n", "++1", "0x1", "+1_0"]
)
def test_parse_delta_rejects_non_canonical(text: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"delta segment {text!r}")):
        parse_delta(text)


@pytest.mark.parametrize(("segment", "link_width", "sid_ndim", "parsed"), SEGMENTS)
def test_segment_round_trip(segment: str, link_width: int, sid_ndim: int, parsed: tuple[tuple[int, ...], ...]) -> None:
    assert parse_offsets(segment, link_width=link_width, sid_ndim=sid_ndim) == parsed
    assert format_offsets(parsed) == segment


def test_format_offsets_accepts_numpy() -> None:
    assert format_offsets(np.array([[0, 0, 1], [1, -1, 0]])) == "0.0.+1_+1.-1.0"
    assert format_offsets(np.zeros((0, 3), dtype=np.int64)) == "self"


@pytest.mark.parametrize("offsets", [((0, 1), (0,)), ((),)])
def test_format_offsets_rejects_ragged_or_empty_offsets(offsets: tuple[tuple[int, ...], ...]) -> None:
    with pytest.raises(ValueError, match="same, non-zero number of components"):
        format_offsets(offsets)


@given(
    link_width=st.integers(1, 4),
    sid_ndim=st.integers(1, 4),
    data=st.data(),
)
def test_format_parse_identity(link_width: int, sid_ndim: int, data: st.DataObject) -> None:
    component = st.integers(-1000, 1000)
    offset = st.tuples(*[component] * sid_ndim)
    offsets = data.draw(st.tuples(*[offset] * (link_width - 1)))
    segment = format_offsets(offsets)
    assert parse_offsets(segment, link_width=link_width, sid_ndim=sid_ndim) == offsets


@pytest.mark.parametrize(
    ("segment", "component"),
    [
        ("0.+0.0", "+0"),
        ("0.-0.0", "-0"),
        ("0.01.0", "01"),
        ("0.+01.0", "+01"),
        ("0.1.0", "1"),
        ("0. +1.0", " +1"),
        ("0.+1 .0", "+1 "),
        ("0.+.0", "+"),
        ("0..0", ""),
        ("0.١.0", "١"),
    ],
)
def test_parse_offsets_rejects_non_canonical_components(segment: str, component: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"segment {segment!r} has non-canonical component {component!r}")):
        parse_offsets(segment, link_width=2, sid_ndim=3)


@pytest.mark.parametrize(
    ("segment", "link_width", "sid_ndim", "message"),
    [
        ("0.+1", 2, 3, r"offsets segment '0\.\+1' has 2 components per offset, expected 3"),
        ("0.0.0.0", 2, 3, r"has 4 components per offset, expected 3"),
        ("0.0.0_0.0", 3, 3, r"has 2 components per offset, expected 3"),
        ("0.0.0", 3, 3, r"offsets segment '0\.0\.0' has 1 offsets, expected 2 \(link_width 3\)"),
        ("0.0.0_0.0.0", 2, 3, r"has 2 offsets, expected 1"),
        ("self", 2, 3, r"'self' is only valid for link_width 1"),
        ("0.0.0", 1, 3, r"offsets segment '0\.0\.0' must be 'self' for link_width 1"),
        ("", 1, 3, r"offsets segment '' must be 'self'"),
        ("", 2, 1, r"offsets segment '' has non-canonical component ''"),
        ("SELF", 1, 3, r"must be 'self'"),
    ],
)
def test_parse_offsets_arity_errors(segment: str, link_width: int, sid_ndim: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_offsets(segment, link_width=link_width, sid_ndim=sid_ndim)


@pytest.mark.parametrize(("link_width", "sid_ndim"), [(0, 3), (-1, 3), (2, 0)])
def test_parse_offsets_rejects_bad_family_arity(link_width: int, sid_ndim: int) -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        parse_offsets("0", link_width=link_width, sid_ndim=sid_ndim)
    with pytest.raises(ValueError, match="must be >= 1"):
        intra_offsets(sid_ndim, link_width)


def test_intra_offsets_and_is_intra() -> None:
    assert intra_offsets(3, 2) == ((0, 0, 0),)
    assert intra_offsets(2, 3) == ((0, 0), (0, 0))
    assert intra_offsets(3, 1) == ()
    assert format_offsets(intra_offsets(3, 3)) == "0.0.0_0.0.0"
    assert format_offsets(intra_offsets(3, 1)) == "self"
    assert is_intra(())
    assert is_intra(((0, 0, 0), (0, 0, 0)))
    assert not is_intra(((0, 0, 0), (0, 1, 0)))
    assert not is_intra(((-1, 0, 0),))
    assert is_intra(np.zeros((2, 3), dtype=np.int64))


def test_level_relative_paths() -> None:
    assert links_group_path(0) == "links/0"
    assert links_group_path(-1) == "links/-1"
    assert links_path(1, ((0, 0, 1),)) == "links/+1/0.0.+1"
    assert links_path(0, ()) == "links/0/self"
    assert link_attributes_group_path("weight", 0) == "link_attributes/weight/0"
    assert link_attributes_path("weight", -2, ((0, 0, 0), (1, 0, 0))) == "link_attributes/weight/-2/0.0.0_+1.0.0"


@pytest.mark.parametrize("name", ["", "a/b", ".", "..", "/"])
def test_link_attribute_names_are_one_segment(name: str) -> None:
    with pytest.raises(ValueError, match="link attribute name"):
        link_attributes_group_path(name, 0)
    with pytest.raises(ValueError, match="link attribute name"):
        link_attributes_path(name, 0, ((0,),))


def test_ascii_sort_puts_intra_last() -> None:
    names = [format_offsets(o) for o in [((0, 0, 0),), ((0, 0, 1),), ((0, 0, -1),), ((1, 0, 0),), ((-1, 0, 0),)]]
    assert names == ["0.0.0", "0.0.+1", "0.0.-1", "+1.0.0", "-1.0.0"]
    assert sorted(names) == ["+1.0.0", "-1.0.0", "0.0.+1", "0.0.-1", "0.0.0"]
    assert sorted(names)[-1] == format_offsets(intra_offsets(3, 2))


@pytest.mark.parametrize(
    ("coords", "key"), [((-1, 0, 2), "-1.0.2"), ((10, 12), "10.12"), ((0,), "0"), ((-10, 7), "-10.7")]
)
def test_chunk_key_round_trip(coords: tuple[int, ...], key: str) -> None:
    assert format_chunk_key(coords) == key
    assert parse_chunk_key(key) == coords
    assert parse_chunk_key(key, len(coords)) == coords


def test_format_chunk_key_accepts_numpy() -> None:
    assert format_chunk_key(np.array([-1, 0, 2])) == "-1.0.2"
    with pytest.raises(ValueError, match="at least one"):
        format_chunk_key(())


@pytest.mark.parametrize(
    "key", ["", "1..2", ".1", "1.", "+1.0", " 1.0", "1.0 ", "01.0", "-01.0", "-0.0", "1.a", "١.0", "1e3", "1.0\n"]
)
def test_parse_chunk_key_rejects_malformed(key: str) -> None:
    with pytest.raises(ValueError, match="chunk key"):
        parse_chunk_key(key)


def test_parse_chunk_key_checks_ndim() -> None:
    with pytest.raises(ValueError, match=r"chunk key '1\.2' has 2 components, expected 3"):
        parse_chunk_key("1.2", 3)


@given(st.lists(st.integers(-(10**12), 10**12), min_size=1, max_size=5))
def test_chunk_key_identity(coords: list[int]) -> None:
    assert parse_chunk_key(format_chunk_key(coords), len(coords)) == tuple(coords)
