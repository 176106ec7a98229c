"""GraphML graphs (networkx).

Node positions are node data keys (``x, y[, z]`` or ``--position-columns``), which every
node must have (or a key default); a node declared twice, or named only by an edge, is
refused.  Every other numeric or boolean node key is a vertex attribute, every numeric
edge key an edge attribute (the key's default where a node or edge lacks it, else NaN),
and keys holding anything else are named in ``dropped``.
Integer node ids are kept as the vertex attribute ``id``; other ids (text) are named in
``dropped`` as ``node id`` and the node's position in the file is kept instead, so results
map back to the input's nodes either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from zarr_vectors.errors import InputError
from zarr_vectors.io import geometry_parts as gp
from zarr_vectors.io.columns import ID_ATTRIBUTE, ColumnMap, storable
from zarr_vectors.io.tables import geometry_from_frame, remote_options, unreadable, vertex_ids
from zarr_vectors.io.types import FileFormat, Geometry, as_geometry


def _records(rows: list[dict[str, Any]], index: int) -> Any:
    """Node or edge data dicts as a frame; values networkx read as text stay text (dropped)."""
    import pandas as pd

    return pd.DataFrame.from_records(rows, index=range(index)) if rows else pd.DataFrame(index=range(index))


def _integer_ids(nodes: list[Any]) -> np.ndarray | None:
    try:
        ids = np.asarray([int(n) for n in nodes], dtype=np.int64)
    except (TypeError, ValueError):
        return None
    return ids if [str(i) for i in ids.tolist()] == [str(n) for n in nodes] else None


_XMLNS = "http://graphml.graphdrawing.org/xmlns "  # expat names an element (namespace, space, tag)


class _Declared(NamedTuple):
    nodes: set[str]  # the ids of the <node> elements
    edge_id_key: bool  # a key "id" for edges (for="edge", "all" or no for): networkx writes <edge id> over it
    edge_ids: bool  # some <edge> has an id, which networkx hands over as edge data "id"


def _declared(path: str, f: Any) -> _Declared:
    """The ids of the file's ``<node>`` elements, read as a stream (expat, no tree); one declared twice is
    refused.  networkx shows neither mistake: it merges a repeated node into one (the later data over the
    earlier) and adds a node that only an edge names."""
    from xml.parsers import expat

    seen: set[str] = set()
    edge_id_key = edge_ids = False

    def start(name: str, attributes: dict[str, str]) -> None:
        nonlocal edge_id_key, edge_ids
        if name == _XMLNS + "key" and attributes.get("for", "all") in ("edge", "all") \
                and attributes.get("attr.name") == "id":
            edge_id_key = True
        if name == _XMLNS + "edge" and "id" in attributes:
            edge_ids = True
        if name == _XMLNS + "node":
            node = attributes.get("id")
            if node is None:  # networkx would name it 'None'
                raise InputError(f"{path!r}: a <node> without an id")
            if node in seen:
                raise InputError(f"{path!r}: node {node!r} is declared twice (GraphML node ids are unique)")
            seen.add(node)

    parser = expat.ParserCreate(namespace_separator=" ")
    parser.StartElementHandler = start
    parser.ParseFile(f)
    return _Declared(seen, edge_id_key, edge_ids)


def read(path: str, *, columns: ColumnMap | None = None, storage_options: Mapping[str, Any] | None = None) -> Geometry:
    import fsspec
    import networkx as nx

    try:
        with fsspec.open(path, "rb", **remote_options([path], storage_options)) as f:
            declared = _declared(path, f)
            f.seek(0)
            graph = nx.read_graphml(f)
    except InputError:
        raise
    except Exception as exc:  # ParseError, NetworkXError for a file that is not GraphML
        raise unreadable(path, exc) from exc
    nodes = list(graph.nodes)
    undeclared = [n for n in nodes if n not in declared.nodes]
    if undeclared:  # networkx adds them, placed at the key defaults if there are any
        raise InputError(f"{path!r}: {len(undeclared)} node(s) named only by an edge, never declared, among them "
                         f"{undeclared[:5]!r}")
    row = {n: i for i, n in enumerate(nodes)}
    # a key's <default> holds where a node or edge has no value of its own; networkx keeps the
    # defaults aside (graph.graph["node_default"]), it does not fill them in
    node_default, edge_default = (dict(graph.graph.get(k) or {}) for k in ("node_default", "edge_default"))
    vertices = _records([{**node_default, **graph.nodes[n]} for n in nodes], len(nodes))
    if ID_ATTRIBUTE in vertices.columns:
        raise InputError(f"{path!r}: a node data key is named {ID_ATTRIBUTE!r}, the attribute that keeps node ids")
    ids = _integer_ids(nodes)
    vertices[ID_ATTRIBUTE] = ids if ids is not None else np.arange(len(nodes), dtype=np.int64)
    g = geometry_from_frame(vertices, path, columns)
    unplaced = [n for n in nodes if any(a not in node_default and a not in graph.nodes[n] for a in g.axes)]
    if unplaced:  # NaN rows otherwise, refused later without naming a node
        raise InputError(f"{path!r}: {len(unplaced)} node(s) without a position ({', '.join(g.axes)}), among them "
                         f"{unplaced[:5]!r}: declared without one, and the keys have no default")
    g.kind = "graph"
    dropped = list(g.dropped) + ([] if ids is not None else ["node id"])  # text ids: the row number is kept
    pairs = list(graph.edges(data=True))
    g.edges = np.asarray([(row[u], row[v]) for u, v, _ in pairs], dtype=np.int64).reshape(-1, 2)
    edge_data = _records([{**edge_default, **d} for _, _, d in pairs], len(pairs))
    if declared.edge_ids and not declared.edge_id_key:  # networkx's "id" is then the <edge id=...> itself,
        edge_data = edge_data.drop(columns=["id"], errors="ignore")  # no data (our multigraph writer numbers them)
    for key in edge_data.columns:
        values = edge_data[key]
        if storable(values.dtype):  # a key some edges lack reads as NaN there, as for nodes
            g.edge_attributes[str(key)] = values.to_numpy()
        else:
            dropped.append(f"edge {key}")
    g.dropped = tuple(dropped)
    return g


def _plain(values: np.ndarray) -> list[Any]:
    return np.asarray(values).tolist()  # GraphML's writer types Python scalars, not numpy ones


def write(path: str, data: Any, *, directed: bool = False, **_: Any) -> None:
    """Nodes keyed by their kept ids (else row numbers) with ``x, y, z``, ``object_id`` and the
    attributes as data keys (an attribute named like one of the others is refused, as is a name or
    text XML 1.0 cannot hold, before anything is written); every edge with its attributes, directed
    as ``directed`` says (``zv export`` passes the store's links policy)."""
    import networkx as nx

    g = as_geometry(data)
    if g.edges is None:
        raise InputError(f"{path!r}: GraphML holds graphs; the store has no edges")
    bad = [k for k, v in {**g.attributes, **g.edge_attributes}.items() if np.asarray(v).ndim != 1]
    if bad:
        raise InputError(f"{path!r}: attributes {bad} have several components; GraphML keys hold one value")
    gp.warn_unstored(path, "GraphML", g.object_attributes)  # keys are on nodes and edges, not on objects
    ids = vertex_ids(g)
    gp.refuse_non_xml(path, "node", {"id": ids})  # ids given as text by a caller
    # a multigraph: every edge record is one GraphML edge (a plain Graph merged repeated pairs,
    # and undirected A-B and B-A)
    graph = nx.MultiDiGraph() if directed else nx.MultiGraph()
    axes = list(g.axes) if len(g.axes) == g.positions.shape[1] else ["x", "y", "z"][: g.positions.shape[1]]
    node_columns = {a: g.positions[:, i] for i, a in enumerate(axes)}
    if g.object_ids is not None:
        node_columns["object_id"] = g.object_ids
    attributes = {k: v for k, v in g.attributes.items() if k != ID_ATTRIBUTE}  # kept ids key the nodes
    gp.refuse_clashes(path, "vertex attribute(s)", attributes, node_columns)
    node_columns.update(attributes)
    gp.refuse_non_xml(path, "node attribute", node_columns)
    gp.refuse_non_xml(path, "edge attribute", g.edge_attributes)
    node_data = {k: _plain(v) for k, v in node_columns.items()}
    keys = list(node_data)
    for i, node in enumerate(ids.tolist()):
        graph.add_node(node, **{k: node_data[k][i] for k in keys})
    edge_data = {k: _plain(v) for k, v in g.edge_attributes.items()}
    ends = ids[g.edges].tolist()
    for j, (u, v) in enumerate(ends):
        graph.add_edge(u, v, **{k: edge_data[k][j] for k in edge_data})
    with gp.os_errors(path, "written"):
        nx.write_graphml(graph, path)


FORMAT = FileFormat("graphml", (".graphml",), ("graph",), read, write, "GraphML graph (networkx)",
                    records_direction=True)
