"""Running graphs: the one choke point between the library and a Dask scheduler.

Every graph runs through :mod:`.runner` (``compute`` / ``persist`` / ``start``), which
honours ``dask.config`` and a distributed ``Client`` alike, sizes tasks from
:mod:`zarr_vectors.config`, and reports progress to registered callbacks.
"""
