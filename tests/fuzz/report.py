"""Reporting a fuzzer run: counts, coverage, failure signatures, a findings page.

``python -m tests.fuzz.report RESULTS.json [--markdown FINDINGS.md]`` re-renders a run saved
with ``tests.fuzz.run --json``; the markdown groups failures by signature (class, exception
and the innermost line of the package it came from), each with a reproducing case and the
source line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections import Counter, defaultdict
from types import SimpleNamespace
from typing import Any

from .oracle import CLASSES, REPO
from .seeds import SEEDS

GiB = 1 << 30
REPRO = "PYTHONPATH=. .venv/bin/python -m tests.fuzz.run --only {seed}:{op}:{rng}"


def case_id(r: dict[str, Any]) -> str:
    c = r["case"]
    return f"{c['seed']}:{c['op']}:{c['rng']}"


def describe(r: dict[str, Any], tail_lines: int = 12) -> str:
    """One failing case: what was done, each failure with its traceback tail, how to replay it."""
    c = r["case"]
    lines = [f"{r['class']}  seed={c['seed']} op={c['op']} rng={c['rng']}  ({r.get('desc', '')})",
             f"  reproduce: {REPRO.format(**c)}"]
    for f in r.get("failures", []):
        lines.append(f"  - {f['class']} [{f['target']}] {f['signature']}")
        if f.get("message"):
            lines.append(f"      {f['message'][:300]}")
        for t in (f.get("tail") or "").splitlines()[-tail_lines:]:
            lines.append(f"      | {t}")
    return "\n".join(lines)


def signatures(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Distinct failure signatures: class, count, operators, first reproducing case."""
    out: dict[str, dict[str, Any]] = {}
    for r in results:
        for f in r.get("failures", []):
            entry = out.setdefault(f["signature"], {"class": f["class"], "count": 0, "ops": Counter(),
                                                    "example": r, "failure": f})
            entry["count"] += 1
            entry["ops"][r["case"]["op"]] += 1
    return out


def summary(run_: Any) -> str:
    """The text summary of a run (``run.Run`` or the same fields loaded from its JSON)."""
    results = run_.results
    counts = Counter(r["class"] for r in results)
    times = sorted(r["seconds"] for r in results) or [0.0]
    lines = [
        f"{len(results)} cases in {run_.seconds:.1f} s wall ({len(results) / max(run_.seconds, 1e-9):.2f} cases/s, "
        f"--jobs {run_.jobs}); per case: mean {sum(times) / len(times):.2f} s, median {times[len(times) // 2]:.2f} s, "
        f"p95 {times[int(len(times) * 0.95) - 1 if len(times) > 1 else 0]:.2f} s, max {times[-1]:.2f} s",
        f"address-space cap {run_.mem_cap / GiB:.2f} GiB, peak-RSS bound {run_.rss_bound / 2**20:.0f} MiB "
        f"(calibrated on {len(run_.calibration)} unmutated seeds: VmPeak "
        f"{max(t.get('vmpeak_mb', 0) for r in run_.calibration for t in r['targets'].values()):.0f} MiB, RSS "
        f"{max(t.get('maxrss_mb', 0) for r in run_.calibration for t in r['targets'].values()):.0f} MiB)",
        "classes: " + ", ".join(f"{c} {counts.get(c, 0)}" for c in (*CLASSES, "HARNESS")),
        "",
        "per operator:",
    ]
    by_op: dict[str, Counter] = defaultdict(Counter)
    by_seed: dict[str, Counter] = defaultdict(Counter)
    for r in results:
        by_op[r["case"]["op"]][r["class"]] += 1
        by_seed[r["case"]["seed"]][r["class"]] += 1
    shown = (*CLASSES, "HARNESS")
    lines.append(f"  {'operator':<24}" + "".join(f"{c:>8}" for c in shown))
    for op in sorted(by_op):
        lines.append(f"  {op:<24}" + "".join(f"{by_op[op].get(c, 0):>8}" for c in shown))
    lines += ["", "per seed store:", f"  {'seed':<24}" + "".join(f"{c:>8}" for c in shown)]
    for seed in by_seed:
        lines.append(f"  {seed:<24}" + "".join(f"{by_seed[seed].get(c, 0):>8}" for c in shown))
    seeds = list(SEEDS)
    lines += ["", "coverage (cases per operator x seed store; . = not applicable or not run):",
              f"  {'':<24}" + "".join(f"{s[:6]:>7}" for s in seeds)]
    for op in sorted({o for o, _ in run_.coverage}):
        lines.append(f"  {op:<24}" + "".join(f"{run_.coverage.get((op, s), '.'):>7}" for s in seeds))
    sigs = signatures(results)
    if sigs:
        lines += ["", f"{len(sigs)} distinct failure signatures:"]
        for sig, e in sorted(sigs.items(), key=lambda kv: (CLASSES.index(kv[1]["class"]) if kv[1]["class"] in
                                                           CLASSES else 9, -kv[1]["count"])):
            ops = ", ".join(f"{o} {n}" for o, n in e["ops"].most_common())
            lines.append(f"  {e['class']:<7} x{e['count']:<4} {sig}")
            lines.append(f"          ops: {ops}")
            lines.append(f"          e.g. {case_id(e['example'])} ({e['example'].get('desc', '')[:120]}): "
                         f"{e['failure']['message'][:200]}")
    return "\n".join(lines)




# ---------------------------------------------------------------------------------------
# the findings page
# ---------------------------------------------------------------------------------------
_PREFIXES = {"escapes validate(): ": "validate() raised", "untyped from read(): ": "read() raised untyped",
             "traceback from zv validate: ": "zv validate traced back",
             "zv validate failed: ": "zv validate failed instead of reporting findings"}
_CASE_DIR = re.compile(r"/\S*?/zv-fuzz-[^/]+/cases/case-\d+/")
_WHERE = re.compile(r" at (\S+?):(\d+) \((.*?)\)")
#: the defect classes of issue 12 each failure class belongs to
ISSUE_CLASS = {"ESCAPE": "1 (escapes)", "HANG": "2 (hangs)", "MEMORY": "3 (memory)", "WRONG": "6 (silent wrong answers)"}


def group_key(f: dict[str, Any]) -> tuple[str, str]:
    """(class, signature without the target): one row of the findings page per defect site."""
    sig = f["signature"]
    for prefix in _PREFIXES:
        if sig.startswith(prefix):
            return f["class"], sig[len(prefix):]
    if sig.startswith("HANG in "):
        return f["class"], re.sub(r"^HANG in \S+ at ", "HANG at ", sig)
    if sig.startswith("MEMORY peak RSS"):
        return f["class"], "peak RSS above the bound"
    if sig.startswith("WRONG "):
        return f["class"], "WRONG " + sig.split(": ", 1)[-1]
    return f["class"], sig


def _how(f: dict[str, Any]) -> str:
    sig = f["signature"]
    for prefix, text in _PREFIXES.items():
        if sig.startswith(prefix):
            return text
    if "_CHECK_CRASHED" in sig:
        return f"validate() reported {sig.split()[0]}"
    return f["target"]


def _source(path: str, line: int) -> str:
    try:
        with open(os.path.join(REPO, path)) as fh:
            return fh.read().splitlines()[line - 1].strip()
    except (OSError, IndexError):
        return ""


def _issue_class(cls: str, key: str, how: Counter) -> str:
    if cls in ISSUE_CLASS:
        return ISSUE_CLASS[cls]
    if "_CHECK_CRASHED" in key or any(h.startswith("validate() raised") for h in how):
        return "4 (crashes out of validate)" if not any(h.startswith("read()") for h in how) else "4 and 5"
    if any(h.startswith("read()") for h in how):
        return "5 (untyped reader exceptions)"
    return "CLI"


def findings_markdown(results: list[dict[str, Any]], header: str) -> str:
    groups: dict[tuple[str, str], list[tuple[dict[str, Any], dict[str, Any]]]] = defaultdict(list)
    for r in results:
        for f in r.get("failures", []):
            groups[group_key(f)].append((r, f))
    order = sorted(groups, key=lambda k: (CLASSES.index(k[0]) if k[0] in CLASSES else 9, -len(groups[k]), k[1]))
    counts = Counter(r["class"] for r in results)
    lines = [header, "", "| class | cases |", "|---|---|"]
    lines += [f"| {c} | {counts.get(c, 0)} |" for c in (*CLASSES, "HARNESS")]
    lines += ["", f"{len(order)} distinct failure signatures (class + exception + innermost line of the package; "
              "one row per site, whichever target showed it).", ""]
    for n, key in enumerate(order, 1):
        items = groups[key]
        cls, sig = key
        how = Counter(_how(f) for _, f in items)
        ops = Counter(r["case"]["op"] for r, _ in items)
        seeds = Counter(r["case"]["seed"] for r, _ in items)
        cases = {case_id(r) for r, _ in items}
        lines.append(f"### {n}. {cls}: `{sig}`")
        lines.append("")
        lines.append(f"- issue class: {_issue_class(cls, sig, how)}; {len(items)} failures in {len(cases)} cases; "
                     "shown by " + ", ".join(f"{h} x{c}" for h, c in how.most_common()))
        m = _WHERE.search(sig)
        if m:
            code = _source(m.group(1), int(m.group(2)))
            lines.append(f"- where: `{m.group(1)}:{m.group(2)}` ({m.group(3)})" + (f": `{code}`" if code else ""))
        lines.append("- operators: " + ", ".join(f"{o} x{c}" for o, c in ops.most_common()))
        lines.append("- seed stores: " + ", ".join(f"{s} x{c}" for s, c in seeds.most_common()))
        shown: set[str] = set()
        for r, f in items:
            if r["case"]["op"] in shown or len(shown) >= 3:
                continue
            shown.add(r["case"]["op"])
            lines.append(f"- e.g. `{REPRO.format(**r['case'])}` -- {r.get('desc', '')}")
            lines.append(f"  - [{f['target']}] {_CASE_DIR.sub('<case>/', ' '.join(f['message'].split()))[:300]}")
        lines.append("")
    return "\n".join(lines)


def load(path: str) -> SimpleNamespace:
    with open(path) as f:
        doc = json.load(f)
    results = doc["results"]
    return SimpleNamespace(results=results, calibration=doc.get("calibration") or [], mem_cap=doc["mem_cap"],
                           rss_bound=doc["rss_bound"], seconds=doc["seconds"], jobs=doc.get("jobs", 2),
                           coverage=Counter((r["case"]["op"], r["case"]["seed"]) for r in results))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.report", description=__doc__.split("\n")[0])
    parser.add_argument("results", help="a run saved with tests.fuzz.run --json")
    parser.add_argument("--markdown", metavar="FILE", help="write the findings page here")
    args = parser.parse_args(argv)
    run_ = load(args.results)
    text = summary(run_) if run_.calibration else "\n".join(json.load(open(args.results))["summary"].splitlines())
    print(text)
    if args.markdown:
        head = "\n".join(text.splitlines()[:3])
        with open(args.markdown, "w") as f:
            f.write(findings_markdown(run_.results, "```\n" + head + "\n```") + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
