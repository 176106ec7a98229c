"""Which input table column is what: the column mapping of ``zv build`` and the table readers.

Defaults are the conventions of docs/formats.md ("Tables"); a name given explicitly
must exist (a missing one is an :class:`InputError` naming the file and the column),
a default name is used when present.  Columns that are neither mapped nor storable
(strings, nested values) are reported in ``dropped`` so the caller warns about them:
nothing is dropped silently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError

DEFAULT_AXES = ("x", "y", "z")
#: text inputs (tables, edge lists, OBJ, SWC) are UTF-8; a leading byte-order mark, which
#: spreadsheet programs write in "CSV UTF-8", is not part of the first column's name or line
#: (pandas' parsers drop it themselves; this is for what is read as Python text)
TEXT_ENCODING = "utf-8-sig"
#: the attribute under which a graph, mesh or skeleton input's own vertex ids are kept
ID_ATTRIBUTE = "id"


def storable(dtype: Any) -> bool:
    """A numpy numeric or bool dtype: what an attribute array can hold (strings, objects and
    pandas extension dtypes cannot)."""
    try:
        return np.dtype(dtype).kind in "biuf"
    except TypeError:
        return False


@dataclass(frozen=True)
class ColumnMap:
    """Names of the columns with a role; ``None`` means the default name, used when present.

    ``positions`` default: whichever of ``x, y, z`` the table has; ``columns`` default:
    every other storable column is a per-vertex (or per-record) attribute.
    """

    positions: tuple[str, ...] | None = None
    object_id: str | None = None
    id: str | None = None
    columns: tuple[str, ...] | None = None
    edges: tuple[str, ...] | None = None  # default src, dst
    faces: tuple[str, ...] | None = None  # default: the single-letter columns a, b, c[, d...] in name order
    line: str | None = None
    order: str | None = None
    parent: str | None = None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any] | None) -> ColumnMap:
        doc = dict(doc or {})
        unknown = set(doc) - {f.name for f in fields(cls)}
        if unknown:
            raise InputError(f"unknown column roles {sorted(unknown)}")
        return cls(**{k: tuple(v) if isinstance(v, (list, tuple)) else v for k, v in doc.items()})

    def to_json(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items() if v is not None}

    # -- effective names -------------------------------------------------------------
    def axes(self, present: Sequence[str], where: str) -> list[str]:
        if self.positions is not None:
            _require(present, self.positions, where, "--position-columns")
            return list(self.positions)
        axes = [a for a in DEFAULT_AXES if a in present]
        if "x" not in axes or len(axes) < 2:
            raise InputError(f"{where}: needs coordinate columns x, y[, z] (or name them with --position-columns); "
                             f"it has {list(present)}")
        return axes

    def named(self, role: str, present: Sequence[str], where: str, *, required: bool = False) -> str | None:
        """The column of a one-column role (``id``, ``object_id``, ``line``, ...), or None when absent and optional."""
        given = getattr(self, role)
        name = given or role
        if name in present:
            return name
        if given is not None or required:
            option = f"--{role.replace('_', '-')}-column"
            raise InputError(f"{where}: lacks column(s) {[name]} ({option}); it has {list(present)}")
        return None

    def edge_columns(self, present: Sequence[str], where: str) -> list[str]:
        names = list(self.edges or ("src", "dst"))
        _require(present, names, where, "--edge-columns")
        return names

    def face_columns(self, present: Sequence[str], where: str) -> list[str]:
        if self.faces is not None:
            _require(present, self.faces, where, "--face-columns")
            return list(self.faces)
        corners = sorted(c for c in present if len(c) == 1 and c.isalpha())
        if len(corners) < 3:
            raise InputError(f"{where}: needs corner columns a, b, c[, d...] (or --face-columns); it has {list(present)}")
        return corners

    def attributes(self, dtypes: Mapping[str, Any], taken: Sequence[str], where: str) -> tuple[list[str], list[str]]:
        """(attribute columns, dropped columns) of a table whose columns ``taken`` have roles."""
        if self.columns is not None:
            _require(list(dtypes), self.columns, where, "--columns")
            bad = [c for c in self.columns if not storable(dtypes[c])]
            if bad:
                raise InputError(f"{where}: --columns {bad} hold {[str(dtypes[c]) for c in bad]}, which cannot be "
                                 "stored (attributes are numbers or booleans)")
            return [c for c in self.columns if c not in taken], []
        rest = [c for c in dtypes if c not in taken]
        return [c for c in rest if storable(dtypes[c])], [c for c in rest if not storable(dtypes[c])]


def _require(present: Sequence[str], names: Sequence[str], where: str, option: str) -> None:
    missing = [c for c in names if c not in present]
    if missing:
        raise InputError(f"{where}: lacks column(s) {missing} ({option}); it has {list(present)}")


def dropped_warning(where: str, dropped: Sequence[str], dtypes: Mapping[str, Any] | None = None) -> str:
    """The one line that names what a build could not store: table columns that are not numbers
    (their types shown), and what a file reader named (lists, other elements, arrays of another
    length, data of an empty group)."""
    shown = ", ".join(f"{c!r} ({dtypes[c]})" if dtypes and c in dtypes else repr(c) for c in dropped)
    return f"{where}: {shown} cannot be stored as attributes and {'is' if len(dropped) == 1 else 'are'} left out"
