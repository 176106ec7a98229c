"""The files users bring and take away: one module per file format.

Each format module defines one :class:`~zarr_vectors.io.types.FileFormat` with its
reader (file -> :class:`~zarr_vectors.io.types.Geometry`, the arrays the writers take)
and writer (store data -> file), each through the format's own library;
:mod:`zarr_vectors.io.registry` lists them and finds a file's format by its name
(docs/formats.md).
"""
