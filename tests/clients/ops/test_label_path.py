"""``fbgp-al label-path``: rooms, entries and call-backs are counted as its docstring says, and
one label's path, traced for real, goes through at most 8 rooms with no call-back, the request
entering each room once."""

from clients.ops import label_path
from clients.ops.label_path import OUTSIDE, ROOT, Trace, Tracer, room_of, summary


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
    assert out["steps"] == {"service.routes.labeling:label": {"service.store": 1,
                                                              "service.loop": 1},
                            "worker.jobs:refit": {"service.store": 1}}  # fmt: skip
    assert out["callbacks"] == []
    assert out["heartbeat"] == ["<outside> -> worker.jobs", "worker.jobs -> service.store"]


def _function_of(path: str, source: str, env: dict | None = None):
    """A function whose frames are those of the product module at ``path``."""
    env = {} if env is None else env
    exec(compile(source, str(ROOT / path), "exec"), env)
    return env[source.split("def ")[1].split("(")[0]]


def test_a_room_called_back_while_it_runs_is_a_call_back():
    """The store calling into the routes while a route runs it is a call-back; the same rooms
    entered while the routes are not running are not."""
    back = _function_of("service/routes/labeling.py", "def back():\n    return 1\n")
    store = _function_of("service/store/labels.py", "def store(f):\n    return f()\n")
    route = _function_of("service/routes/labeling.py",
                         "def route():\n    return store(back)\n",
                         {"store": store, "back": back})  # fmt: skip
    tracer = Tracer()
    with tracer, tracer.recorded():
        store(back)
        route()
    out = summary(tracer.trace)
    assert out["sequence"] == [
        "<outside> -> service.store", "service.store -> service.routes",
        "<outside> -> service.routes", "service.routes -> service.store",
        "service.store -> service.routes",
    ]  # fmt: skip
    assert out["callbacks"] == ["service.store -> service.routes.labeling:back"]


def test_one_label_goes_through_at_most_eight_rooms_and_calls_none_back():
    out = label_path.run()
    assert len(out["modules"]) <= 8, out["modules"]
    assert out["callbacks"] == [], out["callbacks"]
    api = out["calls"][: out["calls"].index("<outside> -> worker.jobs:refit")]
    assert [c for c in api if c.startswith("service.routes -> service.store")] == [
        "service.routes -> service.store.labels:record_label"
    ], api
    assert set(out["steps"]["service.routes.labeling:label"].values()) == {1}, out["steps"]
    assert "worker.nuts" in out["math"] and "worker.fitting" in out["modules"]
