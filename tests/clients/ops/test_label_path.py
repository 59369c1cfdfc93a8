"""``fbgp-al label-path``: files, entries and the four checks are counted as its docstring says
(each check shown failing on a trace that breaks it, a sampler calling back a job's object and
a job's store entries from the fan-out's module among them), the tracer records what a call
enters and within what, and one label's path, traced for real on two workers (a refit fanned
out: chain groups judging the target together, a merge, a scoring part), passes every check."""

from fbgp_al.clients.ops import label_path
from fbgp_al.clients.ops.label_path import (
    BUILD,
    EXCHANGE,
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
STORE = "fbgp_al.service.store"


def test_every_product_file_is_its_own_and_a_library_s_none():
    def module(path: str) -> str | None:
        return module_of(str(ROOT / path))

    assert module("service/store/labels.py") == "fbgp_al.service.store.labels"
    assert module("service/middleware.py") == "fbgp_al.service.middleware"
    assert module("worker/vocabulary/space.py") == "fbgp_al.worker.vocabulary.space"
    assert module("service/jobs/__init__.py") == JOB
    assert module("clients/fbgp_al/__init__.py") == "fbgp_al"
    assert module_of("/usr/lib/python3/json/decoder.py") is None
    assert module("clients/ops/thread_workers.py") is None  # the tracer's workers: its harness


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


def test_each_job_enters_the_store_three_times_from_its_own_module_the_exchange_apart():
    def job(callee: str, function: str, caller: str = JOB, thread: int = 2) -> Entry:
        return Entry(thread, "refit", caller, callee, f"{callee}:{function}")

    def start(function: str, thread: int = 2) -> Entry:  # a worker's call into the job
        return Entry(thread, "refit", OUTSIDE, JOB, f"{JOB}:{function}")

    built = Entry(2, "refit", JOB, "fbgp_al.service.store", BUILD)
    refit = [
        start("refit"),
        built,
        job("fbgp_al.service.store.refits", "inputs"),
        job("fbgp_al.service.store.models", "candidates"),
        job("fbgp_al.service.store.refits", "finish"),
    ]
    # a chain group on another worker: its inputs, then its draws at each of many checks
    exchange = [job(f"{STORE}.groups", "publish", thread=3) for _ in range(5)]
    group = [start("refit_chains", 3), job(f"{STORE}.refits", "inputs", thread=3), *exchange]
    assert job_store_entries(refit + group) == {
        "1. refit": [
            f"{JOB} -> {STORE}.refits:inputs",
            f"{JOB} -> {STORE}.models:candidates",
            f"{JOB} -> {STORE}.refits:finish",
        ],
        "2. refit_chains": [f"{JOB} -> {STORE}.refits:inputs"]
        + [f"{JOB} -> {EXCHANGE}:publish"] * 5,
    }
    out = summary(Trace(entries=refit + group))
    assert out["problems"]["job_store_entries"] == {}
    assert out["problems"]["job_store_entries_elsewhere"] == []
    # a fourth entry into the campaign's nouns, from elsewhere (as free_workers read the
    # campaigns that want a worker from fanout), and the exchange from elsewhere (as Peers
    # published a group's draws from fanout)
    fourth = job(f"{STORE}.jobs", "wanting_workers", "fbgp_al.service.jobs.fanout")
    peers = job(EXCHANGE, "publish", "fbgp_al.service.jobs.fanout", thread=3)
    out = summary(Trace(entries=[*refit, fourth, *group, peers]))
    assert list(out["problems"]["job_store_entries"]) == ["1. refit"]
    assert out["problems"]["job_store_entries_elsewhere"] == [
        f"1. refit: fbgp_al.service.jobs.fanout -> {STORE}.jobs:wanting_workers",
        f"2. refit_chains: fbgp_al.service.jobs.fanout -> {EXCHANGE}:publish",
    ]
    # the same jobs one after another on one worker: each counts its own
    serial = summary(Trace(entries=refit + [start("refit_merge"), *refit[1:]]))
    assert serial["problems"]["job_store_entries"] == {}
    assert list(serial["job_store_calls"]) == ["1. refit", "2. refit_merge"]


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


def test_a_sampler_calling_a_job_back_is_caught_and_a_job_driving_its_steps_is_not():
    """The math (a chain group's sampling, below worker.fitting) calling a job's object as it
    samples, through a callable it was given: both the math entering the sampler's file again
    and the math entering the jobs are call-backs. The same sampling as a generator whose job
    publishes each check and sends the answer back: none."""
    publish = _function_of("service/jobs/fanout.py", "def publish(theta):\n    return theta\n")
    more = _function_of(
        "worker/fitting/posteriors.py",
        "def more(d):\n    return publish(d)\n",
        {"publish": publish},
    )
    nuts = _function_of("worker/nuts.py", "def sample(more):\n    return more(1)\n")
    chains = _function_of(
        "worker/fitting/posteriors.py",
        "def chains():\n    return sample(more)\n",
        {"sample": nuts, "more": more},
    )
    refit_chains = _function_of(
        "service/jobs/__init__.py", "def refit_chains():\n    return chains()\n", {"chains": chains}
    )
    tracer = Tracer()
    with tracer, tracer.recorded("refit"):
        refit_chains()
    posteriors = "fbgp_al.worker.fitting.posteriors"
    assert summary(tracer.trace)["problems"]["callbacks"] == [
        f"{MATH} -> {posteriors}:more",
        f"{MATH} -> fbgp_al.service.jobs.fanout:publish",
    ]
    grouped = _function_of(
        "worker/fitting/posteriors.py",
        "def grouped():\n    together = yield sample(int)\n    return together\n",
        {"sample": nuts},
    )
    judged = _function_of(
        "service/jobs/__init__.py",
        "def judged(steps):\n"
        "    check = next(steps)\n"
        "    try:\n"
        "        steps.send(publish(check))\n"
        "    except StopIteration as done:\n"
        "        return done.value\n",
        {"publish": publish},
    )
    tracer = Tracer()
    with tracer, tracer.recorded("refit"):
        assert judged(grouped()) == 1
    out = summary(tracer.trace)
    assert out["problems"]["callbacks"] == []
    assert out["calls"] == [
        f"refit: {OUTSIDE} -> {JOB}:judged",
        f"refit: {JOB} -> {posteriors}:grouped",
        f"refit: {JOB} -> fbgp_al.service.jobs.fanout:publish",
    ]
    assert "fbgp_al.worker.nuts" in out["math"]


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
    # the refit found the other worker idle: its chains as two groups, then the merge, whose
    # scoring kept a part for the other worker; every job's entries from the job's module
    jobs = {job.split(". ", 1)[1]: calls for job, calls in out["job_store_calls"].items()}
    kinds = [job.split(". ", 1)[1] for job in out["job_store_calls"]]
    assert kinds[:3] == ["refit", "refit_chains", "refit_chains"] and "refit_merge" in kinds
    assert jobs["refit"] == [
        f"{JOB} -> {STORE}.refits:inputs",
        f"{JOB} -> {STORE}.jobs:track",
        f"{JOB} -> {STORE}.refits:note_merge",
    ]
    groups = [calls for job, calls in out["job_store_calls"].items() if "refit_chains" in job]
    for calls in groups:  # its inputs, then its draws and the others' at each check
        assert label_path.counted(calls) == [f"{JOB} -> {STORE}.refits:inputs"]
        assert {f"{JOB} -> {EXCHANGE}:publish", f"{JOB} -> {EXCHANGE}:notes_and_draws"} <= set(
            calls
        )
    assert label_path.counted(jobs["refit_merge"]) == [
        f"{JOB} -> {STORE}.refits:inputs",
        f"{JOB} -> {STORE}.models:candidates",
        f"{JOB} -> {STORE}.refits:finish",
    ]
    assert f"{JOB} -> {EXCHANGE}:keep_scoring" in jobs["refit_merge"]
    assert "fbgp_al.worker.nuts" in out["math"] and "fbgp_al.worker.fitting" in out["files"]
    assert "fbgp_al.worker.fitting.posteriors" in out["files"]  # the chain groups' steps
