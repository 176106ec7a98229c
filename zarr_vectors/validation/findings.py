"""The validator's findings and the catalogue of their stable codes.

Every rule of docs/validation.md has exactly one code here, with the level it
belongs to and its severity.  Codes never change meaning; ``docs/validation-codes.md`` is
generated from :data:`CATALOGUE` (and a test checks that the two agree).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from zarr_vectors.errors import ResourceLimitError, StorageObjectError, StorageRequestError

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True)
class Rule:
    code: str
    level: int
    severity: str
    rule: str


def _rules(level: int, *entries: tuple[str, str, str]) -> list[Rule]:
    return [Rule(code, level, severity, text) for code, severity, text in entries]


_E, _W = ERROR, WARNING

RULES: list[Rule] = [
    *_rules(
        1,
        ("L1_STORE_EMPTY", _E, "the store location holds a root zarr.json"),
        ("L1_BAD_JSON", _E, "every zarr.json is valid UTF-8 JSON whose top level is an object"),
        ("L1_JSON_BOM", _E, "no zarr.json starts with a UTF-8 byte order mark"),
        ("L1_JSON_DUPLICATE_KEY", _E, "no zarr.json object has a duplicate key"),
        ("L1_JSON_NONFINITE", _E, "numbers outside 'attributes' are finite"),
        ("L1_JSON_TOO_DEEP", _E, "zarr.json nesting is at most 256 levels"),
        ("L1_JSON_ENVELOPE", _E, "envelope literals: zarr_format 3, node_type group/array, required array members, "
                                 "known top-level members, attributes an object"),
        ("L1_JSON_EXTENSION_NAME", _E, "extension names match ^[a-z][a-z0-9-_.]+$ or are URIs"),
        ("L1_JSON_MUST_UNDERSTAND", _E, "no must_understand: false at an extension point"),
        ("L1_JSON_CHUNK_LENGTH", _E, "regular-grid (and shard) chunk lengths are integers >= 1, one per dimension"),
        ("L1_JSON_CONSOLIDATED", _E, "consolidated_metadata is an object when present"),
        ("L1_JSON_DIMENSION_NAMES", _E, "dimension_names has one entry per dimension when present"),
        ("L1_JSON_FILL_VALUE", _E, "fill_value is a value of the declared data type, spelled as Zarr v3 spells it "
                                   "(floats: a number in range, \"NaN\", \"Infinity\", \"-Infinity\" or a hex "
                                   "string)"),
        ("L1_JSON_UNKNOWN_KEY", _E, "the configuration of a known data type, chunk grid, chunk key encoding or codec "
                                    "has only the keys its definition declares"),
        ("L1_JSON_CODEC_CONFIG", _E, "every configuration value of a known codec is one its definition accepts"),
        ("L1_CONSOLIDATED_FORM", _E, "a group's consolidated_metadata has kind 'inline' and its metadata maps "
                                     "node paths to node documents"),
        ("L1_CONSOLIDATED_STALE", _E, "a group's consolidated_metadata copies exactly the nodes below it (zarr "
                                      "readers trust the copy)"),
        ("L1_STORAGE_OBJECT", _E, "the store holds only regular files and directories: no symbolic link, FIFO, "
                                  "socket or device, no directory where a zarr.json or chunk file belongs"),
        ("L1_MISSING_NODE", _E, "every directory holding nodes is itself a node (has a zarr.json)"),
        ("L1_STRAY_OBJECT", _W, "objects other than zarr.json and array chunks are not expected in the store"),
        ("L1_ROOT_NOT_GROUP", _E, "the root is a group"),
        ("L1_MISSING_ROOT_ZV", _E, "the root has an attributes.zarr_vectors block"),
        ("L1_NO_OME", _W, "the root has an RFC 8 'ome' node"),
        ("L1_NO_LEVELS", _E, "at least one level group"),
        ("L1_BAD_LEVEL_NAME", _E, "level names are bare non-negative integers"),
        ("L1_UNKNOWN_ROOT_CHILD", _W, "root children are levels (or parametric/headers)"),
        ("L1_LEVEL_NOT_GROUP", _E, "a level is a group"),
        ("L1_MISSING_VERTICES", _E, "each level has a vertices array"),
        ("L1_MISSING_VERTEX_FRAGMENTS", _W, "each level has a vertex_fragments array"),
        ("L1_ZV_ARRAY_MISSING", _E, "every node below a level that needs a zv_array discriminator has one"),
        ("L1_ZV_ARRAY_UNKNOWN", _E, "every zv_array discriminator is a recognised one"),
        ("L1_ZV_ARRAY_WRONG_PATH", _E, "every zv_array discriminator is the one for the node's path"),
        ("L1_UNEXPECTED_NODE", _E, "every node below a level sits at a path the format describes"),
        ("L1_NODE_TYPE", _E, "every node below a level is the node type (array/group) its path requires"),
        ("L1_BAD_DELTA_NAME", _E, "names under links/ and link_attributes/<name>/ are canonically spelled deltas"),
        ("L1_BAD_OFFSETS_NAME", _E, "names under links/<delta>/ and link_attributes/<name>/<delta>/ parse as "
                                    "offsets segments for the family's link_width and sid_ndim"),
        ("L1_GRID_RANK", _E, "every grid array has sid_ndim dimensions (sid_ndim + 1 on attribute-chunked levels)"),
        ("L1_BAD_ORIGIN", _E, "chunk_grid_origin, where present, has sid_ndim integer entries"),
        ("L1_MANIFEST_UNDECODABLE", _E, "object_index/manifests decodes completely: every chunk frames and every "
                                        "row parses with no trailing or missing bytes"),
        ("L1_RESOURCE_LIMIT", _E, "declared shapes and sizes stay within zarr_vectors.limits (max-declared-chunks, "
                                  "max-decoded-bytes), and no cell decodes to more than its size from metadata: a "
                                  "reader refuses a larger one before planning work for it or decoding past it"),
        ("L1_CHECK_CRASHED", _E, "a level-1 check raised an exception (reported, never swallowed)"),
    ),
    *_rules(
        2,
        ("L2_ZV_VERSION", _E, "zv_version parses, is >= 0.9.0 and has major version 0 (D2)"),
        ("L2_ROOT_REQUIRED", _E, "chunk_shape, bounds, geometry_types and multiscales[0].axes are present"),
        ("L2_SID_NDIM", _E, "sid_ndim (number of multiscales axes) is >= 1"),
        ("L2_CHUNK_SHAPE", _E, "chunk_shape has sid_ndim entries, each a finite number > 0"),
        ("L2_BOUNDS", _E, "bounds is [min, max], each sid_ndim numbers, min <= max"),
        ("L2_LINKS_CONVENTION", _E, "links_convention is in its canonical set"),
        ("L2_OBJECT_INDEX_CONVENTION", _E, "object_index_convention is in its canonical set"),
        ("L2_CROSS_CHUNK_STRATEGY", _E, "cross_chunk_strategy is in its canonical set"),
        ("L2_CROSS_LEVEL_STORAGE", _E, "cross_level_storage is none, implicit or explicit"),
        ("L2_CROSS_LEVEL_DEPTH", _E, "cross_level_depth is an integer >= -1"),
        ("L2_GEOMETRY_TYPES", _E, "geometry_types is a non-empty list of strings"),
        ("L2_CUSTOM_GEOMETRY", _W, "each geometry type is a known one (a custom type is skipped at level 4)"),
        ("L2_CAPABILITIES", _E, "format_capabilities is a list of strings"),
        ("L2_UNKNOWN_CAPABILITY", _W, "every format_capabilities token is a known one (D9)"),
        ("L2_BASE_BIN_SHAPE", _E, "base_bin_shape has sid_ndim entries > 0, each dividing chunk_shape"),
        ("L2_MULTISCALES_DATASETS", _E, "multiscales[0].datasets has one entry per level with sid_ndim-long scale "
                                        "and translation, level 0's scale all 1 and translation half its bin shape"),
        ("L2_OBJECT_INDEX_LAYOUT", _E, "object_index layout is vlen_manifests_v1 (D1); an allowed layout is a warning"),
        ("L2_OBJECT_INDEX_COUNTS", _E, "object_index num_objects, num_present, sid_ndim present and sane "
                                       "(0 <= num_present <= num_objects = manifest rows)"),
        ("L2_OBJECT_ATTRIBUTE_ROWS", _E, "every object attribute has one row per object_index row (and "
                                         "attributes.shape, where present, equals its shape)"),
        ("L2_HEADER_MEMBERS", _W, "the format headers a store keeps (headers/trk, trx, freesurfer, gifti) hold "
                                  "members an export can use; positions the root says are TrackVis voxel mm have "
                                  "a TRK header"),
        ("L2_LEVEL_BLOCK", _E, "each level has a zarr_vectors_level block"),
        ("L2_LEVEL_NUMBER", _E, "zarr_vectors_level.level equals the level's name"),
        ("L2_VERTEX_COUNT", _E, "zarr_vectors_level.vertex_count is an integer >= 0"),
        ("L2_ARRAYS_PRESENT", _E, "zarr_vectors_level.arrays_present is a list of family names, vertices among them"),
        ("L2_OBJECT_SPARSITY", _E, "object_sparsity is a number in (0, 1]"),
        ("L2_PARENT_LEVEL", _E, "parent_level is null at level 0, else an existing lower level"),
        ("L2_LEVEL_CHUNK_SHAPE", _E, "a per-level chunk_shape has sid_ndim finite entries > 0"),
        ("L2_LEVEL_FLAGS", _E, "preserves_object_ids, shared_fragments, fragments_tile are booleans and "
                               "inherited_num_objects an integer >= 0, where present"),
        ("L2_ATTRIBUTE_AGGREGATION", _E, "a level's attribute_aggregation maps vertex attributes of that level to "
                                         "mean, min, max or first, and only coarse levels have one (D22)"),
        ("L2_FAMILY_LINK_WIDTH", _E, "links/<d> has link_width >= 1"),
        ("L2_FAMILY_DIRECTED", _E, "links/<d> has a boolean directed"),
        ("L2_FAMILY_STORE", _E, "links/<d> has store canonical or duplicate"),
        ("L2_FAMILY_SID_NDIM", _E, "links/<d> has sid_ndim equal to the store's chunk-key rank"),
        ("L2_FAMILY_LEVEL_DELTA", _E, "links/<d> and link_attributes/<n>/<d> have level_delta equal to their path"),
        ("L2_FAMILY_COUNTS", _E, "links/<d> and link_attributes/<n>/<d> record num_links and num_physical_records "
                                 "as integers >= 0, where present"),
        ("L2_LINKS_ARRAY_AGREES", _E, "every array under a family agrees with it: link_width, level_delta, offsets "
                                      "field equal to its path segment, boolean has_perm"),
        ("L2_ARRAY_DTYPE", _E, "every grid array's dtype, row_shape and encoding are usable (vertices float, links "
                               "integer, attributes bool or numeric, numpy names, rows that fit a cell), one layout "
                               "per link-attribute family"),
        ("L2_DATA_TYPE", _E, "every array's data_type is the one its kind has (grid arrays, manifests, groups: "
                             "variable_length_bytes; object_ids int64; object attributes numeric and equal to "
                             "their dtype)"),
        ("L2_FILL_VALUE", _E, "every array's fill_value is the one its kind has (vlen arrays \"\"; object "
                              "attributes the absence sentinel)"),
        ("L2_CHUNK_KEY_ENCODING", _E, "every array's chunk keys use the default encoding with separator '/'"),
        ("L2_CHUNK_GRID", _E, "every array has a regular chunk grid"),
        ("L2_CODECS", _E, "every grid or typed array declares a codec pipeline this validator can decode"),
        ("L2_NONEMPTY_CHUNKS", _E, "every grid array has nonempty_chunks: a list of distinct canonical keys inside "
                                   "the array's grid"),
        ("L2_NONEMPTY_UNSORTED", _W, "nonempty_chunks is sorted as strings"),
        ("L2_CHECK_CRASHED", _E, "a level-2 check raised an exception (reported, never swallowed)"),
    ),
    *_rules(
        3,
        ("L3_NONEMPTY_MISSING", _E, "every key in nonempty_chunks has a cell on disk"),
        ("L3_NONEMPTY_EXTRA", _E, "every cell on disk is listed in nonempty_chunks"),
        ("L3_CELL_UNDECODABLE", _E, ("every cell decompresses and has the one-item vlen framing; every typed "
                                     "array chunk decodes to its declared size")),
        ("L3_SHARD_CORRUPT", _E, "sharded grid arrays: every shard object's index is complete, its CRC32C "
                                 "matches, and its entries lie inside the object and the array"),
        ("L3_VERTEX_ROWS", _E, "each vertex cell is a whole number of dtype x sid_ndim rows"),
        ("L3_FRAGMENT_INDEX_UNDECODABLE", _E, "each vertex_fragments cell decodes as a FragmentIndex v1"),
        ("L3_FRAGMENT_INDEX_MISSING", _E, "every non-empty vertex cell has a FragmentIndex at the same coordinate"),
        ("L3_FRAGMENT_OUT_OF_RANGE", _E, "every fragment range and explicit index lies inside the vertex rows"),
        ("L3_FRAGMENTS_TILE", _E, "a level claiming fragments_tile has every FragmentIndex tiling its rows"),
        ("L3_TOO_MANY_FRAGMENTS", _E, "point clouds without object ids: fragments per chunk <= bins per chunk"),
        ("L3_NONFINITE_VERTEX", _W, "vertex coordinates are finite"),
        ("L3_VERTEX_COUNT", _E, "the level's vertex_count equals the decoded row total"),
        ("L3_ARRAYS_PRESENT", _E, "every family named in arrays_present exists"),
        ("L3_ATTRIBUTE_ROWS", _E, "every vertex-attribute cell has as many rows as its vertex cell"),
        ("L3_FRAGMENT_ATTRIBUTE_ROWS", _E, "every fragment-attribute cell has as many rows as fragments"),
        ("L3_MANIFEST_CHUNK_MISSING", _E, "every manifest block names a chunk that exists at the level"),
        ("L3_MANIFEST_FRAGMENT_OUT_OF_RANGE", _E, "every manifest fragment index is below that chunk's fragment "
                                                  "count"),
        ("L3_OBJECT_NUM_PRESENT", _E, "object_index num_present equals the number of non-empty manifests"),
        ("L3_OBJECT_IDS", _E, ("a v2 index's object_ids are distinct and >= 0, ascending where object_ids_sorted "
                               "says so")),
        ("L3_FRAGMENT_SHARED", _E, ("a level without shared_fragments names each fragment in one manifest "
                                    "block at most")),
        ("L3_VERTEX_OWNERS", _E, ("on a level with an object index every vertex lies in a fragment a manifest "
                                  "names; at level 0 in exactly one (one owner)")),
        ("L3_OFFSETS_NOT_CANONICAL", _E, "undirected canonical delta-0 families: no lexicographically negative "
                                         "offset, offsets non-decreasing across the segment"),
        ("L3_HAS_PERM", _E, "each links array's has_perm equals links_has_perm(offsets, delta, directed, store)"),
        ("L3_LINK_CELL_BYTES", _E, "every link cell decodes: whole rows of link_width + has_perm ints (flat) or a "
                                   "consistent ragged blob"),
        ("L3_LINK_ENCODING", _E, "the flat/blob cell encoding matches delta == 0 and all-zero offsets"),
        ("L3_PERM_IDX_RANGE", _E, "every perm_idx lies in [0, L!)"),
        ("L3_LINK_VI_OUT_OF_RANGE", _E, "every vi_k is a row of chunk src + o_k (anchored across levels)"),
        ("L3_LINK_ENDPOINT_CHUNK_MISSING", _E, "every endpoint chunk exists at the endpoint's level"),
        ("L3_LINK_FRAGMENTS_PRESENCE", _E, "link_fragments has a cell for every cell of the delta-0 all-zero array "
                                           "and no other"),
        ("L3_LINK_FRAGMENTS_TILE", _E, "each link_fragments cell decodes and its ranges tile the link cell's rows"),
        ("L3_LINK_ATTRIBUTE_MIRROR", _E, "link attributes mirror the link family segment-for-segment and "
                                         "cell-for-cell"),
        ("L3_LINK_ATTRIBUTE_ROWS", _E, "each link-attribute cell has as many rows as the link cell has records"),
        ("L3_FAMILY_PHYSICAL_COUNT", _E, "a recorded num_physical_records equals the rows on disk"),
        ("L3_FAMILY_NUM_LINKS", _E, "num_links equals num_physical_records (canonical) or the distinct decoded "
                                    "records, each stored once per distinct endpoint chunk (duplicate)"),
        ("L3_CHECK_CRASHED", _E, "a level-3 check raised an exception (reported, never swallowed)"),
    ),
    *_rules(
        4,
        ("L4_LINKS_CONVENTION", _E, "links_convention is allowed for the geometry type"),
        ("L4_POINT_CLOUD_LINKS", _E, "a point cloud has no delta-0 links family (D17)"),
        ("L4_LINK_WIDTH", _E, "per-geometry link widths: mesh >= 3; graph, skeleton, line, polyline, streamline == 2"),
        ("L4_POLYLINE_BRIDGES", _E, ("polyline and streamline levels: the delta-0 records are the bridges the "
                                     "manifests' runs imply (a run's last vertex to the next run's first, across "
                                     "chunks), no more and no fewer")),
        ("L4_GEOMETRY_TYPES", _W, "a kind list reads as one kind: no listed kind is set aside for contradicting "
                                  "the store's metadata, and the rest form a chain of refinements (D19)"),
        ("L4_GEOMETRY_TYPES_UNREADABLE", _E, "of several listed kinds, at least one fits the store's links_convention, "
                                             "delta-0 link width, object index and link_fragments, and level 0 has no "
                                             "geometry_index "
                                             "(D19; else the reader refuses the store)"),
        ("L4_POINT_OUTSIDE_BIN", _E, "uncoarsened levels: each vertex lies in its cell's chunk (point clouds "
                                     "without ids: in its fragment's bin)"),
        ("L4_CHECK_CRASHED", _E, "a level-4 check raised an exception (reported, never swallowed)"),
    ),
    *_rules(
        5,
        ("L5_LEVELS_CONTIGUOUS", _E, "levels are exactly 0..n-1"),
        ("L5_PARENT_CHAIN", _E, "parent_level of level k > 0 is k - 1"),
        ("L5_CHUNK_SHAPE_MULTIPLE", _E, "a per-level chunk_shape is a positive integer multiple of the root's"),
        ("L5_BIN_DIVIDES_CHUNK", _E, "a level's bin_shape divides its chunk_shape wherever bin <= chunk (D11)"),
        ("L5_BIN_RATIO", _E, "bin_ratio (NGFF scale) is >= 1 and non-decreasing with level"),
        ("L5_BIN_VOLUME", _E, "bin volume is non-decreasing with level"),
        ("L5_VERTEX_COUNT", _E, "vertex count is non-increasing with level"),
        ("L5_INHERITED_NUM_OBJECTS", _E, "preserves_object_ids levels carry inherited_num_objects equal to the "
                                         "parent's object slot count, have that many slots themselves, and "
                                         "bring back no object the parent dropped"),
        ("L5_CROSS_LEVEL_STORAGE", _E, "cross_level_storage/depth decide which delta != 0 families exist"),
        ("L5_MULTISCALE_LINKS_TOKEN", _E, "multiscale_links capability present iff some delta != 0 family exists"),
        ("L5_CROSS_LEVEL_TARGET", _E, "every delta != 0 family's target level exists (its records are resolved "
                                      "at level 3)"),
        ("L5_CROSS_LEVEL_MIRROR", _E, "links/-N holds exactly the records of links/+N, turned around"),
        ("L5_CROSS_LEVEL_COVERAGE", _E, "where every coarser level up to N levels up keeps every object, links/+N "
                                        "holds exactly one record per vertex"),
        ("L5_CROSS_LEVEL_BIN", _E, "where links/+1 is checked for coverage, each record's metavertex lies in "
                                   "its vertex's bin of the coarse level (a metavertex is the centroid of the "
                                   "vertices in its bin)"),
        ("L5_CROSS_LEVEL_CENTROID", _E, "where every fine vertex has its record and the fine level shares no fragment, "
                                        "each metavertex is named by links/+1 records and lies at the mean of the "
                                        "vertices whose records name it"),
        ("L5_ATTRIBUTE_AGGREGATION", _E, "a coarse level's aggregated vertex attribute lies within its parent "
                                         "level's range of that attribute, as every reduction does (D22)"),
        ("L5_CHECK_CRASHED", _E, "a level-5 check raised an exception (reported, never swallowed)"),
    ),
]

CATALOGUE: dict[str, Rule] = {r.code: r for r in RULES}
assert len(CATALOGUE) == len(RULES), "duplicate finding code"


@dataclass(frozen=True)
class Finding:
    """One structured finding (D6)."""

    level: int
    code: str
    severity: str
    node: str
    cell: str | None
    pointer: str | None
    message: str

    def line(self) -> str:
        """``<n>: <node path>[ cell <key>]: <failure>`` on one line."""
        where = self.node or "/"
        if self.cell is not None:
            where += f" cell {self.cell}"
        text = " ".join(self.message.split())
        return f"{self.level}: {where}: {text}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def make(
    code: str,
    node: str,
    message: str,
    *,
    cell: str | None = None,
    pointer: str | None = None,
    severity: str | None = None,
) -> Finding:
    """A finding for ``code``; level and (default) severity come from the catalogue."""
    rule = CATALOGUE[code]
    if pointer:
        message = f"zarr.json#{pointer}: {message}"
    return Finding(rule.level, code, severity or rule.severity, node, cell, pointer, message)


def crashed(level: int, node: str, exc: BaseException, *, cell: str | None = None, what: str = "") -> Finding:
    """An exception raised while checking, turned into a finding (D7: never swallowed).

    A storage object the storage layer refused (a link, FIFO, device met after level 1's
    walk, e.g. made since) is that rule's finding, whichever check met it.  A storage that
    stopped answering is raised, not reported: nothing it failed to return says anything
    about the store, and the checks that did run saw only part of it.
    """
    if isinstance(exc, StorageRequestError):
        raise exc
    if isinstance(exc, StorageObjectError):
        return make("L1_STORAGE_OBJECT", node, f"{exc}: readers refuse it", cell=cell)
    if isinstance(exc, ResourceLimitError):  # e.g. a shard entry declaring more bytes than any cell may hold
        return make("L1_RESOURCE_LIMIT", node, f"{exc}: readers refuse it", cell=cell)
    detail = f"{type(exc).__name__}: {exc}"
    prefix = f"check {what!r} crashed" if what else "check crashed"
    return make(f"L{level}_CHECK_CRASHED", node, f"{prefix}: {detail}", cell=cell)


def catalogue_markdown() -> str:
    """The stable code list as a markdown table (``docs/validation-codes.md``)."""
    lines = [
        "# Validator finding codes",
        "",
        "Generated from `zarr_vectors/validation/findings.py` (a test keeps this file in step).",
        "Each rule of docs/validation.md has exactly one stable code. Messages are single",
        "lines `<n>: <node path>[ cell <key>]: <failure>` (docs/decisions.md D6); `--json` and",
        "`ValidationResult.findings` carry the code, level, severity, node, cell and JSON pointer.",
        "",
        "| code | level | severity | rule |",
        "|---|---|---|---|",
    ]
    for r in RULES:
        lines.append(f"| `{r.code}` | {r.level} | {r.severity} | {r.rule} |")
    return "\n".join(lines) + "\n"


class Report:
    """Findings collected so far, and which rules actually ran (for the ``passed`` list)."""

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.ran: dict[str, int] = {}

    def add(self, finding: Finding) -> None:
        self.findings.append(finding)

    def extend(self, findings: list[Finding]) -> None:
        self.findings.extend(findings)

    def error(self, code: str, node: str, message: str, **kw: Any) -> None:
        self.add(make(code, node, message, **kw))

    def crashed(self, level: int, node: str, exc: BaseException, **kw: Any) -> None:
        self.add(crashed(level, node, exc, **kw))

    def ran_rule(self, code: str, count: int = 1) -> None:
        self.ran[code] = self.ran.get(code, 0) + count

    def errors_at(self, level: int) -> int:
        return sum(1 for f in self.findings if f.level == level and f.severity == ERROR)
