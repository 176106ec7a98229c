"""The request table added to a build's HTML performance report (``zv build --report``).

Dask's report shows tasks, not storage requests; a job's requests by stage (journalled
by :func:`pipeline.jobs.run_build`) are what tell an object-store job's cost, so the
command line appends them to the report as one plain HTML table.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from zarr_vectors.store.accounting import KINDS

SECTION_ID = "zv-requests"


def requests_table(stages: Mapping[str, Mapping[str, Any]]) -> str:
    """An HTML table: one row per stage (and per step within it), one column per request kind and byte count."""
    columns = [*KINDS, "bytes_read", "bytes_written"]
    head = "".join(f"<th>{c}</th>" for c in ["stage", *columns])
    rows = []
    for stage, info in stages.items():
        doc = info.get("requests")
        if not doc:
            continue
        rows.append((stage, doc, True))
        rows.extend((f"{stage}: {step}", sub, False) for step, sub in doc.get("by_stage", {}).items())
    step_style = ' style="color:#555"'
    body = "".join(
        f"<tr{'' if top else step_style}><td>{html.escape(name)}</td>"
        + "".join(f"<td style='text-align:right'>{int(doc.get(c, 0)):,}</td>" for c in columns) + "</tr>"
        for name, doc, top in rows
    )
    return (f'<div id="{SECTION_ID}" style="font-family:sans-serif;margin:1em">'
            f"<h2>Storage requests by stage</h2><table border='1' cellpadding='4' style='border-collapse:collapse'>"
            f"<tr>{head}</tr>{body}</table></div>")


def add_requests(report: str | Path, stages: Mapping[str, Mapping[str, Any]]) -> None:
    """Insert :func:`requests_table` into the report file, before its closing body tag (else at its end)."""
    path = Path(report)
    text = path.read_text()
    table = requests_table(stages)
    at = text.lower().rfind("</body>")
    path.write_text(text[:at] + table + text[at:] if at >= 0 else text + table)
