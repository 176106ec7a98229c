"""One defect of an invalid fixture: a valid fixture, one raw-file edit, the code(s) it must raise."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

#: The documented decision (docs/decisions.md) behind our verdict on a code, where there is one.
DECISIONS: dict[str, str] = {
    "L2_ZV_VERSION": "D2",
    "L2_UNKNOWN_CAPABILITY": "D9",
    "L2_OBJECT_INDEX_LAYOUT": "D1",
    "L4_POINT_CLOUD_LINKS": "D17",
    "L4_GEOMETRY_TYPES": "D19",
    "L4_GEOMETRY_TYPES_UNREADABLE": "D19",
    "L5_BIN_DIVIDES_CHUNK": "D11",
    "L1_BAD_DELTA_NAME": "D16",
    "L1_BAD_OFFSETS_NAME": "D16",
    **{c: "D10" for c in ("L1_JSON_BOM", "L1_JSON_DUPLICATE_KEY", "L1_JSON_NONFINITE", "L1_JSON_TOO_DEEP",
                          "L1_JSON_ENVELOPE", "L1_JSON_EXTENSION_NAME", "L1_JSON_MUST_UNDERSTAND",
                          "L1_JSON_CHUNK_LENGTH", "L1_JSON_DIMENSION_NAMES", "L1_JSON_FILL_VALUE",
                          "L1_JSON_UNKNOWN_KEY", "L1_JSON_CODEC_CONFIG")},
}


@dataclass(frozen=True)
class Defect:
    name: str  # the case id is "bad-" + name
    base: str  # a valid fixture id
    apply: Callable[[Path], None]  # edits the copied store in place
    code: str
    description: str
    allow_layouts: tuple[str, ...] = ()  # layouts validate and read are told to accept (D1)


Edit = Callable[[Path], None]


def registry() -> tuple[list[Defect], Callable[..., Callable[[Edit], Edit]]]:
    """A list of defects and the decorator that appends to it (name from the function, text from its docstring)."""
    found: list[Defect] = []

    def defect(base: str, code: str, *, name: str | None = None, text: str | None = None,
               allow_layouts: tuple[str, ...] = ()) -> Callable[[Edit], Edit]:
        def register(fn: Edit) -> Edit:
            label = (name or fn.__name__).replace("_", "-")
            found.append(Defect(label, base, fn, code, text or (fn.__doc__ or label).strip(), allow_layouts))
            return fn

        return register

    return found, defect
