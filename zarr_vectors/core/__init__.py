"""The module names the spec's pages import from (``zarr_vectors.core.store``, ``.arrays``).

Code written against the spec's examples runs unchanged: each module re-exports this
package's own functions under the names and call shapes the pages use.
"""
