"""Root and level metadata (FORMAT.md §3-4) as typed models.

``from_attributes`` checks types and enumerations and raises :class:`MetadataError`
with the document and a JSON pointer; ``to_attributes`` writes exactly the keys the
reference writes, in its order, omitting optional keys that are absent.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from zarr_vectors.errors import MetadataError
from zarr_vectors.format.schema import is_int

ZV_VERSION = "0.9.2"
MIN_ZV_VERSION = (0, 9, 0)

GEOMETRY_TYPES = ("point_cloud", "line", "polyline", "streamline", "skeleton", "graph", "mesh")
LINKS_CONVENTIONS = ("explicit", "implicit_sequential", "implicit_sequential_with_branches")
OBJECT_INDEX_CONVENTIONS = ("standard", "identity")
CROSS_CHUNK_STRATEGIES = ("explicit_links", "boundary_deduplication", "both")
CROSS_LEVEL_STORAGES = ("none", "implicit", "explicit")
KNOWN_CAPABILITIES = ("preserved_object_ids", "shared_fragments", "multiscale_links", "fragment_index")
OBJECT_INDEX_LAYOUT = "vlen_manifests_v1"
OBJECT_INDEX_LAYOUT_V2 = "vlen_manifests_v2"

_VERSION_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:[.+-].*)?$")


def parse_version(text: Any) -> tuple[int, int, int]:
    """Numeric version triple (D2: ``0.10.0 > 0.9.0``); ValueError when unparseable."""
    m = _VERSION_RE.match(text) if isinstance(text, str) else None
    if not m:
        raise ValueError(f"unparseable zv_version {text!r}")
    return int(m[1]), int(m[2]), int(m[3])


class _Reader:
    """Typed access to one attributes object with error locations."""

    def __init__(self, obj: Any, *, file: str, pointer: str) -> None:
        if not isinstance(obj, dict):
            raise MetadataError(f"expected an object, found {type(obj).__name__}", file=file, pointer=pointer)
        self.obj, self.file, self.pointer = obj, file, pointer

    def error(self, key: str, message: str) -> MetadataError:
        return MetadataError(message, file=self.file, pointer=f"{self.pointer}/{key}")

    def has(self, key: str) -> bool:
        return key in self.obj

    def required(self, key: str) -> Any:
        if key not in self.obj:
            raise MetadataError(f"required key {key!r} missing", file=self.file, pointer=self.pointer)
        return self.obj[key]

    def number_list(self, key: str, *, required: bool = True, positive: bool = False) -> tuple[float, ...] | None:
        if not required and key not in self.obj:
            return None
        value = self.required(key)
        if not isinstance(value, list) or not value or not all(_is_number(v) for v in value):
            raise self.error(key, f"{key} must be a non-empty list of numbers, found {value!r}")
        if positive and not all(v > 0 and math.isfinite(v) for v in value):
            raise self.error(key, f"{key} entries must be finite and > 0, found {value!r}")
        return tuple(float(v) for v in value)

    def enum(self, key: str, allowed: tuple[str, ...], default: str) -> str:
        value = self.obj.get(key, default)
        if value not in allowed:
            raise self.error(key, f"{key} {value!r} is not one of {list(allowed)}")
        return value

    def integer(self, key: str, *, default: int | None = None, minimum: int | None = None) -> int | None:
        if key not in self.obj:
            if default is None:
                return None
            value = default
        else:
            value = self.obj[key]
        if not is_int(value):
            raise self.error(key, f"{key} must be an integer, found {value!r}")
        if minimum is not None and value < minimum:
            raise self.error(key, f"{key} must be >= {minimum}, found {value}")
        return value

    def boolean(self, key: str) -> bool:
        value = self.obj.get(key, False)
        if not isinstance(value, bool):
            raise self.error(key, f"{key} must be a boolean, found {value!r}")
        return value


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


@dataclass(frozen=True)
class LevelTransform:
    """A level's NGFF dataset entry: bin ratio (scale) and translation (bin/2)."""

    path: str
    scale: tuple[float, ...]
    translation: tuple[float, ...]


@dataclass
class RootMetadata:
    """``attributes`` of the root group: ``zarr_vectors``, ``multiscales``, ``ome``."""

    chunk_shape: tuple[float, ...]
    bounds: tuple[tuple[float, ...], tuple[float, ...]]
    geometry_types: list[str]
    axes: list[dict[str, Any]]
    datasets: list[LevelTransform]
    zv_version: str = ZV_VERSION
    format_capabilities: list[str] = field(default_factory=list)
    base_bin_shape: tuple[float, ...] | None = None
    links_convention: str = "implicit_sequential"
    object_index_convention: str = "standard"
    cross_chunk_strategy: str = "explicit_links"
    cross_level_depth: int | None = None
    cross_level_storage: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # crs, attribute_specs, ... kept verbatim
    name: str = "zarr_vectors"

    @property
    def sid_ndim(self) -> int:
        return len(self.axes)

    @property
    def effective_base_bin_shape(self) -> tuple[float, ...]:
        return self.base_bin_shape if self.base_bin_shape is not None else self.chunk_shape

    @staticmethod
    def default_axes(ndim: int) -> list[dict[str, Any]]:
        names = ["x", "y", "z"] if ndim <= 3 else [f"d{i}" for i in range(ndim)]
        return [{"name": names[i], "type": "space"} for i in range(ndim)]

    @staticmethod
    def level_transform(level: int, bin_shape: tuple[float, ...], base_bin: tuple[float, ...]) -> LevelTransform:
        return LevelTransform(
            str(level),
            tuple(float(b) / float(b0) for b, b0 in zip(bin_shape, base_bin)),
            tuple(float(b) / 2.0 for b in bin_shape),
        )

    def bin_shape(self, level: int) -> tuple[float, ...]:
        """A level's bin shape from its NGFF translation (= bin/2, FORMAT.md §3.2)."""
        for ds in self.datasets:
            if ds.path == str(level):
                return tuple(2.0 * t for t in ds.translation)
        raise MetadataError(f"no multiscales dataset for level {level}", file="zarr.json",
                            pointer="/attributes/multiscales/0/datasets")

    def to_attributes(self) -> dict[str, Any]:
        zv: dict[str, Any] = {
            "zv_version": self.zv_version,
            "format_capabilities": list(self.format_capabilities),
            "chunk_shape": list(self.chunk_shape),
            "bounds": [list(self.bounds[0]), list(self.bounds[1])],
            "geometry_types": list(self.geometry_types),
        }
        if self.base_bin_shape is not None:
            zv["base_bin_shape"] = list(self.base_bin_shape)
        zv["links_convention"] = self.links_convention
        zv["object_index_convention"] = self.object_index_convention
        zv["cross_chunk_strategy"] = self.cross_chunk_strategy
        if self.cross_level_depth is not None:
            zv["cross_level_depth"] = self.cross_level_depth
        if self.cross_level_storage is not None:
            zv["cross_level_storage"] = self.cross_level_storage
        zv.update(self.extra)
        return {
            "zarr_vectors": zv,
            "multiscales": [
                {
                    "version": "0.4",
                    "name": "default",
                    "axes": self.axes,
                    "datasets": [
                        {
                            "path": d.path,
                            "coordinateTransformations": [
                                {"type": "scale", "scale": list(d.scale)},
                                {"type": "translation", "translation": list(d.translation)},
                            ],
                        }
                        for d in self.datasets
                    ],
                    "metadata": {"format": "zarr_vectors"},
                }
            ],
            "ome": {
                "version": "0.6",
                "type": "collection",
                "name": self.name,
                "attributes": {
                    "scene": {
                        "coordinateSystems": [{"name": "world", "axes": self.axes}],
                        "coordinateTransformations": [],
                    }
                },
                "nodes": [{"type": "zv:level", "name": d.path} for d in self.datasets],
            },
        }

    @classmethod
    def from_attributes(cls, attrs: dict[str, Any], *, file: str = "zarr.json") -> RootMetadata:
        top = _Reader(attrs, file=file, pointer="/attributes")
        r = _Reader(top.required("zarr_vectors"), file=file, pointer="/attributes/zarr_vectors")
        version = r.required("zv_version")
        try:
            vt = parse_version(version)
        except ValueError as exc:
            raise r.error("zv_version", str(exc)) from None
        if vt[0] != 0 or vt < MIN_ZV_VERSION:
            raise r.error("zv_version", f"zv_version {version!r} unsupported (need 0.x >= 0.9.0)")
        chunk_shape = r.number_list("chunk_shape", positive=True)
        assert chunk_shape is not None
        d = len(chunk_shape)
        bounds = r.required("bounds")
        if (
            not isinstance(bounds, list)
            or len(bounds) != 2
            or not all(isinstance(b, list) and len(b) == d and all(_is_number(v) for v in b) for b in bounds)
        ):
            raise r.error("bounds", f"bounds must be [min[{d}], max[{d}]], found {bounds!r}")
        if any(lo > hi for lo, hi in zip(*bounds)):
            raise r.error("bounds", f"bounds min exceeds max: {bounds!r}")
        gtypes = r.required("geometry_types")
        if not isinstance(gtypes, list) or not gtypes or not all(isinstance(g, str) for g in gtypes):
            raise r.error("geometry_types", f"geometry_types must be a non-empty list of names, found {gtypes!r}")
        caps = r.obj.get("format_capabilities", [])
        if not isinstance(caps, list) or not all(isinstance(c, str) for c in caps):
            raise r.error("format_capabilities", f"format_capabilities must be a list of strings, found {caps!r}")
        base_bin = r.number_list("base_bin_shape", required=False, positive=True)
        if base_bin is not None and len(base_bin) != d:
            raise r.error("base_bin_shape", f"base_bin_shape has {len(base_bin)} entries, expected {d}")
        depth = r.integer("cross_level_depth", minimum=-1)
        storage = r.enum("cross_level_storage", CROSS_LEVEL_STORAGES, "explicit") if r.has("cross_level_storage") else None
        known = {
            "zv_version", "chunk_shape", "bounds", "geometry_types", "format_capabilities", "base_bin_shape",
            "links_convention", "object_index_convention", "cross_chunk_strategy", "cross_level_depth",
            "cross_level_storage",
        }
        ms_list = top.required("multiscales")
        if not isinstance(ms_list, list) or not ms_list:
            raise top.error("multiscales", "multiscales must be a non-empty list")
        ms = _Reader(ms_list[0], file=file, pointer="/attributes/multiscales/0")
        axes = ms.required("axes")
        if not isinstance(axes, list) or not axes or not all(isinstance(a, dict) and "name" in a for a in axes):
            raise ms.error("axes", f"axes must be a non-empty list of axis objects, found {axes!r}")
        if len(axes) != d:
            raise r.error("chunk_shape", f"chunk_shape has {d} entries but multiscales declares {len(axes)} axes")
        datasets = [
            _dataset(ds, d, file=file, pointer=f"/attributes/multiscales/0/datasets/{i}")
            for i, ds in enumerate(ms.obj.get("datasets", []))
        ]
        ome = attrs.get("ome")
        name = ome.get("name", "zarr_vectors") if isinstance(ome, dict) else "zarr_vectors"
        return cls(
            chunk_shape=chunk_shape,
            bounds=(tuple(float(v) for v in bounds[0]), tuple(float(v) for v in bounds[1])),
            geometry_types=list(gtypes),
            axes=axes,
            datasets=datasets,
            zv_version=version,
            format_capabilities=list(caps),
            base_bin_shape=base_bin,
            links_convention=r.enum("links_convention", LINKS_CONVENTIONS, "implicit_sequential"),
            object_index_convention=r.enum("object_index_convention", OBJECT_INDEX_CONVENTIONS, "standard"),
            cross_chunk_strategy=r.enum("cross_chunk_strategy", CROSS_CHUNK_STRATEGIES, "explicit_links"),
            cross_level_depth=depth,
            cross_level_storage=storage,
            extra={k: v for k, v in r.obj.items() if k not in known},
            name=name,
        )


def _dataset(obj: Any, d: int, *, file: str, pointer: str) -> LevelTransform:
    r = _Reader(obj, file=file, pointer=pointer)
    path = r.required("path")
    scale: tuple[float, ...] | None = None
    translation: tuple[float, ...] | None = None
    transforms = r.obj.get("coordinateTransformations", [])
    for i, t in enumerate(transforms if isinstance(transforms, list) else []):
        t_r = _Reader(t, file=file, pointer=f"{pointer}/coordinateTransformations/{i}")
        kind = t_r.obj.get("type")
        if kind in ("scale", "translation"):
            values = t_r.number_list(kind)
            if values is None or len(values) != d:
                raise t_r.error(kind, f"{kind} must have {d} entries")
            if kind == "scale":
                scale = values
            else:
                translation = values
    if scale is None or translation is None:
        raise MetadataError("dataset needs a scale and a translation transform", file=file, pointer=pointer)
    return LevelTransform(str(path), scale, translation)


@dataclass
class LevelMetadata:
    """``attributes.zarr_vectors_level`` of a level group (FORMAT.md §4)."""

    level: int
    vertex_count: int = 0
    arrays_present: list[str] = field(default_factory=list)
    object_sparsity: float = 1.0
    coarsening_method: str = "none"
    parent_level: int | None = None
    chunk_shape: tuple[float, ...] | None = None
    preserves_object_ids: bool = False
    inherited_num_objects: int | None = None
    shared_fragments: bool = False
    fragments_tile: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def to_attributes(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "level": self.level,
            "object_sparsity": self.object_sparsity,
            "vertex_count": self.vertex_count,
            "coarsening_method": self.coarsening_method,
            "parent_level": self.parent_level,
            "arrays_present": list(self.arrays_present),
        }
        if self.chunk_shape is not None:
            out["chunk_shape"] = list(self.chunk_shape)
        if self.preserves_object_ids:
            out["preserves_object_ids"] = True
        if self.inherited_num_objects is not None:
            out["inherited_num_objects"] = self.inherited_num_objects
        if self.shared_fragments:
            out["shared_fragments"] = True
        if self.fragments_tile:
            out["fragments_tile"] = True
        out.update(self.extra)
        return {"zarr_vectors_level": out}

    @classmethod
    def from_attributes(cls, attrs: dict[str, Any], *, file: str) -> LevelMetadata:
        top = _Reader(attrs, file=file, pointer="/attributes")
        r = _Reader(top.required("zarr_vectors_level"), file=file, pointer="/attributes/zarr_vectors_level")
        level = r.integer("level", minimum=0)
        if level is None:
            raise MetadataError("required key 'level' missing", file=file, pointer=r.pointer)
        sparsity = r.obj.get("object_sparsity", 1.0)
        if not _is_number(sparsity) or not 0 < sparsity <= 1:
            raise r.error("object_sparsity", f"object_sparsity must be in (0, 1], found {sparsity!r}")
        arrays_present = r.obj.get("arrays_present", [])
        if not isinstance(arrays_present, list):
            raise r.error("arrays_present", "arrays_present must be a list")
        parent = r.obj.get("parent_level")
        if parent is not None and not is_int(parent):
            raise r.error("parent_level", f"parent_level must be null or an integer, found {parent!r}")
        known = {
            "level", "vertex_count", "arrays_present", "object_sparsity", "coarsening_method", "parent_level",
            "chunk_shape", "preserves_object_ids", "inherited_num_objects", "shared_fragments", "fragments_tile",
        }
        return cls(
            level=level,
            vertex_count=r.integer("vertex_count", default=0, minimum=0) or 0,
            arrays_present=list(arrays_present),
            object_sparsity=float(sparsity),
            coarsening_method=str(r.obj.get("coarsening_method", "none")),
            parent_level=parent,
            chunk_shape=r.number_list("chunk_shape", required=False, positive=True),
            preserves_object_ids=r.boolean("preserves_object_ids"),
            inherited_num_objects=r.integer("inherited_num_objects", minimum=0),
            shared_fragments=r.boolean("shared_fragments"),
            fragments_tile=r.boolean("fragments_tile"),
            extra={k: v for k, v in r.obj.items() if k not in known},
        )
