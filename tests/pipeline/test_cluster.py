"""The embedded cluster: worker processes get the allocator setting the design relies on."""

from __future__ import annotations

import os

from distributed import Client

from pipeline.cluster import WORKER_ENVIRON, local_cluster


def test_local_cluster_workers_get_the_worker_environment():
    with local_cluster(workers=1, memory_limit="1GiB") as cluster, Client(cluster) as client:
        seen = client.run(lambda: {k: os.environ.get(k) for k in WORKER_ENVIRON})
        assert list(seen.values()) == [WORKER_ENVIRON]
        assert client.dashboard_link.startswith("http")
