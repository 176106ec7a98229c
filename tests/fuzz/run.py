"""Run the store fuzzer: ``python -m tests.fuzz.run --cases 3000 [--seed N] [--jobs 2] [--json out.json]``.

A corpus gives every operator the same number of cases, going round the seed stores it
applies to with rng seeds N, N+1, ...; ``--ci`` runs the CI corpus instead (one case per
applicable (operator, seed store) pair, ``tests/fuzz/test_fuzz.py``).  One case replays
with ``--only SEED_STORE:OPERATOR:RNG`` (``--keep`` leaves its mutated store on disk).
``--confirm-hangs`` reruns every HANG case once, alone: one that then finishes was slow
under load, not hung, and its rerun's verdict replaces it (noted in the result).

Before the corpus, the unmutated seeds run as calibration cases: they must all be OK,
and the address-space cap and the peak-RSS bound are set a fixed margin above what they
needed (``--mem-cap`` / ``--rss-bound`` fix them instead).  Prints counts per class, per
operator and per seed store, the operator x seed coverage, every distinct failure
signature with a reproducing case, and the timings.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .forkserver import GiB, Server, scratch_root
from .operators import OPERATORS, load_all
from .oracle import FAILURES
from .report import REPRO, case_id, describe, summary
from .seeds import SEEDS
from .storeio import inventory

CAP_MARGIN = 1 * GiB
RSS_MARGIN = 512 << 20
MODULE = f"{__package__ or 'tests.fuzz'}.run"


def pairs(inventories: dict[str, Any]) -> list[tuple[str, str]]:
    """Every (seed store, operator) where the operator has a target, in a fixed order."""
    ops = load_all()
    return [(seed, name) for name in sorted(ops) for seed in SEEDS
            if seed in inventories and ops[name].targets(inventories[seed])]


def ci_corpus(inventories: dict[str, Any]) -> list[dict[str, Any]]:
    """One case (rng seed 0) per applicable (seed store, operator) pair."""
    return [{"seed": s, "op": o, "rng": 0} for s, o in pairs(inventories)]


def corpus(inventories: dict[str, Any], n: int, first_rng: int = 0) -> list[dict[str, Any]]:
    """``n`` cases, the same number per operator (an operator that applies to one seed store
    gets as many cases as one that applies to ten), each operator's cases going round its
    seed stores with rng seeds first_rng, first_rng + 1, ...; interleaved, so that any
    prefix is balanced too."""
    by_op: dict[str, list[str]] = {}
    for seed, op in pairs(inventories):
        by_op.setdefault(op, []).append(seed)
    if not by_op:
        return []
    per_op = math.ceil(n / len(by_op))
    lists = {op: [{"seed": seeds[i % len(seeds)], "op": op, "rng": first_rng + i // len(seeds)}
                  for i in range(per_op)] for op, seeds in by_op.items()}
    cases = [lists[op][i] for i in range(per_op) for op in sorted(lists)]
    return cases[:n]


@dataclass
class Run:
    """A finished fuzzer run."""

    results: list[dict[str, Any]]
    calibration: list[dict[str, Any]]
    mem_cap: int
    rss_bound: int
    seconds: float
    jobs: int
    coverage: dict[tuple[str, str], int] = field(default_factory=dict)

    @property
    def failures(self) -> list[dict[str, Any]]:
        return [r for r in self.results if r["class"] in FAILURES]

    def counts(self) -> Counter:
        return Counter(r["class"] for r in self.results)


def _calibrate(server: Server, levels: dict[str, list[int]], jobs: int, timeout: float, workdir: str,
               mem_cap: int | None, rss_bound: int | None) -> tuple[list[dict[str, Any]], int, int]:
    cases = [{"seed": s, "op": "identity", "rng": 0} for s in levels]
    results = server.run(cases, jobs=jobs, timeout=timeout, mem_cap=mem_cap or 16 * GiB,
                         rss_bound=rss_bound or 16 * GiB, workdir=workdir)
    bad = [r for r in results if r["class"] != "OK"]
    if bad:
        raise RuntimeError("an unmutated seed store is not OK: the harness (or the allow-list) is wrong:\n"
                           + "\n".join(describe(r) for r in bad))
    vm = max(t.get("vmpeak_mb", 0) for r in results for t in r["targets"].values())
    rss = max(t.get("maxrss_mb", 0) for r in results for t in r["targets"].values())
    cap = mem_cap or int(math.ceil((vm * 2**20 + CAP_MARGIN) / (256 << 20)) * (256 << 20))
    bound = rss_bound or int(rss * 2**20 + RSS_MARGIN)
    return results, cap, bound


def run(cases: int | None = None, *, first_rng: int = 0, jobs: int = 2, timeout: float = 10.0,
        mem_cap: int | None = None, rss_bound: int | None = None, only: list[dict[str, Any]] | None = None,
        keep: bool = False, skip_after_hang: bool = False, confirm_hangs: bool = False,
        progress: bool = False) -> Run:
    """Build the seeds, calibrate, and run ``cases`` cases of the corpus (or the ``only`` ones)."""
    start = time.monotonic()
    workdir = tempfile.mkdtemp(prefix="zv-fuzz-", dir=scratch_root())
    try:
        with Server() as server:
            levels = server.seeds(os.path.join(workdir, "seeds"))
            inventories = {name: inventory(os.path.join(workdir, "seeds", f"{name}.zv")) for name in levels}
            cal, cap, bound = _calibrate(server, levels, jobs, timeout, os.path.join(workdir, "cases"),
                                         mem_cap, rss_bound)
            todo = only if only is not None else ci_corpus(inventories) if cases is None else \
                corpus(inventories, cases, first_rng)
            done = [0]

            def tick(result: dict[str, Any]) -> None:
                done[0] += 1
                if progress and (done[0] % 50 == 0 or result["class"] != "OK"):
                    mark = "" if result["class"] == "OK" else f"  {result['class']}: {case_id(result)}"
                    print(f"[{done[0]}/{len(todo)}]{mark}", file=sys.stderr, flush=True)

            results = server.run(todo, jobs=jobs, timeout=timeout, mem_cap=cap, rss_bound=bound,
                                 workdir=os.path.join(workdir, "cases"), skip_after_hang=skip_after_hang,
                                 keep=keep, on_result=tick)
            if confirm_hangs:
                _confirm_hangs(server, results, timeout, cap, bound, os.path.join(workdir, "cases"))
            for r in results:
                r["case"]["repro"] = REPRO.format(**r["case"])
            cov = Counter((r["case"]["op"], r["case"]["seed"]) for r in results)
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return Run(results, cal, cap, bound, time.monotonic() - start, jobs, dict(cov))


def _confirm_hangs(server: Server, results: list[dict[str, Any]], timeout: float, cap: int, bound: int,
                   workdir: str) -> None:
    """Rerun each HANG case alone; a rerun that is no HANG replaces it (slow under load, not hung)."""
    hung = [i for i, r in enumerate(results) if r["class"] == "HANG"]
    if not hung:
        return
    again = server.run([results[i]["case"] for i in hung], jobs=1, timeout=timeout, mem_cap=cap, rss_bound=bound,
                       workdir=workdir, skip_after_hang=True)
    for i, rerun in zip(hung, again):
        if rerun["class"] != "HANG":
            first = results[i]
            rerun["id"] = first["id"]
            rerun["note"] = f"HANG under load in the corpus run ({first['seconds']} s); alone it is {rerun['class']}"
            results[i] = rerun


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=MODULE, description="Run the store fuzzer.")
    parser.add_argument("--cases", type=int, default=3000, help="corpus size (default: %(default)s)")
    parser.add_argument("--ci", action="store_true", help="the CI corpus: one case per (operator, seed store)")
    parser.add_argument("--confirm-hangs", action="store_true", help="rerun HANG cases once, alone")
    parser.add_argument("--seed", type=int, default=0, help="first rng seed of the corpus (default: %(default)s)")
    parser.add_argument("--jobs", type=int, default=2, help="cases at a time (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per target (default: %(default)s)")
    parser.add_argument("--mem-cap", type=float, help="address-space cap in GiB (default: calibrated)")
    parser.add_argument("--rss-bound", type=float, help="peak-RSS bound in MiB (default: calibrated)")
    parser.add_argument("--only", action="append", metavar="SEED:OP:RNG", help="run just this case; repeatable")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory (mutated stores)")
    parser.add_argument("--skip-after-hang", action="store_true",
                        help="skip a case's remaining targets once one hangs (faster when hangs are expected)")
    parser.add_argument("--json", metavar="FILE", help="write every result and the summary here")
    parser.add_argument("--failures", action="store_true", help="print every failing case in full")
    args = parser.parse_args(argv)
    load_all()
    only = None
    if args.only:
        only = []
        for text in args.only:
            seed, op, rng = text.split(":")
            if seed not in SEEDS or (op not in OPERATORS and op != "identity"):
                parser.error(f"unknown seed store or operator in {text!r}")
            only.append({"seed": seed, "op": op, "rng": int(rng)})
    result = run(None if args.ci else args.cases, first_rng=args.seed, confirm_hangs=args.confirm_hangs, jobs=args.jobs, timeout=args.timeout,
                 mem_cap=int(args.mem_cap * GiB) if args.mem_cap else None,
                 rss_bound=int(args.rss_bound * 2**20) if args.rss_bound else None, only=only, keep=args.keep,
                 skip_after_hang=args.skip_after_hang, progress=True)
    text = summary(result)
    print(text)
    if args.failures or only is not None:
        for r in result.failures if not only else result.results:
            print("\n" + describe(r, tail_lines=40))
            if r.get("kept"):
                print(f"  kept: {r['kept']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": text, "mem_cap": result.mem_cap, "rss_bound": result.rss_bound,
                       "seconds": result.seconds, "jobs": result.jobs, "calibration": result.calibration,
                       "results": result.results}, f, indent=1, default=str)
    return 1 if result.failures else 0


if __name__ == "__main__":
    sys.exit(main())
