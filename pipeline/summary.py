"""What ``zv info`` and a finished ``zv build`` print about a store: levels, counts, arrays, files.

Read from metadata only (the root, each level's ``zarr.json`` and its arrays' documents)
plus, for ``zv info``, one listing of the store for the files each array holds: a
summary never reads a cell.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zarr_vectors.store.groups import Level, ZVStore


def size(nbytes: float) -> str:
    """Bytes for a reader: ``7.1 KiB``."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{int(nbytes)} B"


def rounded(values: Any, digits: int = 6) -> list[float]:
    """Coordinates to ``digits`` significant digits: readable, and still JSON."""
    return [float(f"{float(v):.{digits}g}") for v in values]


def level_counts(level: Level) -> str:
    """``N vertices[, M links], K chunks`` of one level, from its metadata."""
    from zarr_vectors.store.link_family import family_counts

    if not level.finished:
        return ("NOT FINISHED -- its document lists no vertices: a write still running, or one that was stopped "
                "(re-run it, or write the store again with overwrite)")
    parts = [f"{level.meta.vertex_count} vertices"]
    if "links" in level.meta.arrays_present:
        counts = family_counts(level, 0)
        if counts is not None:  # a mesh's records are its faces, a graph's and a skeleton's its edges
            kinds = set(level.store.root.geometry_types)
            noun = "faces" if kinds == {"mesh"} else "edges" if kinds <= {"graph", "skeleton"} else "links"
            parts.append(f"{counts.num_links} {noun}")
    vertices = level.array("vertices")
    parts.append(f"{len(vertices.nonempty_chunks)} chunks")
    return ", ".join(parts)


def sharding(level: Level) -> str:
    grid = level.array("vertices")
    return f"shards of {list(grid.sharding.shard_shape)} cells" if grid.sharding is not None else "none"


def attributes(level: Level) -> list[str]:
    """``name (dtype)`` of each per-vertex attribute."""
    names = level.children("vertex_attributes") if "vertex_attributes" in level.meta.arrays_present else []
    grids = level.arrays([f"vertex_attributes/{n}" for n in names])
    return [f"{n} ({g.attributes.get('dtype', '?')})" for n, g in zip(names, grids)]


def link_attributes(level: Level) -> list[str]:
    """``name (dtype)`` of each per-link attribute (edge or face), from its first delta-0 array."""
    from zarr_vectors.store.link_family import list_link_attribute_names

    out = []
    for name in list_link_attribute_names(level):
        segments = level.children(f"link_attributes/{name}/0")
        dtype = level.array(f"link_attributes/{name}/0/{segments[0]}").attributes.get("dtype", "?") if segments else "?"
        out.append(f"{name} ({dtype})")
    return out


def levels_summary(store: ZVStore) -> list[str]:
    """One line per level: its counts (what a build prints at its end); the levels read side by side."""
    return store.storage.overlap(lambda n: f"level {n}: {level_counts(store.level(n))}", store.level_numbers())


def info_lines(store: ZVStore, object_sizes: Mapping[str, int]) -> tuple[list[str], list[int]]:
    """``zv info``: the root's facts, then per level counts, attributes, sharding and the files of each
    array; and the levels the root names, or whose folder is there, without their ``zarr.json`` (no
    reader opens them: ``zv info`` exits 1)."""
    from zarr_vectors.store.consolidated import is_consolidated

    root = store.root
    stored = _stored_by_array(object_sizes)
    lines = [
        f"store:          {store.url}",
        f"geometry:       {', '.join(root.geometry_types)}",
        f"chunk_shape:    {list(root.chunk_shape)}",
        f"bounds:         {[rounded(root.bounds[0]), rounded(root.bounds[1])]}",
        f"consolidated:   {'yes' if is_consolidated(store.storage) else 'no'}",
    ]
    from zarr_vectors.format.headers import READ_BACK, header_path
    from zarr_vectors.format.paths import LEVEL_NAME

    if any(f"{header_path(name)}/zarr.json" in object_sizes for name in READ_BACK):
        lines.append(f"reference:      {_reference_line(store)}")
    named = {int(ds.path) for ds in root.datasets if LEVEL_NAME.fullmatch(ds.path)}
    levels = sorted(named | set(store.level_numbers()))  # one listing: a level folder may hold no object
    missing = [n for n in levels if f"{n}/zarr.json" not in object_sizes]
    for n in levels:
        if n in missing:
            lines.append(f"level {n}:        MISSING -- " + ("the root's multiscales names it, " if n in named else "")
                         + f"but {n}/zarr.json is not in the store")
            continue
        level = store.level(n)
        arrays = {name: v for (lvl, name), v in stored.items() if lvl == str(n)}
        files, nbytes = sum(c for c, _ in arrays.values()), sum(b for _, b in arrays.values())
        lines.append(f"level {n}:        {level_counts(level)}; {files} files, {size(nbytes)}")
        lines.append(f"  arrays:       {', '.join(level.meta.arrays_present)}")
        lines.append(f"  attributes:   {', '.join(attributes(level)) or 'none'}")
        per_link = link_attributes(level)
        if per_link:
            lines.append(f"  link attrs:   {', '.join(per_link)}")
        lines.append(f"  sharding:     {sharding(level)}")
        for name, (count, total) in sorted(arrays.items()):
            lines.append(f"  {name:<22}{count:>8} files {size(total):>12}")
    total = sum(b for _, b in stored.values())
    lines.append(f"total:          {sum(c for c, _ in stored.values())} files, {size(total)}")
    return lines, missing


def _reference_line(store: ZVStore) -> str:
    """The reference space the store's ``headers/`` keep, or why it cannot be read."""
    from zarr_vectors.errors import MetadataError
    from zarr_vectors.format.headers import READ_BACK, stored_gifti, stored_space, stored_volume_info
    from zarr_vectors.store.headers import read_headers

    try:
        headers = read_headers(store.storage, READ_BACK, crs=store.root.extra.get("crs"))
        kept, volume, surface = stored_space(headers), stored_volume_info(headers), stored_gifti(headers)
    except MetadataError as exc:
        return f"UNREADABLE -- {exc}"
    if kept is None and volume is not None:
        shape, centre = "x".join(str(v) for v in volume["volume"]), [round(float(v), 4) for v in volume["cras"]]
        return f"FreeSurfer volume geometry: {shape} voxels, c_ras {centre}"
    if kept is None and surface is not None:
        structure = surface["pointset_meta"].get("AnatomicalStructurePrimary", "not named")
        system = surface.get("coordsys")
        spaces = f"{system['dataspace']} to {system['xformspace']}" if system else "none"
        return f"GIfTI surface: structure {structure!r}; coordinate system {spaces}"  # repr: text from the store
    if kept is None:  # the listing saw a header the read did not find (removed meanwhile)
        return "none"
    space = kept.space
    grid, voxels = "x".join(map(str, space.dimensions)), "x".join(f"{v:g}" for v in space.voxel_sizes)
    order = f", {space.voxel_order}" if space.voxel_order else ""
    where = "RAS+ mm" if kept.positions == "rasmm" else "TrackVis voxel mm"
    return f"{kept.source.upper()} header: grid {grid}, voxels {voxels} mm{order}; positions in {where}"


def _stored_by_array(sizes: Mapping[str, int]) -> dict[tuple[str, str], tuple[int, int]]:
    """(level, array or group under it -- or its own zarr.json) -> (files, bytes); the root's under ''."""
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for key, nbytes in sizes.items():
        parts = key.split("/")
        where = (parts[0], parts[1]) if len(parts) > 1 else ("", parts[0])
        count, total = out.get(where, (0, 0))
        out[where] = (count + 1, total + nbytes)
    return out
