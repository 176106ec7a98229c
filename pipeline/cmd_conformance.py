"""``zv conformance``: run the conformance corpus offline (docs/conformance.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

#: The corpus of this checkout (``conformance/`` beside ``pipeline/``), when run from one.
CHECKOUT_CORPUS = Path(__file__).resolve().parents[1] / "conformance"


def _run(args: argparse.Namespace) -> int:
    from zarr_vectors.conformance.run import run_corpus, table

    corpus = args.corpus if args.corpus is not None else CHECKOUT_CORPUS
    report = run_corpus(corpus, cases=args.case or (), max_level=args.level)
    print(json.dumps(report.as_json(), indent=2) if args.json else table(report))
    return report.exit_code


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "conformance", help="check this implementation against a conformance corpus, offline",
        description="Check every case of a conformance corpus: integrity (sha256 and byte count of every fixture "
                    "file) first, then validate and read each fixture on local threads and compare with its case. "
                    "Opens no socket and starts no cluster. Exit 0: all pass; 1: some case differs; 2: the corpus "
                    "is broken (missing or garbled case file, hash mismatch, unknown corpus_version).")
    p.add_argument("corpus", nargs="?", type=Path, default=None,
                   help=f"corpus directory holding cases.json (default: this checkout's conformance/, "
                        f"{CHECKOUT_CORPUS})")
    p.add_argument("--case", action="append", metavar="ID", help="run only this case (repeatable)")
    p.add_argument("--level", type=int, choices=range(1, 6), default=5, metavar="N",
                   help="validate at most at level N (1-5): valid fixtures at N, invalid cases above N skipped "
                        "(default: 5)")
    p.add_argument("--json", action="store_true", help="print a machine-readable report instead of the table")
    p.set_defaults(func=_run)
