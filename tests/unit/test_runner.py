"""The runner's client-side helpers: the frozen heap around a job, and owner shares."""

from __future__ import annotations

import gc

import dask

from zarr_vectors.execution import runner


def test_the_heap_is_frozen_inside_a_job_and_given_back_after_the_last():
    assert gc.get_freeze_count() == 0
    with runner.frozen_heap():
        frozen = gc.get_freeze_count()
        assert frozen > 1000  # the modules, classes and functions alive at the start
        # (frozen objects can still be freed: the count only falls by those)
        with runner.frozen_heap():  # a nested job (zv build inside zv) ...
            assert gc.get_freeze_count() > frozen // 2
        assert gc.get_freeze_count() > frozen // 2  # ... does not thaw the outer one
    assert gc.get_freeze_count() == 0


def test_the_heap_is_given_back_when_the_job_fails():
    try:
        with runner.frozen_heap():
            raise KeyError("stage")
    except KeyError:
        pass
    assert gc.get_freeze_count() == 0


def test_freeze_heap_false_leaves_the_collector_alone(zv_config):
    zv_config("freeze-heap", False)
    with runner.frozen_heap():
        assert gc.get_freeze_count() == 0


def test_the_command_line_gives_the_heap_back(tmp_path, capsys):
    from pipeline.cli import main

    assert main(["info", str(tmp_path / "missing.zv")]) != 0
    assert gc.get_freeze_count() == 0


def test_on_local_threads_every_owner_takes_the_parts_as_they_are():
    parts = [dask.delayed(lambda i=i: [i * 10 + j for j in range(3)])() for i in range(2)]
    shares = runner.shares(parts, lambda routed, j: routed[j], 3)
    assert len(shares) == 3 and all(s == parts for s in shares)  # no task per share: nothing moves
