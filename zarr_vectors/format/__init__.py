"""The format's rules, pure: no I/O, no Dask (docs/format.md).

Path and chunk-key grammar (:mod:`.paths`), root and level metadata (:mod:`.metadata`),
the links layout (:mod:`.links`), point placement in chunks and bins (:mod:`.points`),
the records each linked kind stores (:mod:`.topology`), and the pyramid's coarsening
math (:mod:`.coarsen`, :mod:`.crosslevel`).  Every layer above decides nothing about
the format on its own: it asks here.
"""
