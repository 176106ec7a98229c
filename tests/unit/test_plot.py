"""Pictures of a level (zarr_vectors.plot, ``zv plot``): every kind draws a non-trivial image,
streamlines take the direction colours, a coarse level is coloured by its aggregated
attribute, filters reach the reader, and bad arguments exit 2 with one line and no file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import zarr_vectors as zv
from zarr_vectors.errors import InputError
from zarr_vectors.plot import plot_level, save_plot

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")
KW = {"chunk_shape": 50, "bin_shape": 25}


def pixels(path: Path) -> np.ndarray:
    with Image.open(path) as im:
        assert im.format == "PNG"
        return np.asarray(im.convert("RGB"))


def assert_nontrivial(path: Path, min_colours: int = 20) -> np.ndarray:
    """A real picture: a reasonable size, many colours, and far from all background."""
    a = pixels(path)
    h, w, _ = a.shape
    assert 300 <= h <= 3000 and 300 <= w <= 6000
    assert len(np.unique(a.reshape(-1, 3), axis=0)) > min_colours
    drawn = (a < 235).any(axis=-1).mean()  # not white-ish
    assert 0.01 < drawn < 0.95
    return a


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, Path]:
    rng = np.random.default_rng(3)
    out = tmp_path_factory.mktemp("plots")
    n = 600
    pos = rng.uniform(0, 100, (n, 3)).astype(np.float32)
    p = {k: out / f"{k}.zv" for k in ("points", "graph", "mesh", "streamline")}
    zv.write_points(str(p["points"]), pos, object_ids=rng.integers(0, 4, n),
                    attributes={"height": pos[:, 2].copy()}, **KW)
    zv.build_pyramid(str(p["points"]), factors=[2])
    edges = rng.integers(0, n, (800, 2))
    zv.write_graph(str(p["graph"]), pos, edges[edges[:, 0] != edges[:, 1]], **KW)
    zv.write_mesh(str(p["mesh"]), pos, np.array([rng.choice(n, 3, replace=False) for _ in range(200)]), **KW)
    t = np.linspace(0, 90, 100)
    lines = np.concatenate([np.column_stack([t + 5, np.full(100, y), np.full(100, 50.0)]) for y in (20, 40, 60, 80)])
    zv.write_polylines(str(p["streamline"]), lines.astype(np.float32), np.arange(0, 401, 100), kind="streamline", **KW)
    return p


@pytest.mark.parametrize("kind", ["points", "graph", "mesh", "streamline"])
def test_every_kind_draws_a_picture(stores, tmp_path, kind):
    out = save_plot(stores[kind], tmp_path / f"{kind}.png")
    assert_nontrivial(out, min_colours=5 if kind == "streamline" else 20)


def test_streamlines_are_coloured_by_direction(stores, tmp_path):
    """Streamlines along x are red (|tangent| = (1, 0, 0)): no green or blue lines anywhere."""
    a = pixels(save_plot(stores["streamline"], tmp_path / "s.png", projections=["xy"]))
    red = (a[..., 0] > 180) & (a[..., 1] < 90) & (a[..., 2] < 90)
    other = ((a[..., 1] > 150) | (a[..., 2] > 150)) & (a[..., 0] < 90)
    assert red.sum() > 500 and other.sum() == 0


def test_coarse_level_coloured_by_its_aggregated_attribute(stores, tmp_path):
    from pipeline.cli import main

    out = tmp_path / "coarse.png"
    assert main(["plot", str(stores["points"]), "--level", "1", "--color-by", "height", "--out", str(out)]) == 0
    a = assert_nontrivial(out)
    # viridis spans purple to yellow: both ends of the aggregated heights are in the picture
    assert ((a[..., 0] > 200) & (a[..., 1] > 180) & (a[..., 2] < 90)).any()  # yellow
    assert ((a[..., 0] < 90) & (a[..., 1] < 40) & (a[..., 2] > 70)).any()  # dark purple


def test_filters_reach_the_reader_and_ax_is_used(stores):
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.subplots()
    assert plot_level(stores["points"], bbox=[[0, 0, 0], [50, 50, 50]], objects=[1], ax=ax) is fig
    shown = zv.read(str(stores["points"]), bbox=[[0, 0, 0], [50, 50, 50]])
    assert f"{int((shown.object_ids == 1).sum()):,} vertices" in ax.get_title()
    assert len(plot_level(stores["graph"], projections=["xz"]).axes) == 1
    with pytest.raises(InputError, match="no such vertex attribute"):
        plot_level(stores["graph"], color_by="height")
    with pytest.raises(InputError, match=r"object id\(s\) \[7, 9\] are not in the level's object index"):
        plot_level(stores["points"], objects=[1, 7, 9])  # an empty picture before (hunt); export refuses them too
    with pytest.raises(InputError, match="choose from"):
        plot_level(stores["graph"], projections=["xw"])


@pytest.mark.parametrize("argv, message", [
    (["--out", "x.jpg"], "must be a .png"),
    (["--bbox", "1,2,3", "--out", "x.png"], "--bbox"),
    (["--level", "-1", "--out", "x.png"], "--level"),
    (["--color-by", "nope", "--out", "x.png"], "no such vertex attribute"),
    (["--level", "7", "--out", "x.png"], "level"),
])
def test_bad_arguments_exit_2_with_one_line(stores, tmp_path, capsys, monkeypatch, argv, message):
    from pipeline.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["plot", str(stores["points"]), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and err.startswith("zv plot: error:")
    assert not list(tmp_path.iterdir())


def test_many_points_become_a_density(stores, tmp_path):
    import dask

    with dask.config.set({"zarr_vectors.plot.density-points": 100}):
        fig = plot_level(stores["points"], projections=["xy"])
        coloured = plot_level(stores["points"], projections=["xy"], color_by="height")
    assert type(fig.axes[0].collections[0]).__name__ == "PolyCollection"  # hexagons, not a scatter
    assert fig.axes[1].get_ylabel() == "points per bin (log)"
    assert coloured.axes[1].get_ylabel() == "height"
    out = tmp_path / "density.png"
    fig.savefig(out)
    assert_nontrivial(out)


def test_object_ids_are_given_as_to_export_either_way(stores, monkeypatch):
    """``--object-id 1 3`` and ``--object-id 1 --object-id 3`` ask the same (as ``zv export`` takes them)."""
    from pipeline.cli import main

    asked = []  # the command imports save_plot when it runs: the stand-in records what it was asked
    monkeypatch.setattr("zarr_vectors.plot.save_plot", lambda store, out, **kw: asked.append(kw["objects"]) or out)
    assert main(["plot", str(stores["points"]), "--object-id", "1", "3", "--out", "a.png"]) == 0
    assert main(["plot", str(stores["points"]), "--object-id", "1", "--object-id", "3", "--out", "b.png"]) == 0
    assert asked == [[1, 3], [1, 3]]


def test_a_coarse_mesh_level_is_drawn_as_its_points_and_says_so(tmp_path):
    """Regression (new-user trial): a mesh's coarse level holds metavertices and no faces, and its
    picture was three empty panels (a flat mesh's side views collapsed to overlapping labels)."""
    grid = np.mgrid[0:20, 0:20].reshape(2, -1).T
    pos = np.column_stack([grid * 5.0, np.zeros(len(grid))]).astype(np.float32)  # flat: z = 0
    faces = np.array([[i * 20 + j, i * 20 + j + 1, (i + 1) * 20 + j] for i in range(19) for j in range(19)])
    store = tmp_path / "m.zv"
    zv.write_mesh(str(store), pos, faces, chunk_shape=25.0, bounds=[[0, 0, -1], [100, 100, 1]])
    zv.build_pyramid(str(store), factors=[2])
    assert len(zv.read(str(store), level=1).faces) == 0
    fig = plot_level(store, level=1)
    assert fig._suptitle.get_text().endswith("(no faces at this level: drawn as points)")
    for ax in fig.axes:
        assert ax.collections and len(ax.collections[0].get_offsets()) > 0  # the metavertices
        lo, hi = ax.get_ylim()
        assert hi - lo > 1  # the flat z axis keeps a margin: a strip, not a line
    assert "no faces" not in plot_level(store, level=0)._suptitle.get_text()
