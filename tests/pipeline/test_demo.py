"""``zv demo``, the README's main job, as a new user runs it: the console script in a fresh process."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import zarr_vectors as zv

pytestmark = pytest.mark.slow


def test_demo_builds_validates_and_reports_offline(tmp_path):
    out = tmp_path / "demo"
    zv_script = Path(sys.executable).with_name("zv")
    proc = subprocess.run([str(zv_script), "demo", "--out", str(out), "--points", "20000"], capture_output=True,
                          text=True, timeout=600, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    # the summary names each store's verdict, as `zv build` does
    verdicts = re.findall(r"^ +validation \(level 5\): PASS", proc.stdout, re.MULTILINE)
    assert len(verdicts) == 2, proc.stdout
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    for store in summary["stores"]:
        assert zv.validate(store, level=5).ok
    html = Path(summary["report"]).read_text()
    assert "Dask Performance Report" in html
    # inline: Bokeh's scripts are in the file, so the report opens without a network
    assert not re.search(r"<script[^>]+src=\"https?://", html), re.findall(r"<script[^>]+src=\"[^\"]+\"", html)[:3]
