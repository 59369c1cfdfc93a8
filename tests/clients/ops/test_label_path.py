"""``fbgp-al label-path``: files, entries and the four checks are counted as its docstring says
(each check shown failing on a trace that breaks it), the tracer records what a call enters
and within what, and one label's path, traced for real, passes every check."""

from fbgp_al.clients.ops import label_path
from fbgp_al.clients.ops.label_path import (
    BUILD,
    MATH,
    OUTSIDE,
    ROOT,
    Entry,
    Trace,
    Tracer,
    callbacks,
    entered_twice,
    job_store_entries,
    module_of,
    store_calls_up,
    summary,
)

ROUTE = "fbgp_al.service.routes.labeling"
STORY = "fbgp_al.service.results"
CAMPAIGNS = "fbgp_al.service.store.campaigns"
KEYS = "fbgp_al.service.keys"
JOB = "fbgp_al.service.jobs"


def test_every_product_file_is_its_own_and_a_library_s_none():
    def module(path: str) -> str | None:
        return module_of(str(ROOT / path))

    assert module("service/store/labels.py") == "fbgp_al.service.store.labels"
    assert module("service/middleware.py") == "fbgp_al.service.middleware"
    assert module("worker/vocabulary/space.py") == "fbgp_al.worker.vocabulary.space"
    assert module("service/jobs/__init__.py") == JOB
    assert module("clients/fbgp_al/__init__.py") == "fbgp_al"
    assert module_of("/usr/lib/python3/json/decoder.py") is None


def _e(caller: str, callee: str, parent=None, step="request", function="f", **kw) -> Entry:
    return Entry(1, step, caller, callee, f"{callee}:{function}", parent, **kw)


def test_a_call_against_the_layers_arrows_or_into_a_running_file_is_a_call_back():
    entries = [
        _e(OUTSIDE, ROUTE),  # the framework's call: the request's start
        _e(ROUTE, STORY),  # the API within itself
        _e(STORY, CAMPAIGNS),  # the API into the store
        _e(CAMPAIGNS, KEYS),  # the store within its layer
        _e(CAMPAIGNS, "fbgp_al.worker.vocabulary.space"),  # anyone into the vocabulary
        _e("fbgp_al.service.store.labels", ROUTE),  # the store calling the API
        _e(MATH, "fbgp_al.service.jobs.fanout"),  # the math calling a job
        _e(JOB, "fbgp_al.worker.fitting"),  # a job into the math
        _e(KEYS, CAMPAIGNS, reentrant=True),  # a file still running below its caller
    ]
    assert callbacks(entries) == [
        f"fbgp_al.service.store.labels -> {ROUTE}:f",
        f"{MATH} -> fbgp_al.service.jobs.fanout:f",
        f"{KEYS} -> {CAMPAIGNS}:f",
    ]


def test_a_request_entering_a_file_twice_to_do_work_fails_and_a_leaf_called_twice_does_not():
    entries = [
        _e(OUTSIDE, ROUTE),  # 0
        _e(ROUTE, STORY, 0),  # 1
        _e(STORY, CAMPAIGNS, 1),  # 2: a visit that calls on ...
        _e(CAMPAIGNS, KEYS, 2),  # 3 ... into the key schema (a leaf)
        _e(STORY, "fbgp_al.service.loop", 1),  # 4: a leaf
        _e(STORY, "fbgp_al.service.loop", 1),  # 5: the same leaf again: counted, not refused
        _e(STORY, CAMPAIGNS, 1),  # 6: the store's campaigns again, doing work
        _e(CAMPAIGNS, KEYS, 6),  # 7
        _e(JOB, CAMPAIGNS, None, step="refit"),  # 8: another step's entries count apart
        _e(CAMPAIGNS, KEYS, 8, step="refit"),  # 9
    ]
    assert entered_twice(entries) == {CAMPAIGNS: 2}
    assert entered_twice(entries[:6] + entries[8:]) == {}
    out = summary(Trace(entries=entries))
    assert out["problems"]["entered_twice"] == {CAMPAIGNS: 2}
    assert out["steps"]["request"] == {STORY: 1, CAMPAIGNS: 2, KEYS: 2, "fbgp_al.service.loop": 2}


def test_a_job_enters_the_store_three_times_from_its_own_module_the_store_s_object_not_counted():
    def job(caller: str, callee: str, function: str) -> Entry:
        return Entry(2, "refit", caller, callee, f"{callee}:{function}")

    built = Entry(2, "refit", JOB, "fbgp_al.service.store", BUILD)
    three = [
        job(JOB, "fbgp_al.service.store.refits", "inputs"),
        job(JOB, "fbgp_al.service.store.models", "candidates"),
        job(JOB, "fbgp_al.service.store.refits", "finish"),
    ]
    assert len(job_store_entries([built, *three])) == 3
    out = summary(Trace(entries=[built, *three]))
    assert out["problems"]["job_store_entries"] == []
    assert out["problems"]["job_store_entries_elsewhere"] == []
    fourth = job("fbgp_al.service.jobs.fanout", "fbgp_al.service.store.jobs", "wanting_workers")
    out = summary(Trace(entries=[built, *three, fourth]))
    assert len(out["problems"]["job_store_entries"]) == 4
    assert out["problems"]["job_store_entries_elsewhere"] == [
        "fbgp_al.service.jobs.fanout -> fbgp_al.service.store.jobs:wanting_workers"
    ]


def test_the_store_calling_a_job_or_the_math_is_refused():
    entries = [
        _e("fbgp_al.service.store.refits", "fbgp_al.service.queues"),  # the queues: the store's
        _e("fbgp_al.service.store.refits", "fbgp_al.service.jobs.fanout"),
        _e("fbgp_al.service.store.models", "fbgp_al.worker.gp"),
    ]
    assert store_calls_up(entries) == [
        "fbgp_al.service.store.refits -> fbgp_al.service.jobs.fanout:f",
        "fbgp_al.service.store.models -> fbgp_al.worker.gp:f",
    ]


def _function_of(path: str, source: str, env: dict | None = None):
    """A function whose frames are those of the product module at ``path``."""
    env = {} if env is None else env
    exec(compile(source, str(ROOT / path), "exec"), env)
    return env[source.split("def ")[1].split("(")[0]]


def test_the_tracer_records_each_entry_within_the_one_it_was_made_in():
    """A route calling the store twice, the store calling the key schema, and the store calling
    back into the route while it runs: each entry with its parent, the call-back marked."""
    key = _function_of("service/keys.py", "def key():\n    return 'k'\n")
    back = _function_of("service/routes/labeling.py", "def back():\n    return 1\n")
    store = _function_of(
        "service/store/labels.py", "def store(f):\n    key()\n    return f()\n", {"key": key}
    )
    route = _function_of(
        "service/routes/labeling.py",
        "def route():\n    store(int)\n    return store(back)\n",
        {"store": store, "back": back},
    )
    tracer = Tracer()
    with tracer, tracer.recorded("request"):
        route()
    got = [(e.caller, e.function, e.parent, e.reentrant) for e in tracer.trace.entries]
    labels = "fbgp_al.service.store.labels"
    assert got == [
        (OUTSIDE, f"{ROUTE}:route", None, False),
        (ROUTE, f"{labels}:store", 0, False),
        (labels, f"{KEYS}:key", 1, False),
        (ROUTE, f"{labels}:store", 0, False),
        (labels, f"{KEYS}:key", 3, False),
        (labels, f"{ROUTE}:back", 3, True),
    ]
    out = summary(tracer.trace)
    assert out["problems"]["entered_twice"] == {labels: 2}
    assert out["problems"]["callbacks"] == [f"{labels} -> {ROUTE}:back"]


def test_one_label_s_path_passes_every_check():
    out = label_path.run()
    assert all(not found for found in out["problems"].values()), out["problems"]
    # the request: the router, the label's story, then the store's nouns it needs, in order
    request = [c.split(": ", 1)[1] for c in out["calls"] if c.startswith("request: ")]
    story = [c for c in request if c.startswith(f"{STORY} -> fbgp_al.service.store")]
    assert story == [
        f"{STORY} -> {CAMPAIGNS}:spec",
        f"{STORY} -> fbgp_al.service.store.labels:record",
        f"{STORY} -> fbgp_al.service.store.refits:requested",
    ], request
    assert f"{ROUTE} -> {STORY}:label" in request
    assert out["job_store_calls"] == [
        f"{JOB} -> fbgp_al.service.store.refits:inputs",
        f"{JOB} -> fbgp_al.service.store.models:candidates",
        f"{JOB} -> fbgp_al.service.store.refits:finish",
    ]
    assert "fbgp_al.worker.nuts" in out["math"] and "fbgp_al.worker.fitting" in out["files"]
