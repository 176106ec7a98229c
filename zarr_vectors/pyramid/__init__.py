"""Pyramids: coarser levels of a store built as Dask graphs, level by level (docs/format.md §8.1).

The coarsening math is pure and lives in :mod:`zarr_vectors.format.coarsen` and
:mod:`zarr_vectors.format.crosslevel`; this package plans the levels and runs the tasks.
"""
