"""Fixtures for the ``zv`` pipeline tests: an isolated HOME, the session cluster's address, the CLI in-process.

Helpers and input tables live in ``pipeline_helpers`` (a uniquely named module, so
that worker processes can import it too: several test folders have a ``conftest``).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pipeline_helpers import Run

from pipeline.cli import main


# ---------------------------------------------------------------------------
# isolation: the job index (``~/.cache/zv/jobs``) lives under a per-test HOME
# ---------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def zv_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    return home


@pytest.fixture
def scheduler(local_cluster) -> str:
    """The session LocalCluster's scheduler address (2 worker processes, 1 thread each)."""
    return local_cluster.scheduler.address


# ---------------------------------------------------------------------------
# running the command line in-process
# ---------------------------------------------------------------------------
@pytest.fixture
def cli(capsys) -> Callable[..., Run]:
    """``cli(*argv)`` runs ``pipeline.cli.main`` and returns its exit code and output.

    argparse usage errors exit through ``SystemExit``; its code is the exit code.
    """

    def run(*argv: object) -> Run:
        capsys.readouterr()
        try:
            rc = main([str(a) for a in argv])
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 2
        captured = capsys.readouterr()
        return Run(rc, captured.out, captured.err)

    return run
