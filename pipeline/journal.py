"""A build job's journal: its state, in a small JSON document beside the store.

Apart from :mod:`pipeline.jobs` so that reading it (``zv status``, the request table of
``zv info``) costs no import of the job machinery (dask.dataframe, pandas, the writers).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from zarr_vectors.errors import InputError
from zarr_vectors.store.backend import Storage

if TYPE_CHECKING:
    from pipeline.jobs import BuildSpec


class Journal:
    """The job's state: stages done, the running stage, results, the error if any."""

    def __init__(self, spec: BuildSpec) -> None:
        self.storage = Storage(spec.out.rstrip("/") + ".zvjob.json", spec.storage_options)
        self.state: dict[str, Any] = {"job_id": spec.job_id, "spec": asdict(spec), "stages": {}, "status": "pending"}

    @staticmethod
    def load(out: str, storage_options: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        storage = Storage(out.rstrip("/") + ".zvjob.json", storage_options)
        storage.check_reachable()  # an unreachable endpoint is StoreNotFoundError, not a botocore error
        raw = storage.get("")
        return json.loads(raw) if raw is not None else None

    def resume_from(self, previous: dict[str, Any]) -> None:
        self.state["stages"] = {k: v for k, v in previous.get("stages", {}).items() if v.get("status") == "done"}

    def done(self, stage: str) -> bool:
        return self.state["stages"].get(stage, {}).get("status") == "done"

    def update(self, stage: str, **values: Any) -> None:
        self.state["stages"].setdefault(stage, {}).update(values)
        self.save()

    def set_status(self, status: str, **values: Any) -> None:
        self.state["status"] = status
        self.state.update(values)
        self.save()

    def save(self) -> None:
        from zarr_vectors.execution.requests import attribute

        with attribute("journal"):  # counted apart from the stage's own work
            self.storage.put("", json.dumps(self.state, indent=2, default=str).encode())


def job_status(out: str, storage_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    state = Journal.load(out, storage_options)
    if state is None:
        raise InputError(f"no job journal beside {out!r}")
    return state
