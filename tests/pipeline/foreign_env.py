"""Run a ``dask scheduler`` or ``dask worker`` (no nanny) whose environment lacks this project's
distribution, or has another version of it: ``python foreign_env.py missing|VERSION ROLE ARGS...``.

For tests of a cluster built from another image than the client's.  ``missing`` also makes
the package unimportable, as in an environment that never installed it.
"""

from __future__ import annotations

import importlib.metadata
import sys

DISTRIBUTION = "zarr-vectors-dask"


class _Absent:
    """An import finder that has none of the project's packages."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.split(".")[0] in ("zarr_vectors", "pipeline"):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None


def main() -> None:
    mode, role, *args = sys.argv[1:]
    real = importlib.metadata.version

    def version(name: str) -> str:
        if name != DISTRIBUTION:
            return real(name)
        if mode == "missing":
            raise importlib.metadata.PackageNotFoundError(name)
        return mode

    importlib.metadata.version = version
    if mode == "missing":
        sys.meta_path.insert(0, _Absent())
    if role == "scheduler":
        from distributed.cli.dask_scheduler import main as run
    else:
        from distributed.cli.dask_worker import main as run
    sys.argv = [f"dask-{role}", *args]
    run()


if __name__ == "__main__":
    main()
