"""``fbgp-al label-path``: rooms, entries and call-backs are counted as its docstring says, and
one label's path, traced for real, goes through at most 8 rooms with no call-back, the request
entering each room once."""

from fbgp_al.clients.ops import label_path
from fbgp_al.clients.ops.label_path import OUTSIDE, ROOT, Trace, Tracer, room_of, summary


def test_a_package_is_one_room_and_the_vocabulary_and_plumbing_none():
    def room(path: str) -> str | None:
        return room_of(str(ROOT / path))

    assert room("service/store/labels.py") == room("service/keys.py") == "fbgp_al.service.store"
    assert room("service/routes/labeling.py") == "fbgp_al.service.routes"
    assert (
        room("service/jobs/lease.py") == room("service/jobs/__init__.py") == "fbgp_al.service.jobs"
    )
    assert room("service/loop.py") == "fbgp_al.service.loop"
    assert room("worker/vocabulary/space.py") is None and room("service/middleware.py") is None
    assert room_of("/usr/lib/python3/json/decoder.py") is None


def test_reentries_count_entries_from_rooms_not_the_frameworks_and_not_the_heartbeat():
    trace = Trace(
        entries=[
            (1, OUTSIDE, "fbgp_al.service.routes", "fbgp_al.service.routes.labeling:label"),
            (
                1,
                "fbgp_al.service.routes",
                "fbgp_al.service.store",
                "fbgp_al.service.store.labels:record_label",
            ),
            (
                1,
                "fbgp_al.service.store",
                "fbgp_al.service.loop",
                "fbgp_al.service.loop:labeled_state",
            ),
            (2, OUTSIDE, "fbgp_al.service.jobs", "fbgp_al.service.jobs:refit"),
            (
                2,
                "fbgp_al.service.jobs",
                "fbgp_al.service.store",
                "fbgp_al.service.store.refits:refit_inputs",
            ),
            (
                3,
                OUTSIDE,
                "fbgp_al.service.jobs",
                "fbgp_al.service.jobs.lease:beat",
            ),  # the heartbeat's thread
            (
                3,
                "fbgp_al.service.jobs",
                "fbgp_al.service.store",
                "fbgp_al.service.store.refits:beat",
            ),
        ]
    )
    out = summary(trace)
    assert out["modules"] == [
        "fbgp_al.service.routes",
        "fbgp_al.service.store",
        "fbgp_al.service.loop",
        "fbgp_al.service.jobs",
    ]
    assert out["entered"] == {"fbgp_al.service.store": 2, "fbgp_al.service.loop": 1}
    assert out["reentered"] == ["fbgp_al.service.store"]
    assert out["steps"] == {
        "fbgp_al.service.routes.labeling:label": {
            "fbgp_al.service.store": 1,
            "fbgp_al.service.loop": 1,
        },
        "fbgp_al.service.jobs:refit": {"fbgp_al.service.store": 1},
    }
    assert out["callbacks"] == []
    assert out["heartbeat"] == [
        "<outside> -> fbgp_al.service.jobs",
        "fbgp_al.service.jobs -> fbgp_al.service.store",
    ]


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
    route = _function_of(
        "service/routes/labeling.py",
        "def route():\n    return store(back)\n",
        {"store": store, "back": back},
    )
    tracer = Tracer()
    with tracer, tracer.recorded():
        store(back)
        route()
    out = summary(tracer.trace)
    assert out["sequence"] == [
        "<outside> -> fbgp_al.service.store",
        "fbgp_al.service.store -> fbgp_al.service.routes",
        "<outside> -> fbgp_al.service.routes",
        "fbgp_al.service.routes -> fbgp_al.service.store",
        "fbgp_al.service.store -> fbgp_al.service.routes",
    ]
    assert out["callbacks"] == ["fbgp_al.service.store -> fbgp_al.service.routes.labeling:back"]


def test_one_label_goes_through_at_most_eight_rooms_and_calls_none_back():
    out = label_path.run()
    assert len(out["modules"]) <= 8, out["modules"]
    assert out["callbacks"] == [], out["callbacks"]
    api = out["calls"][: out["calls"].index("<outside> -> fbgp_al.service.jobs:refit")]
    assert [c for c in api if c.startswith("fbgp_al.service.routes -> fbgp_al.service.store")] == [
        "fbgp_al.service.routes -> fbgp_al.service.store.labels:record_label"
    ], api
    assert set(out["steps"]["fbgp_al.service.routes.labeling:label"].values()) == {1}, out["steps"]
    assert "fbgp_al.worker.nuts" in out["math"] and "fbgp_al.worker.fitting" in out["modules"]
