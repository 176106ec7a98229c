"""Tuning knobs, in dask.config's ``zarr_vectors`` namespace.

Task sizes, batch sizes, retries and thread counts are settings, not constants: set them
the way every Dask setting is set -- ``dask.config.set({"zarr_vectors.write.block-rows":
...})``, a YAML file under ``~/.config/dask/``, or ``DASK_ZARR_VECTORS__WRITE__BLOCK_ROWS``.
They are read in the client when a graph is planned and travel to the workers inside
the tasks' arguments, so a setting made in a notebook reaches a remote cluster.

Limits of the format itself (the 4 GiB cell, the vlen item size, cells per shard) are
not settings: they live with the code that enforces them.
"""

from __future__ import annotations

from typing import Any

import dask.config

MIB = 1 << 20

DEFAULTS: dict[str, Any] = {
    "zarr_vectors": {
        # every graph: target tasks per worker thread, and retries of a failed task
        # under a distributed client (safe: every task is idempotent)
        "tasks-per-thread": 4,
        "task-retries": 2,
        # under a distributed client, how long a failed graph's error waits for its tasks that
        # had started (they run on after a cancel) to end, so that it is raised on a still store
        "failed-graph-wait": "60s",
        # plan graphs for this many worker threads instead of the current cluster's (a
        # cluster that will grow; benchmarks/scaling.py records a 32-thread plan on 1 worker)
        "plan-threads": None,
        # while a job drives its graphs, leave the objects alive at its start (modules, the
        # client) out of the garbage collector's full passes (zarr_vectors.execution.runner.frozen_heap)
        "freeze-heap": True,
        "write": {
            # input rows per scan/route block: about one block per planned worker thread, at least
            # min-block-rows where the partition has them, never more than block-rows
            "min-block-rows": 250_000,
            "block-rows": 1_000_000,
            "min-rows-per-task": 250_000,  # a vertex owner task holds at least this many rows ...
            "max-task-bytes": 32 * MIB,  # ... and at most about this many bytes of them
            "record-block": 1_000_000,  # link records per filing block
            "link-cell-rows": 20_000,  # a link owner weighs each cell as this many records more (its files)
            # the links family's reconcile lists every array (a request each on an object store) to
            # check the owners' reports: one task per worker thread, at least this many arrays each
            "min-arrays-per-check": 32,
        },
        "pyramid": {
            "tasks-per-thread": 2,  # bin/map groups per worker thread
        },
        "shard": {
            # pack tasks and presence-check tasks: about one per worker thread (whole shards;
            # whole arrays), at least this many cells each (a points store has few cells of
            # megabytes each: 2048 put a 10M-point store in one pack task)
            "min-cells-per-task": 64,
            "cells-per-batch": 512,
            # commit tasks: at most one per worker thread, at least this much (cells + 8 per
            # array) each; a commit costs a few rounds of requests plus ~4 ms per array
            # (docs/DESIGN.md "Scaling")
            "min-cells-per-commit": 512,
        },
        "validate": {
            # cells read by one level-3 task: about three tasks per worker thread within these bounds
            # (1 MiB of stored cells is tens of ms of decoding, against a few ms per task)
            "min-batch-bytes": 1 * MIB,
            "max-batch-bytes": 48 * MIB,
        },
        "io": {
            "threads": 16,  # concurrent object requests of one process
            # a local batch of reads asking for fewer bytes than this runs on the calling thread:
            # handing a small read to a thread costs more than the read (docs/DESIGN.md, Scaling)
            "sequential-read-bytes": 8 << 20,
        },
        # zarr_vectors.plot: a point cloud above this many points is drawn as a density (hexbin);
        # a mesh gets a wireframe over its shading up to this many faces
        "plot": {
            "density-points": 50_000,
            "hexbin-gridsize": 120,
            "wireframe-faces": 5_000,
        },
        # the S3 backend (docs/DESIGN.md, "Object stores": measured, obstore is the faster)
        # and how many requests of one batch it keeps in flight
        "s3": {
            "backend": "obstore",  # or "s3fs"
            "concurrency": 64,
            # DeleteObjects requests (1,000 keys each) in flight at once, and how often the keys
            # an answer lists as not deleted for a passing reason (SlowDown...) are asked again
            "delete-concurrency": 4,
            "delete-retries": 2,
            # retries of the obstore backend's reachability probe (one LIST of the root before
            # a job); its other requests keep obstore's default (10, with backoff)
            "probe-retries": 2,
            # seconds one attempt of a request may take (obstore's default; for s3fs, botocore's
            # read timeout). A server that never answers then fails a request in bounded time: the
            # obstore backend within obstore's retry timeout (3 minutes); the s3fs backend after
            # 8 attempts (4 minutes; before, 25 of s3fs's nested tries, each with botocore's own
            # retries, outlasted 25 minutes)
            "request-timeout": 30,
            # seconds one delimited listing of the obstore backend may take in all, its requests'
            # retries included: obstore follows the pages itself, so a server repeating them is
            # bounded only by this (and the pages obstore keeps meanwhile: ~50 MB/s of repeated
            # objects from a loopback server). A store's delimited listings are a group's
            # children, a page or a few; twice request-timeout leaves room for a slow answer
            "listing-timeout": 60,
        },
        # bounds on what a store may make a reader do; a store is data from elsewhere
        "limits": {
            # no single cell, shard or document decodes to more than this many bytes
            "max-decoded-bytes": 4 * 1024 * MIB,
            # added to every cell's bound from metadata (zarr_vectors.format.bounds), so that a
            # count that is merely wrong decodes and is reported by the rule that owns it
            "decode-allowance-bytes": 1 * MIB,
            # a declared shape or count asking for more chunks/blocks than this is refused
            "max-declared-chunks": 1 << 24,
        },
        # the command line: below this many bytes of work (a build's input files, the store a
        # validate / shard / pyramid works on) a command runs on local threads; at or above
        # it, and whenever asked (--cluster, --workers, --report), on an embedded cluster.
        # A cluster costs seconds to start, which small jobs never repay (benchmarks/cli.py)
        "cli": {
            "cluster-threshold": "256MiB",
            # an embedded cluster whose workers are all gone for this long (their nannies closed:
            # none will come back) fails the tasks waiting for one, so the job stops naming its
            # stage instead of waiting forever; distributed's own
            # distributed.scheduler.no-workers-timeout wins when set.  A killed worker's nanny
            # starts another within seconds
            "no-workers-timeout": "60s",
        },
        # zv build's job journal: a running job saves it at least every `heartbeat` seconds; one
        # not saved for four of them is no claim on its store (a job killed on another host or in
        # another container cannot be asked whether its process lives: docs/DESIGN.md "Jobs")
        "jobs": {
            "heartbeat": 30,
        },
        # zv build's input tables.  A partition is read whole by one task and the writers'
        # per-block passes hold a few times its size, so it must stay a small fraction of a
        # worker's memory (dask's 256 MiB Parquet default put a 20M-point file in one
        # partition that a 1 GiB worker could not route); a Parquet row group is never split.
        "sources": {
            "parquet-blocksize": "16MiB",
            "csv-blocksize": "64MB",
            "las-chunk-points": 2_000_000,  # points of a LAS/LAZ file one task reads (about 60 MB as columns)
            # vertex tables up to this many rows resolve record ids by a broadcast join (the
            # sorted (id, row) table shipped to every record task, no shuffle); larger ones merge
            "broadcast-lookup-rows": 32_000_000,
            # ids spanning at most this many times the vertex count use a direct lookup table
            "dense-id-span": 4,
            # a points build on local threads reads its local CSVs whole (not through dask.dataframe),
            # all-numeric ones up to this size with numpy: no pandas to import, which costs more
            # than such a build
            "eager-csv-bytes": "8MiB",
            # partition lengths from the Parquet footers, as dask's reader knows them (one pass over the
            # input less); every task still checks its partition's rows (pipeline.sources.partition_lengths)
            "lengths-from-metadata": True,
        },
    }
}

dask.config.update_defaults(DEFAULTS)


def get(key: str) -> Any:
    """The current value of ``zarr_vectors.<key>`` (dotted, e.g. ``"write.block-rows"``)."""
    return dask.config.get(f"zarr_vectors.{key}")


__all__ = ["DEFAULTS", "get"]
