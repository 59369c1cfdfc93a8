"""``fbgp-al label-path``: rooms and entries are counted as its docstring says, and one label's
path, traced for real, goes through at most 8 rooms, with the route entering the store once."""

from clients.ops import label_path
from clients.ops.label_path import OUTSIDE, ROOT, Trace, room_of, summary


def test_a_package_is_one_room_and_the_vocabulary_and_plumbing_none():
    def room(path: str) -> str | None:
        return room_of(str(ROOT / path))

    assert room("service/store/labels.py") == room("service/keys.py") == "service.store"
    assert room("service/routes/checks.py") == "service.routes"
    assert room("worker/jobs/lease.py") == room("worker/jobs/__init__.py") == "worker.jobs"
    assert room("service/loop.py") == "service.loop"
    assert room("worker/spec/space.py") is None and room("service/middleware.py") is None
    assert room_of("/usr/lib/python3/json/decoder.py") is None


def test_reentries_count_entries_from_rooms_not_the_frameworks_and_not_the_heartbeat():
    trace = Trace(entries=[
        (1, OUTSIDE, "service.routes", "service.routes.labeling:label"),
        (1, "service.routes", "service.store", "service.store.labels:record_label"),
        (1, "service.store", "service.loop", "service.loop:labeled_state"),
        (2, OUTSIDE, "worker.jobs", "worker.jobs:refit"),
        (2, "worker.jobs", "service.store", "service.store.refits:refit_inputs"),
        (3, OUTSIDE, "worker.jobs", "worker.jobs.lease:beat"),  # the heartbeat's thread
        (3, "worker.jobs", "service.store", "service.store.refits:beat"),
    ])  # fmt: skip
    out = summary(trace)
    assert out["modules"] == ["service.routes", "service.store", "service.loop", "worker.jobs"]
    assert out["entered"] == {"service.store": 2, "service.loop": 1}
    assert out["reentered"] == ["service.store"]
    assert out["heartbeat"] == ["<outside> -> worker.jobs", "worker.jobs -> service.store"]


def test_one_label_goes_through_at_most_eight_rooms():
    out = label_path.run()
    assert len(out["modules"]) <= 8, out["modules"]
    api = out["calls"][: out["calls"].index("<outside> -> worker.jobs:refit")]
    assert [c for c in api if c.startswith("service.routes -> service.store")] == [
        "service.routes -> service.store.labels:record_label"
    ], api
    assert "worker.nuts" in out["math"] and "worker.fitting" in out["modules"]
