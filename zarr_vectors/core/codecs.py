"""The codec pipelines Zarr Vectors arrays declare, as small typed objects.

A grid array's pipeline is ``vlen-bytes`` optionally followed by one bytes->bytes
compressor; a typed (object-level) array's is ``bytes`` (little endian) optionally
followed by one.  Compressors are numcodecs' implementations, which are the ones
zarr-python itself runs, so the bytes on disk are what zarr would write.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numcodecs

from zarr_vectors.errors import InputError, MetadataError

#: What ``compressor="zstd"`` writes: the reference's high-level default.
ZSTD_DEFAULT: dict[str, Any] = {"name": "zstd", "configuration": {"level": 0, "checksum": False}}
BLOSC_DEFAULT: dict[str, Any] = {
    "name": "blosc",
    "configuration": {
        "typesize": 4,
        "cname": "zstd",
        "clevel": 5,
        "shuffle": "bitshuffle",
        "blocksize": 0,
    },
}
_BLOSC_SHUFFLE = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}


def compressor_config(compressor: str | dict[str, Any] | None) -> dict[str, Any] | None:
    """Normalise the user's ``compressor`` argument to a codec JSON object (or None)."""
    if compressor is None or compressor == "none":
        return None
    if compressor == "zstd":
        return ZSTD_DEFAULT
    if compressor == "blosc":
        return BLOSC_DEFAULT
    if isinstance(compressor, dict) and compressor.get("name") in ("zstd", "blosc", "gzip"):
        Compressor.from_config(compressor, file="<argument>")  # validates
        return compressor
    raise InputError(
        f"unsupported compressor {compressor!r}: use 'zstd' (default), 'blosc', 'none', "
        "or a zstd/blosc/gzip codec object"
    )


@dataclass(frozen=True)
class Compressor:
    """One bytes->bytes codec."""

    config: dict[str, Any]
    impl: Any

    @classmethod
    def from_config(cls, config: dict[str, Any], *, file: str, pointer: str = "") -> Compressor:
        name = config.get("name")
        conf = config.get("configuration") or {}
        try:
            if name == "zstd":
                impl = numcodecs.Zstd(level=int(conf.get("level", 0)), checksum=bool(conf.get("checksum", False)))
            elif name == "blosc":
                shuffle = conf.get("shuffle", "noshuffle")
                impl = numcodecs.Blosc(
                    cname=str(conf.get("cname", "zstd")),
                    clevel=int(conf.get("clevel", 5)),
                    shuffle=_BLOSC_SHUFFLE[shuffle] if isinstance(shuffle, str) else int(shuffle),
                    blocksize=int(conf.get("blocksize", 0)),
                )
            elif name == "gzip":
                impl = numcodecs.GZip(level=int(conf.get("level", 5)))
            else:
                raise MetadataError(f"unsupported codec {name!r}", file=file, pointer=pointer)
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, MetadataError):
                raise
            raise MetadataError(f"bad {name} codec configuration: {exc}", file=file, pointer=pointer) from exc
        return cls(config, impl)

    def encode(self, data: bytes) -> bytes:
        return bytes(self.impl.encode(data))

    def decode(self, data: bytes) -> bytes:
        return bytes(self.impl.decode(data))


@dataclass(frozen=True)
class Pipeline:
    """An array's declared codec list, reduced to what this format allows."""

    serializer: str  # "vlen-bytes" or "bytes"
    compressor: Compressor | None

    @classmethod
    def from_codecs(cls, codecs: list[dict[str, Any]], *, file: str) -> Pipeline:
        if not codecs:
            raise MetadataError("empty codec list", file=file, pointer="/codecs")
        first = codecs[0]
        name = first.get("name")
        if name not in ("vlen-bytes", "bytes"):
            raise MetadataError(
                f"unsupported array->bytes codec {name!r} (expected vlen-bytes or bytes)",
                file=file,
                pointer="/codecs/0/name",
            )
        if name == "bytes":
            endian = (first.get("configuration") or {}).get("endian", "little")
            if endian != "little":
                raise MetadataError(
                    f"unsupported endianness {endian!r}", file=file, pointer="/codecs/0/configuration/endian"
                )
        if len(codecs) > 2:
            raise MetadataError(
                f"{len(codecs)} codecs declared; this format allows one compressor after {name}",
                file=file,
                pointer="/codecs",
            )
        comp = Compressor.from_config(codecs[1], file=file, pointer="/codecs/1") if len(codecs) == 2 else None
        return cls(name, comp)

    @staticmethod
    def codecs_json(serializer: str, compressor: dict[str, Any] | None) -> list[dict[str, Any]]:
        first: dict[str, Any] = (
            {"name": "vlen-bytes", "configuration": {}}
            if serializer == "vlen-bytes"
            else {"name": "bytes", "configuration": {"endian": "little"}}
        )
        return [first] + ([compressor] if compressor else [])

    def compress(self, framed: bytes) -> bytes:
        return self.compressor.encode(framed) if self.compressor else framed

    def decompress(self, stored: bytes) -> bytes:
        return self.compressor.decode(stored) if self.compressor else stored
