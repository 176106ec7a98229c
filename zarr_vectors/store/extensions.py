"""The Zarr v3 extension definitions the strict reader claims (docs/decisions.md D10).

A definition checks its own extension point: the data types check the fill value, each
known codec checks its configuration (a key it does not declare is an *unknown key*),
the regular chunk grid and the default/v2 chunk key encodings check theirs.  A name no
definition claims is not checked here; the consumer decides whether to support it
(docs/format.md §2 says which ones this format uses).  Each check returns
``(path below the checked member, message)`` pairs, so the reader in
:mod:`zarr_vectors.store.strict_json` can locate every problem by JSON pointer.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Callable, Iterator
from typing import Any, Final

from zarr_vectors.format.schema import is_int

__all__ = [
    "CODEC_KEYS",
    "FLOAT_STRINGS",
    "INTEGER_RANGES",
    "check_codec_configuration",
    "check_fill_value",
    "check_plain_configuration",
    "configuration_problem",
    "item_size",
    "known_data_type",
]

Found = tuple[tuple[str | int, ...], str]

INTEGER_RANGES: Final[dict[str, tuple[int, int]]] = {
    **{f"int{b}": (-(1 << (b - 1)), (1 << (b - 1)) - 1) for b in (8, 16, 32, 64)},
    **{f"uint{b}": (0, (1 << b) - 1) for b in (8, 16, 32, 64)},
}
#: Largest finite value and byte size of each float type (IEEE 754 binary16/32/64).
_FLOATS: Final[dict[str, tuple[float, int]]] = {
    "float16": (65504.0, 2),
    "float32": (3.4028234663852886e38, 4),
    "float64": (1.7976931348623157e308, 8),
}
_COMPLEX: Final[dict[str, str]] = {"complex64": "float32", "complex128": "float64"}
FLOAT_STRINGS: Final = ("NaN", "Infinity", "-Infinity")
_RAW_BITS: Final = re.compile(r"r([1-9][0-9]*)")
_HEX: Final = re.compile(r"0x[0-9a-fA-F]+")

#: Configuration keys each known codec declares (zarr-python and zarr-vectors 0.9.2 write
#: exactly these: zstd ``level, checksum``; blosc all five; ``crc32c`` no configuration).
CODEC_KEYS: Final[dict[str, frozenset[str]]] = {
    "bytes": frozenset({"endian"}),
    "vlen-bytes": frozenset(),
    "zstd": frozenset({"level", "checksum"}),
    "gzip": frozenset({"level"}),
    "blosc": frozenset({"typesize", "cname", "clevel", "shuffle", "blocksize"}),
    "crc32c": frozenset(),
    "sharding_indexed": frozenset({"chunk_shape", "codecs", "index_codecs", "index_location"}),
    "transpose": frozenset({"order"}),
}
_BLOSC_CNAMES: Final = ("blosclz", "lz4", "lz4hc", "snappy", "zlib", "zstd")
_BLOSC_SHUFFLES: Final = ("noshuffle", "shuffle", "bitshuffle")


def _show(value: Any) -> str:
    """A value as JSON spells it, so ``true`` is not mistaken for ``1`` in a message."""
    text = json.dumps(value, allow_nan=True)
    return text if len(text) <= 60 else text[:57] + "..."


# ---------------------------------------------------------------------------------------
# data types: the fill value
# ---------------------------------------------------------------------------------------
def _float_problem(value: Any, name: str) -> str | None:
    """What is wrong with ``value`` as a JSON fill value of float type ``name`` (None: nothing)."""
    largest, size = _FLOATS[name]
    if isinstance(value, str):
        if value in FLOAT_STRINGS:
            return None
        if _HEX.fullmatch(value) and len(value) == 2 + 2 * size:
            return None
        return (f"must be a number, one of {list(FLOAT_STRINGS)} or a {2 * size}-digit '0x' hex string, "
                f"got {_show(value)}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"must be a number or one of {list(FLOAT_STRINGS)}, got {_show(value)}"
    try:
        magnitude = abs(float(value))
    except OverflowError:  # an integer literal beyond the double range
        magnitude = math.inf
    if magnitude > largest:
        return f"{_show(value)} is outside the range of {name} (largest finite value {largest:g})"
    return None


def _bytes_problem(value: Any, name: str) -> str | None:
    if isinstance(value, str):
        try:
            base64.b64decode(value.encode("ascii"), validate=True)
        except (UnicodeEncodeError, binascii.Error):
            return f"must be a base64 string, got {_show(value)}"
        return None
    if name == "bytes" and isinstance(value, list) and all(is_int(v) and 0 <= v <= 255 for v in value):
        return None  # the zarr-extensions "bytes" spelling: an array of byte values
    what = "a base64 string or an array of integers 0..255" if name == "bytes" else "a base64 string"
    return f"must be {what}, got {_show(value)}"


def _fill_problem(value: Any, name: str) -> str | None:
    if name == "bool":
        return None if isinstance(value, bool) else f"must be true or false, got {_show(value)}"
    if name in INTEGER_RANGES:
        lo, hi = INTEGER_RANGES[name]
        if is_int(value) and lo <= value <= hi:
            return None
        return f"must be an integer in [{lo}, {hi}], got {_show(value)}"
    if name in _FLOATS:
        return _float_problem(value, name)
    if name in _COMPLEX:
        if not (isinstance(value, list) and len(value) == 2):
            return f"must be a [real, imaginary] pair, got {_show(value)}"
        part = next((p for p in (_float_problem(v, _COMPLEX[name]) for v in value) if p), None)
        return None if part is None else f"component {part}"
    raw = _RAW_BITS.fullmatch(name)
    if raw:
        n = int(raw[1]) // 8
        if isinstance(value, list) and len(value) == n and all(is_int(v) and 0 <= v <= 255 for v in value):
            return None
        return f"must be an array of {n} integers 0..255, got {_show(value)}"
    if name in ("variable_length_bytes", "bytes"):
        return _bytes_problem(value, name)
    if name == "string":
        return None if isinstance(value, str) else f"must be a string, got {_show(value)}"
    return None  # a data type no definition here claims


def check_fill_value(data_type: str, fill_value: Any) -> Iterator[Found]:
    """The fill value against the data type that claims it (docs/format.md §2)."""
    if _RAW_BITS.fullmatch(data_type) and int(data_type[1:]) % 8:
        yield (), f"raw data type {data_type!r} must have a multiple of 8 bits"
        return
    message = _fill_problem(fill_value, data_type)
    if message is not None:
        yield (), f"fill_value of a {data_type} array {message}"


def item_size(name: Any) -> int | None:
    """Bytes per element of a fixed-size data type this module claims (None: variable or unknown)."""
    if not isinstance(name, str):
        return None
    if name == "bool":
        return 1
    if name in INTEGER_RANGES or name in _FLOATS:
        return int(re.sub(r"\D", "", name)) // 8
    if name in _COMPLEX:
        return 2 * _FLOATS[_COMPLEX[name]][1]
    raw = _RAW_BITS.fullmatch(name)
    return int(raw[1]) // 8 if raw and int(raw[1]) % 8 == 0 else None


def known_data_type(name: Any) -> bool:
    """Whether a definition here claims the data type ``name`` (it then checks the fill value)."""
    if not isinstance(name, str):
        return False
    return (name in ("bool", "variable_length_bytes", "bytes", "string") or name in INTEGER_RANGES
            or name in _FLOATS or name in _COMPLEX or bool(_RAW_BITS.fullmatch(name)))


# ---------------------------------------------------------------------------------------
# configurations
# ---------------------------------------------------------------------------------------
def check_plain_configuration(kind: str, name: str, configuration: dict[str, Any],
                              declared: frozenset[str]) -> Iterator[Found]:
    """Undeclared keys of a known extension's configuration."""
    for key in configuration:
        if key not in declared:
            listed = ", ".join(sorted(declared)) or "no keys"
            yield (key,), f"unknown configuration key {key!r}: the {name} {kind} declares {listed}"


def _int_in(lo: int, hi: int | None) -> Callable[[Any], bool]:
    return lambda v: is_int(v) and v >= lo and (hi is None or v <= hi)


_CHECKS: Final[dict[str, dict[str, tuple[Callable[[Any], bool], str]]]] = {
    "bytes": {"endian": (lambda v: v in ("little", "big"), "'little' or 'big'")},
    "zstd": {"level": (_int_in(-131072, 22), "an integer in [-131072, 22]"),
             "checksum": (lambda v: isinstance(v, bool), "a boolean")},
    "gzip": {"level": (_int_in(0, 9), "an integer in [0, 9]")},
    "blosc": {"typesize": (_int_in(1, None), "an integer >= 1"),
              "cname": (lambda v: v in _BLOSC_CNAMES, f"one of {list(_BLOSC_CNAMES)}"),
              "clevel": (_int_in(0, 9), "an integer in [0, 9]"),
              "shuffle": (lambda v: v in _BLOSC_SHUFFLES, f"one of {list(_BLOSC_SHUFFLES)}"),
              "blocksize": (_int_in(0, None), "an integer >= 0")},
    "sharding_indexed": {"index_location": (lambda v: v in ("start", "end"), "'start' or 'end'")},
    "transpose": {"order": (lambda v: isinstance(v, list) and all(is_int(i) for i in v), "a list of integers")},
}


def configuration_problem(name: str, key: str, value: Any) -> str | None:
    """What the codec ``name``'s definition says is wrong with one configuration value."""
    rule = _CHECKS.get(name, {}).get(key)
    if rule is None or rule[0](value):
        return None
    return f"bad {name} configuration: {key} must be {rule[1]}, got {_show(value)}"


def check_codec_configuration(name: str, configuration: dict[str, Any],
                              itemsize: int | None = None) -> Iterator[Found]:
    """Every problem of a known codec's configuration: unknown keys, values its definition rejects.

    ``itemsize`` is the byte size of the elements the codec receives, when known: the
    ``bytes`` codec needs an ``endian`` for elements wider than one byte.  The nested
    codec lists and chunk shape of ``sharding_indexed`` are checked by the caller, which
    knows the array's dimensionality.
    """
    declared = CODEC_KEYS.get(name)
    if declared is None:
        return
    yield from check_plain_configuration("codec", name, configuration, declared)
    for key, value in configuration.items():
        message = configuration_problem(name, key, value)
        if message is not None:
            yield (key,), message
    if name == "bytes" and itemsize is not None and itemsize > 1 and "endian" not in configuration:
        yield (), f"bad bytes configuration: endian is required for {itemsize}-byte elements"
