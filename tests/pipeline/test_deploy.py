"""deploy/: the local cluster script runs a build for real; the other files hold valid settings and commands."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import dask
import pytest
import yaml
from distributed import Client  # importing distributed registers its defaults with dask.config
from pipeline_helpers import points_frame

import zarr_vectors as zv
from pipeline.cli import build_parser
from zarr_vectors.validation import validate

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
BIN = Path(sys.executable).parent


def leaf_paths(tree: dict, prefix: tuple = ()) -> list[tuple]:
    out = []
    for key, value in tree.items():
        if isinstance(value, dict) and key != "pre-spawn-environ":  # that one maps free-form variable names
            out += leaf_paths(value, (*prefix, key))
        else:
            out.append((*prefix, key))
    return out


def test_dask_settings_are_real_options():
    ours = yaml.safe_load((DEPLOY / "dask.yaml").read_text())
    defaults = dask.config.merge(*dask.config.defaults)
    for path in leaf_paths(ours):
        node = defaults
        for key in path:
            assert isinstance(node, dict) and key in node, f"deploy/dask.yaml: {'.'.join(path)} is not a Dask option"
            node = node[key]


def zv_command(text: str) -> list[str]:
    """The ``zv ...`` command of a shell script, continuation lines joined."""
    joined = re.sub(r"\\\n\s*", " ", text)
    line = next(ln.strip() for ln in joined.splitlines() if ln.strip().startswith("zv "))
    return shlex.split(line)[1:]


def test_every_zv_command_line_parses():
    slurm = zv_command((DEPLOY / "slurm" / "zv-build.sbatch").read_text())
    job = yaml.safe_load((DEPLOY / "kubernetes" / "daskjob.yaml").read_text())
    k8s = job["spec"]["job"]["spec"]["containers"][0]["args"]
    assert k8s[0] == "zv"
    for argv in (slurm, k8s[1:]):
        args = build_parser().parse_args(argv)  # argparse exits on anything the command line lacks
        assert args.command == "build" and args.validate == 5 and args.consolidate
    cluster = job["spec"]["cluster"]["spec"]
    assert cluster["scheduler"]["spec"]["containers"][0]["args"][:2] == ["dask", "scheduler"]
    assert cluster["worker"]["spec"]["containers"][0]["args"][:2] == ["dask", "worker"]


def test_no_removed_dask_commands():
    """``dask-scheduler`` / ``dask-worker`` were removed from distributed in 2026.6."""
    for path in DEPLOY.rglob("*"):
        if path.is_file():
            assert not re.search(r"dask-(scheduler|worker)\b", path.read_text()), path


def alive(pid: int) -> bool:
    """Running, not merely unreaped (the script's processes outlive the shell that started them)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.mark.slow
def test_local_cluster_script_runs_a_build(tmp_path):
    cluster_dir = tmp_path / "cluster"
    env = {**os.environ, "ZV_CLUSTER_DIR": str(cluster_dir), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    script = str(DEPLOY / "local" / "cluster.sh")
    start = subprocess.run(["bash", script, "start", "2", "1GiB"], env=env, capture_output=True, text=True,
                           timeout=240)
    pids = [int((cluster_dir / f"{role}.pid").read_text()) for role in ("scheduler", "workers")
            if (cluster_dir / f"{role}.pid").exists()]
    try:
        assert start.returncode == 0, start.stderr + (cluster_dir / "workers.log").read_text()
        scheduler_file = start.stdout.strip().splitlines()[-1]
        with Client(scheduler_file=scheduler_file) as client:
            assert len(client.scheduler_info()["workers"]) == 2
            # deploy/dask.yaml reached the workers through DASK_CONFIG
            assert set(client.run(lambda: os.environ.get("MALLOC_MMAP_THRESHOLD_")).values()) == {"33554432"}
        df = points_frame(5000, seed=61)
        df.to_parquet(tmp_path / "points.parquet", index=False)
        out = tmp_path / "points.zv"
        build = subprocess.run([str(BIN / "zv"), "build", "points", str(tmp_path / "points.parquet"), str(out),
                                "--chunk-shape", "25", "--pyramid", "2", "--consolidate", "--validate", "5",
                                "--scheduler-file", scheduler_file], env=env, capture_output=True, text=True,
                               timeout=300)
        assert build.returncode == 0, build.stderr
        assert len(zv.read(str(out))) == len(df)
        assert validate(str(out), 5).ok
    finally:
        subprocess.run(["bash", script, "stop"], env=env, timeout=60)
    deadline = time.monotonic() + 30
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [p for p in pids if alive(p)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert pids and not left, f"processes still running after stop: {left}"
    assert not (cluster_dir / "scheduler.json").exists()
