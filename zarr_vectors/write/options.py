"""What every writer shares: the grid, the codec and where the store goes.

Each public writer takes its own data as parameters and these shared settings either as
keywords (``chunk_shape=250, bin_shape=62.5, ...``) or as one :class:`WriteOptions`
(``options=WriteOptions(...)``), so a job that writes several kinds states them once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np

from zarr_vectors.errors import InputError


class SharedOptions(TypedDict, total=False):
    """The keyword form of :class:`WriteOptions` (for ``**options`` in writer signatures)."""

    chunk_shape: Sequence[float] | float
    bin_shape: Sequence[float] | float | None
    bounds: Any
    compressor: str | dict[str, Any] | None
    storage_options: Mapping[str, Any] | None
    overwrite: bool
    headers: Mapping[str, Mapping[str, Any]] | None


@dataclass(frozen=True)
class WriteOptions:
    """Settings every writer shares.

    ``chunk_shape`` per axis (or one value for all); ``bin_shape`` the base bin, dividing
    the chunk (default: the chunk); ``bounds`` ``[[lo...], [hi...]]`` the data must fit
    (default: the data's extent); ``compressor`` ``"zstd"`` / ``"gzip"`` / ``"blosc"`` /
    ``"none"``, a Zarr v3 codec object (``{"name": "zstd", "configuration": {"level": 3}}``)
    or None; ``storage_options`` for the storage backend (e.g. an S3 ``endpoint_url``);
    ``overwrite`` (True or False) replaces an existing store, after every check passed;
    ``headers`` what source files said that the arrays cannot, kept as ``headers/<name>``
    (``{"trk": ...}``, as :class:`~zarr_vectors.io.types.Geometry` ``headers`` holds it from
    a TRK or TRX file, so that an export gives the file's reference space back).
    """

    chunk_shape: Sequence[float] | float
    bin_shape: Sequence[float] | float | None = None
    bounds: Any = None
    compressor: str | dict[str, Any] | None = "zstd"
    storage_options: Mapping[str, Any] | None = None
    overwrite: bool = False
    headers: Mapping[str, Mapping[str, Any]] | None = None

    def __post_init__(self) -> None:
        """The settings' types, checked where they are given: ``overwrite="False"`` deleted a store."""
        if not isinstance(self.overwrite, (bool, np.bool_)):
            raise InputError(f"overwrite must be True or False, found {self.overwrite!r}")
        object.__setattr__(self, "overwrite", bool(self.overwrite))
        if self.storage_options is not None and not isinstance(self.storage_options, Mapping):
            raise InputError(f"storage_options must be a mapping of option names to values, found "
                             f"{self.storage_options!r}")
        if self.compressor is not None and not isinstance(self.compressor, (str, Mapping)):
            raise InputError(f"compressor must be a name, a codec object or None, found {self.compressor!r}")

    @classmethod
    def resolve(cls, writer: str, options: WriteOptions | None, keywords: Mapping[str, Any]) -> WriteOptions:
        """The options of one writer call, from ``options=`` or from its keywords (not both)."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(keywords) - names)
        if unknown:
            raise TypeError(f"{writer}() got an unexpected keyword argument {unknown[0]!r}")
        if options is not None:
            if keywords:
                raise InputError(
                    f"{writer}: give the shared settings either as options=WriteOptions(...) or as keywords "
                    f"({', '.join(sorted(keywords))}), not both"
                )
            if not isinstance(options, WriteOptions):
                raise InputError(f"{writer}: options must be a WriteOptions, got {type(options).__name__}")
            return options
        if "chunk_shape" not in keywords:
            raise TypeError(f"{writer}() missing required keyword argument 'chunk_shape'")
        return cls(**keywords)


__all__ = ["SharedOptions", "WriteOptions"]
