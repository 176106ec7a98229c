"""Raw-file access to a store directory, for making invalid fixtures: never the writer.

A defect is an edit of the files themselves -- a JSON document rewritten, a cell's
bytes changed, a file removed -- so the corpus's invalid stores do not depend on what
our writer would or would not produce.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np

ZSTD = numcodecs.Zstd(level=0)


def read_json(store: Path, node: str) -> dict[str, Any]:
    return json.loads((store / node / "zarr.json").read_text(encoding="utf-8"))


def write_json(store: Path, node: str, doc: dict[str, Any]) -> None:
    (store / node / "zarr.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")


def edit_json(store: Path, node: str, fn: Callable[[dict[str, Any]], object]) -> None:
    doc = read_json(store, node)
    fn(doc)
    write_json(store, node, doc)


def edit_attrs(store: Path, node: str, fn: Callable[[dict[str, Any]], object]) -> None:
    edit_json(store, node, lambda d: fn(d["attributes"]))


def raw_text_edit(store: Path, node: str, old: str, new: str) -> None:
    f = store / node / "zarr.json"
    text = f.read_text(encoding="utf-8")
    if old not in text:
        raise ValueError(f"{node}/zarr.json has no {old!r}")
    f.write_text(text.replace(old, new, 1), encoding="utf-8")


def cell_file(store: Path, array: str, chunk: tuple[int, ...]) -> Path:
    doc = read_json(store, array)
    origin = doc["attributes"].get("chunk_grid_origin", [0] * len(chunk))
    return store / array / "c" / Path(*[str(c - o) for c, o in zip(chunk, origin)])


def _compressed(store: Path, array: str) -> bool:
    return len(read_json(store, array)["codecs"]) > 1


def read_payload(store: Path, array: str, chunk: tuple[int, ...]) -> bytes:
    """The one item of a vlen cell (zstd or uncompressed), without its framing."""
    raw = cell_file(store, array, chunk).read_bytes()
    if _compressed(store, array):
        raw = ZSTD.decode(raw)
    n, length = np.frombuffer(raw[:8], "<u4")
    if n != 1 or length != len(raw) - 8:
        raise ValueError(f"{array} cell {chunk} is not one framed item")
    return bytes(raw[8:])


def write_payload(store: Path, array: str, chunk: tuple[int, ...], payload: bytes) -> None:
    raw = np.array([1, len(payload)], "<u4").tobytes() + payload
    if _compressed(store, array):
        raw = bytes(ZSTD.encode(raw))
    path = cell_file(store, array, chunk)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw)


def nonempty(store: Path, array: str) -> list[tuple[int, ...]]:
    keys = read_json(store, array)["attributes"]["nonempty_chunks"]
    return [tuple(int(v) for v in k.split(".")) for k in keys]


def first_chunk(store: Path, array: str) -> tuple[int, ...]:
    return nonempty(store, array)[0]


def set_nonempty(store: Path, array: str, fn: Callable[[list[str]], list[str]]) -> None:
    edit_attrs(store, array, lambda a: a.__setitem__("nonempty_chunks", fn(a["nonempty_chunks"])))


def segments(store: Path, family: str = "0/links/0") -> list[str]:
    return sorted(p.name for p in (store / family).iterdir() if p.is_dir())


def cross_segment(store: Path, family: str = "0/links/0") -> str:
    """The first offsets segment of a family that is not the all-zero one."""
    return next(s for s in segments(store, family) if set(s.split(".")) != {"0"})


def remove_cell(store: Path, array: str, chunk: tuple[int, ...]) -> None:
    """Delete one cell file, and the directories it leaves empty (git keeps none, so neither may the fixture)."""
    path = cell_file(store, array, chunk)
    path.unlink()
    top = store / array
    parent = path.parent
    while parent != top and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent
