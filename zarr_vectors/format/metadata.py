"""Root and level metadata (docs/format.md §3-4) as typed models.

``from_attributes`` applies the field rules of :mod:`zarr_vectors.format.schema` (the
ones the validator reports) and raises :class:`MetadataError` with the document and a
JSON pointer at the first problem; ``to_attributes`` writes exactly the keys the
reference writes, in its order, omitting optional keys that are absent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zarr_vectors.errors import MetadataError
from zarr_vectors.format.coarsen import AGGREGATION_MEMBER
from zarr_vectors.format.schema import (
    CROSS_CHUNK_STRATEGIES,
    CROSS_LEVEL_STORAGES,
    GEOMETRY_TYPES,
    KNOWN_CAPABILITIES,
    LEVEL_FIELDS,
    LINKS_CONVENTIONS,
    OBJECT_INDEX_CONVENTIONS,
    ROOT_FIELDS,
    Field,
    check,
    is_finite_number,
    short,
)

__all__ = [
    "CROSS_CHUNK_STRATEGIES",
    "CROSS_LEVEL_STORAGES",
    "GEOMETRY_TYPES",
    "KNOWN_CAPABILITIES",
    "LINKS_CONVENTIONS",
    "OBJECT_INDEX_CONVENTIONS",
    "OBJECT_INDEX_LAYOUT",
    "OBJECT_INDEX_LAYOUT_V2",
    "ZV_VERSION",
    "LevelMetadata",
    "LevelTransform",
    "RootMetadata",
]

ZV_VERSION = "0.9.2"
OBJECT_INDEX_LAYOUT = "vlen_manifests_v1"
OBJECT_INDEX_LAYOUT_V2 = "vlen_manifests_v2"


class _Reader:
    """Typed access to one attributes object with error locations."""

    def __init__(self, obj: Any, *, file: str, pointer: str) -> None:
        if not isinstance(obj, dict):
            raise MetadataError(f"expected an object, found {type(obj).__name__}", file=file, pointer=pointer)
        self.obj, self.file, self.pointer = obj, file, pointer

    def error(self, key: str, message: str) -> MetadataError:
        return MetadataError(message, file=self.file, pointer=f"{self.pointer}/{key}")

    def required(self, key: str) -> Any:
        if key not in self.obj:
            raise MetadataError(f"required key {key!r} missing", file=self.file, pointer=self.pointer)
        return self.obj[key]

    def number_list(self, key: str) -> tuple[float, ...]:
        """A non-empty list of finite numbers > 0 (an NGFF scale or translation of this format)."""
        value = self.required(key)
        if not isinstance(value, list) or not value or not all(is_finite_number(v) and v > 0 for v in value):
            raise self.error(key, f"{key} must be a non-empty list of finite numbers > 0, found {short(value)}")
        return tuple(float(v) for v in value)

    def fields(self, fields: dict[str, Field], sid_ndim: int | None = None) -> dict[str, Any]:
        """Every member the schema describes (its default when absent); raises at the first problem."""
        out = {}
        for name, f in fields.items():
            found = check(f, self.obj, sid_ndim)
            if found is not None:
                raise MetadataError(found[1], file=self.file, pointer=self.pointer + found[0])
            out[name] = self.obj.get(name, f.default)
        return out

    def extra(self, fields: dict[str, Field]) -> dict[str, Any]:
        """Members the schema does not describe, kept verbatim."""
        return {k: v for k, v in self.obj.items() if k not in fields}


def _floats(values: Any) -> tuple[float, ...] | None:
    return None if values is None else tuple(float(v) for v in values)


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
        """A level's bin shape from its NGFF translation (= bin/2, docs/format.md §3.2)."""
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
        # the axes size the per-axis members; when they are unusable the members are checked
        # first (zv_version before all: a newer major version may lay multiscales out differently)
        ms_list = attrs.get("multiscales")
        ms0 = ms_list[0] if isinstance(ms_list, list) and ms_list else None
        axes = ms0.get("axes") if isinstance(ms0, dict) else None
        usable = isinstance(axes, list) and bool(axes) and all(isinstance(a, dict) and "name" in a for a in axes)
        zv = r.fields(ROOT_FIELDS, len(axes) if usable else None)
        ms_list = top.required("multiscales")
        if not isinstance(ms_list, list) or not ms_list:
            raise top.error("multiscales", "multiscales must be a non-empty list")
        ms = _Reader(ms_list[0], file=file, pointer="/attributes/multiscales/0")
        axes = ms.required("axes")
        if not usable:
            raise ms.error("axes", f"axes must be a non-empty list of axis objects, found {axes!r}")
        d = len(axes)
        listed = ms.obj.get("datasets", [])
        if not isinstance(listed, list):
            raise ms.error("datasets", f"datasets must be a list of dataset objects, found {short(listed)}")
        datasets = [
            _dataset(ds, d, file=file, pointer=f"/attributes/multiscales/0/datasets/{i}")
            for i, ds in enumerate(listed)
        ]
        ome = attrs.get("ome")
        name = ome.get("name", "zarr_vectors") if isinstance(ome, dict) else "zarr_vectors"
        bounds = zv["bounds"]
        return cls(
            chunk_shape=_floats(zv["chunk_shape"]),
            bounds=(_floats(bounds[0]), _floats(bounds[1])),
            geometry_types=list(zv["geometry_types"]),
            axes=axes,
            datasets=datasets,
            zv_version=zv["zv_version"],
            format_capabilities=list(zv["format_capabilities"]),
            base_bin_shape=_floats(zv["base_bin_shape"]),
            links_convention=zv["links_convention"],
            object_index_convention=zv["object_index_convention"],
            cross_chunk_strategy=zv["cross_chunk_strategy"],
            cross_level_depth=zv["cross_level_depth"],
            cross_level_storage=zv["cross_level_storage"],
            extra=r.extra(ROOT_FIELDS),
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
            if len(values) != d:
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
    """``attributes.zarr_vectors_level`` of a level group (docs/format.md §4)."""

    level: int
    vertex_count: int = 0
    arrays_present: list[str] = field(default_factory=list)
    object_sparsity: float = 1.0
    coarsening_method: str | None = "none"  # null as the store has it (the reference may write it)
    parent_level: int | None = None
    chunk_shape: tuple[float, ...] | None = None
    preserves_object_ids: bool = False
    inherited_num_objects: int | None = None
    shared_fragments: bool = False
    fragments_tile: bool = False
    attribute_aggregation: dict[str, str] | None = None  # D22: each carried vertex attribute's reduction
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
        if self.attribute_aggregation is not None:
            out[AGGREGATION_MEMBER] = dict(self.attribute_aggregation)
        out.update(self.extra)
        return {"zarr_vectors_level": out}

    @classmethod
    def from_attributes(cls, attrs: dict[str, Any], *, file: str, sid_ndim: int | None) -> LevelMetadata:
        """``sid_ndim``: the root's axes, which size the per-axis members (a level's ``chunk_shape``)."""
        top = _Reader(attrs, file=file, pointer="/attributes")
        r = _Reader(top.required("zarr_vectors_level"), file=file, pointer="/attributes/zarr_vectors_level")
        lv = r.fields(LEVEL_FIELDS, sid_ndim)
        return cls(
            level=lv["level"],
            vertex_count=lv["vertex_count"],
            arrays_present=list(lv["arrays_present"]),
            object_sparsity=float(lv["object_sparsity"]),
            coarsening_method=None if lv["coarsening_method"] is None else str(lv["coarsening_method"]),
            parent_level=lv["parent_level"],
            chunk_shape=_floats(lv["chunk_shape"]),
            preserves_object_ids=lv["preserves_object_ids"],
            inherited_num_objects=lv["inherited_num_objects"],
            shared_fragments=lv["shared_fragments"],
            fragments_tile=lv["fragments_tile"],
            attribute_aggregation=lv[AGGREGATION_MEMBER],
            extra=r.extra(LEVEL_FIELDS),
        )
