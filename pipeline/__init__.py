"""Jobs around the format library: cluster selection, the ``zv`` command line, demos.

``pipeline`` imports ``zarr_vectors``; never the reverse.
"""
