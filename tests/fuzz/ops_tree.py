"""File-tree operators: links in and out of the store, special files, missing and extra
objects, and presence lists that disagree with storage.

Links out point at a valid copy made in the case's ``outside`` directory (a store that
reads the right data through the link still reads outside itself), at ``/etc/passwd``,
``/proc/self/environ``, ``/dev/zero`` or ``/``.
"""

from __future__ import annotations

import os
import shutil

from .operators import Ctx, operator
from .storeio import Inventory


def chunks(inv: Inventory) -> list[str]:
    return [key for _, key in inv.cells]


def docs(inv: Inventory) -> list[str]:
    return list(inv.docs)


def files(inv: Inventory) -> list[str]:
    """Chunk objects and documents: what a reader opens."""
    return chunks(inv) + docs(inv)


def node_dirs(inv: Inventory) -> list[str]:
    """Directories below the root: levels, groups, arrays and chunk-key directories."""
    return [d for d in inv.dirs if d]


def presence_arrays(inv: Inventory) -> list[str]:
    return [a.node for a in inv.arrays if isinstance(a.attrs.get("nonempty_chunks"), list) and a.attrs["nonempty_chunks"]]


def _pick(ctx: Ctx, values: list[str]) -> str:
    return values[ctx.rng.randrange(len(values))]


def _replace_by_link(ctx: Ctx, key: str, target: str) -> None:
    path = ctx.path(key)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
    os.symlink(target, path)


def _outside_copy(ctx: Ctx, key: str) -> str:
    src = ctx.path(key)
    dst = ctx.outside / key
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst, symlinks=True)
    else:
        shutil.copyfile(src, dst)
    return str(dst)


@operator("symlink_chunk_outside", "tree", chunks)
def _chunk_out(ctx: Ctx, key: str) -> str:
    """a chunk replaced by a symlink to a byte-identical copy outside the store"""
    _replace_by_link(ctx, key, _outside_copy(ctx, key))
    return f"{key} -> outside copy"


@operator("symlink_json_outside", "tree", docs)
def _json_out(ctx: Ctx, key: str) -> str:
    """a zarr.json replaced by a symlink to an identical copy outside the store"""
    _replace_by_link(ctx, key, _outside_copy(ctx, key))
    return f"{key} -> outside copy"


@operator("symlink_dir_outside", "tree", node_dirs)
def _dir_out(ctx: Ctx, key: str) -> str:
    """a directory (level, group, array or chunk-key directory) replaced by a symlink to a copy outside"""
    _replace_by_link(ctx, key, _outside_copy(ctx, key))
    return f"{key}/ -> outside copy"


@operator("symlink_chunk_inside", "tree", chunks)
def _chunk_in(ctx: Ctx, key: str) -> str:
    """a chunk replaced by a symlink to another chunk object of the store"""
    others = [k for k in chunks(ctx.inv) if k != key]
    target = _pick(ctx, others) if others else key
    _replace_by_link(ctx, key, os.path.relpath(ctx.path(target), ctx.path(key).parent))
    return f"{key} -> {target} (inside)"


def _special_link(name: str, target: str, what: str, targets=files) -> None:  # noqa: ANN001
    def apply(ctx: Ctx, key: str) -> str:
        _replace_by_link(ctx, key, target)
        return f"{key} -> {target}"

    apply.__doc__ = what
    operator(name, "tree", targets)(apply)


_special_link("symlink_passwd", "/etc/passwd", "a chunk or zarr.json replaced by a symlink to /etc/passwd")
_special_link("symlink_environ", "/proc/self/environ", "a chunk or zarr.json replaced by a symlink to /proc/self/environ")
_special_link("symlink_dev_zero", "/dev/zero", "a chunk or zarr.json replaced by a symlink to /dev/zero")
_special_link("symlink_dir_root", "/", "a directory of the store replaced by a symlink to /", node_dirs)


@operator("symlink_loop", "tree", lambda inv: files(inv) + node_dirs(inv))
def _loop(ctx: Ctx, key: str) -> str:
    """a file or directory replaced by a symlink loop (to itself, or a -> b -> a)"""
    path = ctx.path(key)
    if ctx.rng.randrange(2):
        _replace_by_link(ctx, key, path.name)
        return f"{key} -> itself"
    partner = path.with_name(path.name + ".loop")
    _replace_by_link(ctx, key, partner.name)
    os.symlink(path.name, partner)
    return f"{key} -> {partner.name} -> {key}"


@operator("symlink_dangling", "tree", lambda inv: files(inv) + node_dirs(inv))
def _dangling(ctx: Ctx, key: str) -> str:
    """a file or directory replaced by a symlink to nothing"""
    target = str(ctx.outside / "does-not-exist")
    _replace_by_link(ctx, key, target)
    return f"{key} -> (nothing)"


@operator("fifo_chunk", "tree", chunks)
def _fifo_chunk(ctx: Ctx, key: str) -> str:
    """a chunk replaced by a FIFO (opening it for reading blocks until a writer comes)"""
    ctx.path(key).unlink()
    os.mkfifo(ctx.path(key))
    return f"{key} is a FIFO"


@operator("fifo_json", "tree", docs)
def _fifo_json(ctx: Ctx, key: str) -> str:
    """a zarr.json replaced by a FIFO"""
    ctx.path(key).unlink()
    os.mkfifo(ctx.path(key))
    return f"{key} is a FIFO"


@operator("dir_for_chunk", "tree", chunks)
def _dir_chunk(ctx: Ctx, key: str) -> str:
    """a chunk replaced by a directory (holding one file)"""
    ctx.path(key).unlink()
    ctx.path(key).mkdir()
    (ctx.path(key) / "0").write_bytes(b"\0" * 8)
    return f"{key} is a directory"


@operator("dir_for_json", "tree", docs)
def _dir_json(ctx: Ctx, key: str) -> str:
    """a zarr.json replaced by an empty directory"""
    ctx.path(key).unlink()
    ctx.path(key).mkdir()
    return f"{key} is a directory"


@operator("many_empty_files", "tree", lambda inv: list(inv.dirs))
def _many(ctx: Ctx, key: str) -> str:
    """5,000 empty files in one directory, named like chunk keys or like junk"""
    base = ctx.path(key)
    numbered = ctx.rng.randrange(2)
    for i in range(5000):
        name = str(1000 + i) if numbered else f"junk-{i}.bin"
        (base / name).touch()
    return f"{key or '/'}: 5000 empty files ({'numbered' if numbered else 'junk'})"


@operator("delete_chunk", "tree", chunks)
def _delete_chunk(ctx: Ctx, key: str) -> str:
    """a chunk object removed (its key stays in nonempty_chunks)"""
    ctx.path(key).unlink()
    return f"{key} deleted"


@operator("delete_json", "tree", docs)
def _delete_json(ctx: Ctx, key: str) -> str:
    """a zarr.json removed"""
    ctx.path(key).unlink()
    return f"{key} deleted"


@operator("delete_dir", "tree", node_dirs)
def _delete_dir(ctx: Ctx, key: str) -> str:
    """a whole directory (level, group, array or chunk-key directory) removed"""
    shutil.rmtree(ctx.path(key))
    return f"{key}/ deleted"


def _edit_presence(ctx: Ctx, node: str, fn) -> str:  # noqa: ANN001
    key = f"{node}/zarr.json"
    doc = ctx.doc(key)
    listed = doc["attributes"]["nonempty_chunks"]
    what = fn(listed)
    ctx.write_doc(key, doc)
    return f"{key} nonempty_chunks: {what}"


@operator("nonempty_duplicate", "tree", presence_arrays)
def _dup(ctx: Ctx, node: str) -> str:
    """a nonempty_chunks key listed twice"""

    def fn(listed: list) -> str:
        i = ctx.rng.randrange(len(listed))
        listed.insert(ctx.rng.randrange(len(listed) + 1), listed[i])
        return f"{listed[i]!r} twice"

    return _edit_presence(ctx, node, fn)


@operator("nonempty_dotdot", "tree", presence_arrays)
def _dotdot(ctx: Ctx, node: str) -> str:
    """a nonempty_chunks entry with '..' in it (replacing or added)"""

    def fn(listed: list) -> str:
        bad = ["..", "../../../../etc/passwd", "0.0..", "..0.0", "0/../../zarr", ".", "0..0.0", "0.0.0/../.."]
        value = bad[ctx.rng.randrange(len(bad))]
        if ctx.rng.randrange(2):
            listed[ctx.rng.randrange(len(listed))] = value
            return f"an entry -> {value!r}"
        listed.append(value)
        return f"+ {value!r}"

    return _edit_presence(ctx, node, fn)


@operator("nonempty_extra", "tree", presence_arrays)
def _extra(ctx: Ctx, node: str) -> str:
    """a nonempty_chunks entry for a cell that is not on storage (inside or outside the array's shape)"""
    shape = ctx.array(node).doc.get("shape") or [1]

    def fn(listed: list) -> str:
        present = set(listed)
        inside = [".".join(map(str, c)) for c in _coords(shape) if ".".join(map(str, c)) not in present]
        outside = ".".join(str(s + ctx.rng.randrange(3)) for s in shape)
        value = inside[ctx.rng.randrange(len(inside))] if inside and ctx.rng.randrange(2) else outside
        listed.append(value)
        return f"+ {value!r}"

    return _edit_presence(ctx, node, fn)


def _coords(shape: list[int]) -> list[tuple[int, ...]]:
    import itertools

    if any(not isinstance(s, int) or s > 64 for s in shape):
        return []
    return list(itertools.product(*[range(s) for s in shape]))


@operator("nonempty_drop", "tree", presence_arrays)
def _drop(ctx: Ctx, node: str) -> str:
    """a nonempty_chunks entry removed while its cell stays on storage"""

    def fn(listed: list) -> str:
        return f"- {listed.pop(ctx.rng.randrange(len(listed)))!r}"

    return _edit_presence(ctx, node, fn)
