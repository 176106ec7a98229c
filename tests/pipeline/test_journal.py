"""The job journal saves in the background: the client never waits for a save, the newest
state wins, and a failed save is raised, never dropped."""

from __future__ import annotations

import json
import threading

import pytest

from pipeline.jobs import BuildSpec
from pipeline.journal import Journal


class _GatedStorage:
    """Stands in for the journal's storage: records what is written; the first write waits for a gate."""

    def __init__(self, fail: bool = False) -> None:
        self.written: list[dict] = []
        self.entered, self.gate = threading.Event(), threading.Event()
        self.fail = fail

    def put(self, key: str, data: bytes) -> None:
        self.entered.set()
        assert self.gate.wait(10), "the test never opened the gate"
        if self.fail:
            raise OSError("the bucket went away")
        self.written.append(json.loads(data))


@pytest.fixture
def journal(tmp_path):
    j = Journal(BuildSpec(kind="points", inputs=[], out=str(tmp_path / "s.zv"), chunk_shape=1.0))
    yield j
    if isinstance(j.storage, _GatedStorage):
        j.storage.gate.set()  # a failed test leaves no thread waiting
    j._writer._pool.shutdown(wait=True)


def test_saves_return_while_a_write_is_in_flight_and_the_newest_state_wins(journal):
    journal.storage = storage = _GatedStorage()
    journal.update("write", status="running")
    assert storage.entered.wait(10)  # the first save is being written, and blocks there
    for i in range(5):  # none of these waits for storage
        journal.update("write", step=f"step {i}")
    assert storage.written == []
    storage.gate.set()
    journal.flush()
    assert [d["stages"]["write"].get("step") for d in storage.written] == [None, "step 4"]


def test_a_failed_save_is_raised_by_the_next_flush(journal):
    journal.storage = storage = _GatedStorage(fail=True)
    journal.update("write", status="running")
    storage.gate.set()
    with pytest.raises(OSError, match="the bucket went away"):
        journal.flush()


def test_a_failed_save_is_raised_by_the_next_save(journal):
    journal.storage = storage = _GatedStorage(fail=True)
    journal.update("write", status="running")
    storage.gate.set()
    journal._writer._pool.submit(lambda: None).result()  # the failed write has run
    with pytest.raises(OSError, match="the bucket went away"):
        journal.update("write", status="done")


def test_close_leaves_the_last_state_on_storage(tmp_path):
    out = tmp_path / "s.zv"
    j = Journal(BuildSpec(kind="points", inputs=[], out=str(out), chunk_shape=1.0))
    for i in range(20):
        j.update("write", tasks_done=i)
    j.set_status("done")
    j.close()
    saved = Journal.load(str(out))
    assert saved["status"] == "done" and saved["stages"]["write"]["tasks_done"] == 19
    assert 1 <= j.requests.counts.puts <= 21  # counted by the journal itself; superseded saves are not written
