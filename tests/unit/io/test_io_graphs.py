"""GraphML written by networkx and plain edge lists -> graph geometry -> files networkx / numpy read back."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from geometry_roundtrip import assert_refused_where_the_os_refuses

from zarr_vectors.errors import InputError
from zarr_vectors.io import edgelist, graphml, select
from zarr_vectors.io.types import Geometry


def _graph():
    g = nx.Graph()
    rng = np.random.default_rng(4)
    for i in range(12):
        g.add_node(i * 5 + 1, x=float(rng.random()), y=float(rng.random()), z=float(rng.random()), mass=float(i),
                   kind="cell")
    for i in range(11):
        g.add_edge(i * 5 + 1, (i + 1) * 5 + 1, weight=float(i) / 3, label="axon")
    return g


def test_graphml_round_trip_keeps_ids_numeric_data_and_names_the_rest(tmp_path):
    truth = _graph()
    nx.write_graphml(truth, tmp_path / "in.graphml")
    g = graphml.read(str(tmp_path / "in.graphml"))
    nodes = list(truth.nodes)
    np.testing.assert_array_equal(g.ids, nodes)
    np.testing.assert_array_equal(g.attributes["id"], nodes)
    np.testing.assert_array_equal(g.attributes["mass"], [truth.nodes[n]["mass"] for n in nodes])
    assert sorted(g.dropped) == ["edge label", "kind"]
    assert {tuple(sorted((int(g.ids[a]), int(g.ids[b])))) for a, b in g.edges} == \
        {tuple(sorted(e)) for e in truth.edges}
    graphml.write(str(tmp_path / "out.graphml"), g)
    back = nx.read_graphml(tmp_path / "out.graphml", node_type=int)
    assert sorted(back.nodes) == sorted(nodes)
    for n in nodes:
        for key in ("x", "y", "z", "mass"):
            assert back.nodes[n][key] == truth.nodes[n][key]
    assert {frozenset(e): d["weight"] for *e, d in back.edges(data=True)} == \
        {frozenset(e): d["weight"] for *e, d in truth.edges(data=True)}


def test_graphml_that_is_not_xml_names_the_file(tmp_path):
    (tmp_path / "bad.graphml").write_text("<graphml><node")
    with pytest.raises(InputError, match=r"bad\.graphml' cannot be read"):
        graphml.read(str(tmp_path / "bad.graphml"))


def test_graphml_edge_to_an_undeclared_node_is_named(tmp_path):
    """Regression (hunt): networkx adds the node an edge names; undeclared, it has no position, and the
    build failed later on 'positions row 2 is not finite', which named neither the node nor the edge."""
    g = nx.Graph()
    g.add_node("a", x=1.0, y=2.0, z=3.0)
    g.add_node("b", x=4.0, y=5.0, z=6.0)
    nx.write_graphml(g, tmp_path / "ok.graphml")
    text = (tmp_path / "ok.graphml").read_text()
    (tmp_path / "bad.graphml").write_text(text.replace("</graph>", '<edge source="a" target="q"/></graph>'))
    assert len(graphml.read(str(tmp_path / "ok.graphml")).positions) == 2
    with pytest.raises(InputError, match=r"bad\.graphml': 1 node\(s\) named only by an edge, never declared, "
                                         r"among them \['q'\]"):
        graphml.read(str(tmp_path / "bad.graphml"))
    (tmp_path / "bare.graphml").write_text(text.replace("</graph>", '<node id="c"><data key="d0">1.0</data></node>'
                                                                    "</graph>"))
    with pytest.raises(InputError, match=r"1 node\(s\) without a position \(x, y, z\), among them \['c'\]"):
        graphml.read(str(tmp_path / "bare.graphml"))  # declared, with an x but no y or z


GRAPHML_DEFAULTS = """<?xml version="1.0" encoding="UTF-8"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
<key id="x" for="node" attr.name="x" attr.type="double"><default>0.5</default></key>
<key id="y" for="node" attr.name="y" attr.type="double"><default>0.25</default></key>
<key id="z" for="node" attr.name="z" attr.type="double"/>
<key id="w" for="edge" attr.name="weight" attr.type="double"><default>2.5</default></key>
<graph edgedefault="undirected">
<node id="0"><data key="z">1</data></node>
<node id="1"><data key="x">4</data><data key="y">5</data><data key="z">6</data></node>
<edge source="0" target="1"/><edge source="1" target="0"><data key="w">1</data></edge>
</graph></graphml>
"""


def test_graphml_key_defaults_fill_what_a_node_or_edge_lacks(tmp_path):
    """Regression (review): networkx keeps a key's <default> aside rather than filling it in, so an
    edge without its own weight read as NaN and a node whose position came from defaults had none."""
    (tmp_path / "d.graphml").write_text(GRAPHML_DEFAULTS)
    g = graphml.read(str(tmp_path / "d.graphml"))
    np.testing.assert_array_equal(g.positions, [[0.5, 0.25, 1.0], [4.0, 5.0, 6.0]])
    np.testing.assert_array_equal(g.edge_attributes["weight"], [2.5, 1.0])


def test_graphml_node_declared_twice_or_only_by_an_edge_is_named_even_with_key_defaults(tmp_path):
    """Regression (hunt): networkx merged a node declared twice into one vertex (x, y from the second
    declaration, z from the first), and a node only an edge named took the key defaults as its position."""
    twice = GRAPHML_DEFAULTS.replace('<edge source="0"', '<node id="1"><data key="x">9</data></node><edge source="0"')
    (tmp_path / "twice.graphml").write_text(twice)
    with pytest.raises(InputError, match=r"twice\.graphml': node '1' is declared twice"):
        graphml.read(str(tmp_path / "twice.graphml"))
    (tmp_path / "typo.graphml").write_text(GRAPHML_DEFAULTS.replace('target="0"', 'target="O"'))
    with pytest.raises(InputError, match=r"typo\.graphml': 1 node\(s\) named only by an edge, never declared, "
                                         r"among them \['O'\]"):
        graphml.read(str(tmp_path / "typo.graphml"))
    (tmp_path / "anon.graphml").write_text(GRAPHML_DEFAULTS.replace('<node id="1">', "<node>"))
    with pytest.raises(InputError, match=r"anon\.graphml': a <node> without an id"):
        graphml.read(str(tmp_path / "anon.graphml"))


def test_edge_list_with_vertex_table(tmp_path):
    pd.DataFrame({"id": [3, 8, 9], "x": [0.0, 1.0, 2.0], "y": [0.0, 0.5, 1.0]}).to_csv(tmp_path / "v.csv", index=False)
    (tmp_path / "e.edgelist").write_text("# src dst weight\n3 8 0.5\n8,9,1.5\n\n# a comment\n9\t3 2.5\n")
    g = edgelist.read(str(tmp_path / "e.edgelist"), vertices=str(tmp_path / "v.csv"))
    np.testing.assert_array_equal(g.edges, [[0, 1], [1, 2], [2, 0]])
    np.testing.assert_array_equal(g.edge_attributes["weight"], [0.5, 1.5, 2.5])
    edgelist.write(str(tmp_path / "out.edges"), g)
    again = edgelist.read(str(tmp_path / "out.edges"))  # its vertices beside it: out.vertices.csv
    np.testing.assert_array_equal(again.edges, g.edges)
    np.testing.assert_array_equal(again.positions, g.positions)
    (tmp_path / "bad.edgelist").write_text("3 99\n")
    with pytest.raises(InputError, match=r"edge 0 names vertex id\(s\) \[3, 99\]"):
        edgelist.read(str(tmp_path / "bad.edgelist"), vertices=str(tmp_path / "v.csv"))


def test_edge_list_vertex_table_repeating_an_id_is_refused_naming_the_first_repeat(tmp_path):
    """Regression (hunt): edges naming a repeated id were attached to one of its rows, the other left isolated."""
    (tmp_path / "v.csv").write_text("id,x,y\n5,0,0\n9,1,0\n9,5,5\n5,2,0\n")
    (tmp_path / "e.edgelist").write_text("5 9\n")
    with pytest.raises(InputError, match=r"v\.csv': vertex ids are not unique: id 9 appears more than once"):
        edgelist.read(str(tmp_path / "e.edgelist"), vertices=str(tmp_path / "v.csv"))


def test_edge_list_with_an_empty_vertex_table_names_the_edge(tmp_path):
    """Regression (hunt): an empty vertex table raised numpy's IndexError (index -1 of an empty array)."""
    (tmp_path / "v.csv").write_text("id,x,y\n")
    (tmp_path / "e.edgelist").write_text("1 2\n")
    with pytest.raises(InputError, match=r"e\.edgelist': edge 0 names vertex id\(s\) \[1, 2\] not in"):
        edgelist.read(str(tmp_path / "e.edgelist"), vertices=str(tmp_path / "v.csv"))


@pytest.mark.parametrize("name", ["fiber count", "a,b", ""])
def test_edge_list_write_refuses_an_attribute_name_its_header_would_split(tmp_path, name):
    """Regression (hunt): 'fiber count' was written as '# src dst fiber count', four names for three
    columns, so the reader fell back to src, dst, weight and the attribute came back as 'weight'."""
    g = Geometry("graph", np.arange(9.0).reshape(3, 3), edges=np.array([[0, 1], [1, 2]]), ids=np.array([1, 2, 3]),
                 edge_attributes={name: np.array([1.0, 2.0])})
    with pytest.raises(InputError, match=rf"g\.edgelist': edge attribute {re.escape(repr(name))} cannot be named in "
                                         "an edge list's header"):
        edgelist.write(str(tmp_path / "g.edgelist"), g)
    assert list(tmp_path.iterdir()) == []  # refused before the vertex table was written
    g.edge_attributes = {"fiber_count": np.array([1.0, 2.0])}
    edgelist.write(str(tmp_path / "g.edgelist"), g)
    np.testing.assert_array_equal(edgelist.read(str(tmp_path / "g.edgelist")).edge_attributes["fiber_count"], [1, 2])


def test_edge_list_header_is_utf8_whatever_the_locale(tmp_path):
    """Regression (hunt): the edge list was written in the locale's encoding, read as UTF-8: under an ASCII
    locale an attribute 'größe' failed with a bare UnicodeEncodeError (latin-1 would not read back)."""
    script = ("import sys, numpy as np\n"
              "from zarr_vectors.io import edgelist\n"
              "from zarr_vectors.io.types import Geometry\n"
              "g = Geometry('graph', np.zeros((2, 3)), edges=np.array([[0, 1]]), ids=np.array([1, 2]),\n"
              "             edge_attributes={'gr\\u00f6\\u00dfe': np.array([4.0])})\n"
              "edgelist.write(sys.argv[1], g)\n")
    env = {**os.environ, "LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
    run = subprocess.run([sys.executable, "-c", script, str(tmp_path / "g.edgelist")], env=env, capture_output=True,
                         text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "g.edgelist").read_bytes().startswith("# src dst größe\n".encode())
    np.testing.assert_array_equal(edgelist.read(str(tmp_path / "g.edgelist")).edge_attributes["größe"], [4.0])


@pytest.mark.parametrize("first", ["# src dst weight\n", ""])
def test_edge_list_and_vertex_table_with_byte_order_marks(tmp_path, first):
    """Regression: a byte-order mark before an edge list's header comment hid the comment, so the
    first line's four fields named columns src, dst, weight, weight_2 and the edges got a weight_2
    of NaNs; a mark before the first edge or the vertex table's header is not data either."""
    bom = b"\xef\xbb\xbf"
    (tmp_path / "v.csv").write_bytes(bom + b"id,x,y\n3,0.0,0.0\n8,1.0,0.5\n9,2.0,1.0\n")
    (tmp_path / "e.edgelist").write_bytes(bom + f"{first}3 8 0.5\n8 9 1.5\n".encode())
    g = edgelist.read(str(tmp_path / "e.edgelist"), vertices=str(tmp_path / "v.csv"))
    np.testing.assert_array_equal(g.edges, [[0, 1], [1, 2]])
    assert sorted(g.edge_attributes) == ["weight"]  # the header comment read, not a 4-field first line
    np.testing.assert_array_equal(g.edge_attributes["weight"], [0.5, 1.5])
    np.testing.assert_array_equal(g.positions, [[0.0, 0.0], [1.0, 0.5], [2.0, 1.0]])


def test_selecting_objects_keeps_their_vertices_and_the_records_among_them():
    g = Geometry("graph", np.arange(12.0).reshape(4, 3), object_ids=np.array([1, 1, 2, 2]),
                 attributes={"m": np.array([5, 6, 7, 8])}, edges=np.array([[0, 1], [1, 2], [2, 3]]),
                 edge_attributes={"w": np.array([0.1, 0.2, 0.3])})
    part = select.objects(g, [2])
    np.testing.assert_array_equal(part.attributes["m"], [7, 8])
    np.testing.assert_array_equal(part.edges, [[0, 1]])
    np.testing.assert_array_equal(part.edge_attributes["w"], [0.3])
    with pytest.raises(InputError, match=r"object id\(s\) \[5\] are not in"):
        select.objects(g, [5])
    lines = Geometry("polyline", np.arange(15.0).reshape(5, 3), object_ids=np.array([0, 0, 1, 1, 1]),
                     offsets=np.array([0, 2, 5]))
    np.testing.assert_array_equal(select.objects(lines, [1]).offsets, [0, 3])


def test_graphml_text_ids_are_named_and_replaced_by_rows(tmp_path):
    g = nx.Graph()
    g.add_node("a", x=0.0, y=0.0)
    g.add_node("b", x=1.0, y=1.0)
    g.add_edge("a", "b", weight=2.0)
    g.add_edge("b", "b")  # lacks the weight: NaN there
    nx.write_graphml(g, tmp_path / "t.graphml")
    got = graphml.read(str(tmp_path / "t.graphml"))
    np.testing.assert_array_equal(got.attributes["id"], [0, 1])
    assert got.dropped == ("node id",)
    np.testing.assert_array_equal(got.edge_attributes["weight"], [2.0, np.nan])


@pytest.mark.parametrize("name", ["x", "object_id"])
def test_graphml_write_refuses_an_attribute_named_like_a_key_it_writes(tmp_path, name):
    """Regression (hunt): an attribute ``x`` replaced the nodes' x positions (and ``object_id`` their objects)."""
    g = Geometry("graph", np.arange(9.0).reshape(3, 3), object_ids=np.array([1, 1, 2]), edges=np.array([[0, 1]]),
                 attributes={name: np.array([100.0, 200.0, 300.0])})
    with pytest.raises(InputError, match=rf"g\.graphml: vertex attribute\(s\) '{name}' would replace the field"):
        graphml.write(str(tmp_path / "g.graphml"), g)
    assert not (tmp_path / "g.graphml").exists()


@pytest.mark.parametrize("name", ["a\x01b", "a\x0bb", "a\udc80b", "a\ufffeb", "a\uffffb"])
@pytest.mark.parametrize("role, what", [("attributes", "node"), ("edge_attributes", "edge")])
def test_graphml_write_refuses_an_attribute_name_xml_cannot_hold(tmp_path, name, role, what):
    """Hunt: networkx wrote the name anyway (a control character as it is, a lone surrogate as a
    character reference), a file no XML parser reads back, this module's reader included."""
    g = Geometry("graph", np.arange(9.0).reshape(3, 3), edges=np.array([[0, 1], [1, 2]]))
    getattr(g, role)[name] = np.arange(3.0 if role == "attributes" else 2.0)
    with pytest.raises(InputError, match=rf"g\.graphml: {what} attribute {re.escape(repr(name))}: its name holds "
                                         r".*, which XML 1\.0 cannot hold"):
        graphml.write(str(tmp_path / "g.graphml"), g)
    assert not (tmp_path / "g.graphml").exists()


@pytest.mark.parametrize("bad", ["b\x01", "b\udc80"])
def test_graphml_write_refuses_a_text_value_xml_cannot_hold(tmp_path, bad):
    """Hunt: a text attribute (a Geometry given to the writer; a store holds numbers) was written as
    it is, a file that does not parse."""
    g = Geometry("graph", np.arange(9.0).reshape(3, 3), edges=np.array([[0, 1], [1, 2]]),
                 attributes={"label": np.array(["a", bad, "c"], dtype=object)})
    with pytest.raises(InputError, match=rf"g\.graphml: node attribute 'label': its value {re.escape(repr(bad))} "
                                         r"\(row 1\) holds a character XML 1\.0 cannot hold"):
        graphml.write(str(tmp_path / "g.graphml"), g)
    assert not (tmp_path / "g.graphml").exists()
    g.attributes["label"][1] = "b\t\U0001f600"  # a tab and a character past the BMP are XML
    graphml.write(str(tmp_path / "g.graphml"), g)
    assert graphml.read(str(tmp_path / "g.graphml")).dropped[0] == "label"  # text: named, not stored


@pytest.mark.parametrize("module, name", [(edgelist, "g.edgelist"), (graphml, "g.graphml")])
def test_a_graph_written_where_the_os_refuses_names_the_file(tmp_path, module, name):
    """Hunt: a missing folder, or a folder at OUT, was a raw OSError (pandas' 'Cannot save file into
    a non-existent directory', IsADirectoryError) from the library, not the InputError naming the file."""
    g = Geometry("graph", np.arange(9.0).reshape(3, 3), edges=np.array([[0, 1], [1, 2]]))
    assert_refused_where_the_os_refuses(tmp_path, module.write, name, g, folder=r"Is a directory\)")
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # nothing beside it (the vertex table was)


def test_our_graphml_reads_back_naming_nothing_dropped_and_a_declared_edge_id_key_is_named(tmp_path):
    """Hunt: networkx's multigraph writer numbers each <edge id="0">, and its reader hands that id
    over as edge data "id": reading our own file back named an "edge id" key as dropped.  An <edge
    id> is no data; a declared edge key "id" is, and networkx writes the element's id over it."""
    g = Geometry("graph", np.arange(9.0).reshape(3, 3), edges=np.array([[0, 1], [1, 2]]), axes=("x", "y", "z"),
                 edge_attributes={"w": np.array([0.5, 1.5])})
    graphml.write(str(tmp_path / "g.graphml"), g)
    back = graphml.read(str(tmp_path / "g.graphml"))
    assert back.dropped == () and sorted(back.edge_attributes) == ["w"]
    text = (tmp_path / "g.graphml").read_text()
    edge = '<edge source="0" target="1" id="0">'
    assert edge in text
    keyed = text.replace("<graph ", '<key id="k9" for="edge" attr.name="id" attr.type="double" />\n  <graph ', 1)
    keyed = keyed.replace(edge, edge + '\n      <data key="k9">7.0</data>', 1)
    (tmp_path / "k.graphml").write_text(keyed)
    assert graphml.read(str(tmp_path / "k.graphml")).dropped == ("edge id",)
    # review: a key for "all" (or with no "for", GraphML's default) is an edge key too, and edges
    # without an id keep its values as data
    for_all = keyed.replace('for="edge" attr.name="id"', 'for="all" attr.name="id"')
    (tmp_path / "a.graphml").write_text(for_all)
    assert graphml.read(str(tmp_path / "a.graphml")).dropped == ("edge id",)
    (tmp_path / "n.graphml").write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n<graphml xmlns="http://graphml.graphdrawing.org/xmlns">\n'
        '<key id="k9" attr.name="id" attr.type="double" />\n'
        + "".join(f'<key id="{a}" for="node" attr.name="{a}" attr.type="double" />\n' for a in "xyz")
        + '<graph edgedefault="undirected">\n'
        + "".join(f'<node id="{i}"><data key="x">{i}</data><data key="y">0</data><data key="z">0</data></node>\n'
                  for i in range(3))
        + '<edge source="0" target="1"><data key="k9">7.0</data></edge>\n'
          '<edge source="1" target="2"><data key="k9">8.0</data></edge>\n</graph>\n</graphml>\n')
    back = graphml.read(str(tmp_path / "n.graphml"))
    assert back.dropped == () and sorted(back.edge_attributes) == ["id"], back.edge_attributes
    np.testing.assert_array_equal(back.edge_attributes["id"], [7.0, 8.0])


def test_text_node_ids_xml_cannot_hold_are_refused_before_writing(tmp_path):
    """Hunt: a caller's text node ids were written as they came; one with a control character made a
    file no XML parser reads back (names and values were checked, the ids not)."""
    g = Geometry("graph", np.arange(9.0).reshape(3, 3), edges=np.array([[0, 1], [1, 2]]), axes=("x", "y", "z"),
                 ids=np.array(["a", "b\x01", "c"], dtype=object))
    with pytest.raises(InputError, match=r"g\.graphml: node 'id': its value 'b\\x01' \(row 1\) holds a character XML"):
        graphml.write(str(tmp_path / "g.graphml"), g)
    assert not (tmp_path / "g.graphml").exists()
    g.ids = np.array(["a", "b", "c"], dtype=object)
    graphml.write(str(tmp_path / "g.graphml"), g)
    assert graphml.read(str(tmp_path / "g.graphml")).dropped == ("node id",)  # text ids: the row numbers kept


def test_an_edge_list_whose_object_table_cannot_be_written_leaves_no_file_of_itself(tmp_path):
    """A folder at NAME.objects.csv: the list and its vertex table were written, then the error
    raised; the files a failed write made are now removed with it."""
    g = Geometry("graph", np.arange(9.0).reshape(3, 3), edges=np.array([[0, 1], [1, 2]]),
                 object_ids=np.array([0, 0, 1]), objects=np.array([0, 1]), object_attributes={"w": np.array([1.0, 2.0])})
    out = str(tmp_path / "g.edgelist")
    objects = edgelist.vertices_path(out, "objects")
    os.mkdir(objects)
    with pytest.raises(InputError, match=rf"^{re.escape(objects)}: cannot be written"):
        edgelist.write(out, g)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.objects.csv"] and not os.listdir(objects)
    os.rmdir(objects)
    edgelist.write(out, g)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.edgelist", "g.objects.csv", "g.vertices.csv"]
