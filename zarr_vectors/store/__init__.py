"""Storage: bytes on a store root and the Zarr v3 nodes made of them.

Whole-object access (:mod:`.backend`), codec pipelines (:mod:`.codecs`), strict
``zarr.json`` reading (:mod:`.strict_json`, :mod:`.nodes`), grid and table arrays
(:mod:`.grid`, :mod:`.tables`), the store and its levels (:mod:`.groups`), consolidated
metadata, the object index, and the links families (:mod:`.link_family`,
:mod:`.link_cells`, :mod:`.link_read`).  Single-process and synchronous: the layers
above decide what runs where.
"""
