"""Write the metadata schema files: ``python -m pipeline.metadata_schema [--out schema/]``.

``schema/zarr_vectors.linkml.yaml`` is :func:`zarr_vectors.format.linkml.linkml_schema` as YAML;
``schema/zarr_vectors.schema.json`` is what LinkML's own JSON Schema generator makes of it.
Both are committed; a test regenerates them and requires the committed bytes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from zarr_vectors.format.linkml import linkml_schema

LINKML_FILE = "zarr_vectors.linkml.yaml"
JSON_SCHEMA_FILE = "zarr_vectors.schema.json"
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "schema"


def render() -> dict[str, str]:
    """{file name: text} of both schema files."""
    from linkml.generators.jsonschemagen import JsonSchemaGenerator

    text = yaml.safe_dump(linkml_schema(), sort_keys=False, allow_unicode=True, width=110)
    # optional members are absent, never null: null stays the validator's to judge (parent_level)
    json_schema = JsonSchemaGenerator(text, include_null=False).serialize()
    return {LINKML_FILE: text, JSON_SCHEMA_FILE: json_schema.rstrip("\n") + "\n"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.metadata_schema", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="directory to write (default: schema/)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in render().items():
        (args.out / name).write_text(text, encoding="utf-8")
        print(args.out / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
