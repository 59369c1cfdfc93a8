"""``fbgp-al label-path``: the product files one label goes through, from ``POST .../label`` to
the next point being ready (the refit it made due stored its model and ranking), traced in one
process: the API in process (FastAPI's test client) on a Redis of its own, the refit run by two
RQ workers in threads of the same process (``SimpleWorker``, no fork), so that it finds the
other idle and fans out: its chains as two chain groups that judge the sampling's target
together at each check, and a merge after them whose scoring gives the other worker a part.

Every call is watched (``sys.setprofile``, in every thread). A call from a frame of one product
file into another *enters* that file; a library's frames count as their caller's (the web
framework's calls into the middleware and the routes are the request's start). Every product
file counts: routers, schemas, middleware, dependencies, the vocabulary. The math a refit runs
below :mod:`worker.fitting` and its modules (NUTS, the GP, the acquisitions) is the refit's own
work (``bench-core`` measures it): its files are listed apart, and any call it makes out of the
math is checked. Four checks, each failing the command:

1. **call-back**: a file calling one of a layer its own may not import (:mod:`imports`'s
   layers: the math or the store calling the jobs or the API, the store calling the math), or
   a file that is still running below its caller;
2. **a request enters a file twice**: within the request, a file entered a second time to do
   work that calls on into other files. A *leaf* entry, one that calls no other product file
   (the key schema spelling a key, a rule of the loop, a check of the vocabulary), is a
   function call, not a visit: it is counted, never refused;
3. **a job enters the store** (``service/store/``) from anywhere but the job's own module
   (:data:`JOB_MODULE`), or its campaign's nouns more than :data:`STORE_ENTRIES` times. Each
   job counts apart (the refit, each chain group, the merge, a scoring part). What the parts of
   a fanned-out refit exchange while they run (:data:`EXCHANGE`: a chain group's draws at each
   check, a scoring's parts) is listed apart, not counted, for it grows with the checks and the
   parts; it too must come from the job's module. Building the store's object
   (:class:`service.store.CampaignStore`: no round trip to Redis) is listed, not counted;
4. **the store calls a job or the math**.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import inspect
import json
import logging
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fbgp_al.clients.ops import imports

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("service", "worker", "clients")
MATH_ENTRY = "fbgp_al.worker.fitting"  # below this module, the refit's math
MATH, OUTSIDE = "<math>", "<outside>"
JOB_MODULE = "fbgp_al.service.jobs"  # the refit job's own module
STORE = "fbgp_al.service.store"  # the campaign store: its nouns
STORE_ENTRIES = 3  # a job reads what it needs, the candidates once sampled, and writes
EXCHANGE = f"{STORE}.groups"  # what a fanned-out refit's parts exchange: counted apart
HARNESS = (["clients", "ops", "label_path"], ["clients", "ops", "thread_workers"])
POOL = 1100  # candidates: more than one scoring part (worker.gp.SCORE_ALIGN), two parts
BUILD = f"{STORE}:__init__"  # the store's object built: no round trip
SUSPENDABLE = inspect.CO_COROUTINE | inspect.CO_GENERATOR | inspect.CO_ASYNC_GENERATOR


@functools.lru_cache(maxsize=4096)
def module_of(filename: str, root: Path = ROOT) -> str | None:
    """The product module of a frame's file, or None for a library's (or the tracer's own and
    its workers', :data:`HARNESS`)."""
    try:
        parts = list(Path(filename).resolve().relative_to(root).with_suffix("").parts)
    except ValueError:
        return None
    if not parts or parts[0] not in PACKAGES or parts[:3] in HARNESS:
        return None
    return imports.module_name(Path(root, *parts).with_suffix(".py"), root)


def layer_of(module: str) -> str:
    """A file's layer (:func:`imports.layer`); the refit's math is the math's."""
    return "math" if module == MATH else imports.layer(module)


def in_store(module: str) -> bool:
    return module == STORE or module.startswith(STORE + ".")


@dataclass
class Entry:
    """A call from one file into another: the thread, the step it happened in (``request``,
    ``refit``), the caller's file (:data:`OUTSIDE`: a library's with no product frame below it;
    :data:`MATH`: the refit's math), the file entered and its function, the entry it was made
    within (None: none), and whether the file entered was running below the caller already."""

    thread: int
    step: str
    caller: str
    callee: str
    function: str
    parent: int | None = None
    reentrant: bool = False


@dataclass
class Trace:
    """The entries in order, and the math files the refit ran below :data:`MATH_ENTRY`."""

    entries: list[Entry] = field(default_factory=list)
    math: set[str] = field(default_factory=set)


class Tracer:
    """``sys.setprofile`` in this thread and every thread started while it runs: each frame's
    product file, a library's frames counted as their caller's, and each entry recorded with
    the entry it was made within."""

    def __init__(self, math_entry: str = MATH_ENTRY):
        self.math_entry = math_entry
        self.trace = Trace()
        self.stacks: dict[int, list[tuple[str, int | None]]] = {}
        self.lock = threading.Lock()
        self.step: str | None = None  # entries are recorded only within a step
        self.suspendable: dict[int, object] = {}

    def _profile(self, frame, event, arg):
        if event not in ("call", "return"):
            return
        stack = self.stacks.setdefault(threading.get_ident(), [])
        if event == "return":
            if stack:
                stack.pop()
            return
        caller = stack[-1][0] if stack else OUTSIDE
        own = module_of(frame.f_code.co_filename)
        module = own or caller
        resumed = False
        if frame.f_code.co_flags & SUSPENDABLE:  # a coroutine or generator: resumed, or new?
            resumed = id(frame) in self.suspendable
            self.suspendable[id(frame)] = frame  # held, so that no other frame takes its id
        if (caller == MATH or self._below(caller)) and module != caller and not self._below(module):
            if own is None or layer_of(own) in ("math", "vocabulary"):  # the math's own work
                if self.step is not None and own is not None:
                    self._note(self.trace.math.add, own)
                stack.append((MATH, None))
                return
            caller = MATH  # the math calling out of it: an entry, checked as any other
        index = None
        if module != caller and module != OUTSIDE and self.step is not None and not resumed:
            parent = next((i for _, i in reversed(stack) if i is not None), None)
            with self.lock:
                index = len(self.trace.entries)
                self.trace.entries.append(
                    Entry(
                        threading.get_ident(),
                        self.step,
                        caller,
                        module,
                        f"{module}:{frame.f_code.co_name}",
                        parent,
                        any(m == module for m, _ in stack),
                    )
                )
        stack.append((module, index))

    def _below(self, module: str) -> bool:
        """Whether ``module`` is the math's entry or one of its modules (``worker.fitting.*``)."""
        return module == self.math_entry or module.startswith(self.math_entry + ".")

    def _note(self, add, item) -> None:
        with self.lock:
            add(item)

    def __enter__(self):
        threading.setprofile(self._profile)
        sys.setprofile(self._profile)
        return self

    @contextlib.contextmanager
    def recorded(self, step: str):
        """Record the entries made meanwhile, as step ``step``."""
        self.step = step
        try:
            yield
        finally:
            self.step = None

    def __exit__(self, *exc):
        sys.setprofile(None)
        threading.setprofile(None)


def _beside(entries: list[Entry]) -> set[int]:
    """The threads whose first entry is into a refit's lease: its heartbeat, not the path."""
    first: dict[int, str] = {}
    for e in entries:
        first.setdefault(e.thread, e.callee)
    return {t for t, module in first.items() if module.endswith(".lease")}


def callbacks(entries: list[Entry]) -> list[str]:
    """Check 1: entries against the layers' arrows, or into a file running below the caller."""
    out = []
    for e in entries:
        if e.caller == OUTSIDE:
            continue
        allowed = imports.LAYERS[layer_of(e.caller)]
        if layer_of(e.callee) not in allowed or e.reentrant:
            out.append(f"{e.caller} -> {e.function}")
    return out


def entered_twice(entries: list[Entry], step: str = "request") -> dict[str, int]:
    """Check 2: the files the step enters more than once to do work that calls on into other
    files (leaf entries left out; entries from a library alone, the framework's, are the
    request's start). ``entries``: the whole trace (an entry's ``parent`` is its index)."""
    parents = {e.parent for e in entries if e.parent is not None}
    visits = Counter(
        e.callee
        for i, e in enumerate(entries)
        if e.step == step and e.caller != OUTSIDE and i in parents
    )
    return {module: k for module, k in visits.items() if k > 1}


def jobs_of(entries: list[Entry], step: str = "refit") -> dict[str, list[Entry]]:
    """The entries of each job the step ran, in order: a job starts with its worker's call into
    the job's module (an entry from :data:`OUTSIDE` into :data:`JOB_MODULE`, named
    ``<k>. <function>``) and has every entry its thread makes until that thread's next job.
    Entries of the step that no job made are under ``-``."""
    jobs: dict[str, list[Entry]] = {}
    current: dict[int, str] = {}
    started = 0
    for e in entries:
        if e.step != step:
            continue
        if e.caller == OUTSIDE and e.callee == JOB_MODULE:
            started += 1
            current[e.thread] = f"{started}. {e.function.split(':', 1)[1]}"
            jobs[current[e.thread]] = []
        else:
            jobs.setdefault(current.get(e.thread, "-"), []).append(e)
    return jobs


def job_store_entries(entries: list[Entry], step: str = "refit") -> dict[str, list[str]]:
    """Each job's entries into the store from outside it (check 3), in order, but the store's
    object built (:data:`BUILD`); the jobs that entered it not at all left out."""
    out = {}
    for job, made in jobs_of(entries, step).items():
        calls = [
            f"{e.caller} -> {e.function}"
            for e in made
            if in_store(e.callee) and not in_store(e.caller) and e.function != BUILD
        ]
        if calls:
            out[job] = calls
    return out


def counted(calls: list[str]) -> list[str]:
    """The calls of a job's that check 3 counts: into the campaign's nouns, not into what the
    parts of a fanned-out refit exchange while they run (:data:`EXCHANGE`: a chain group's
    draws at each check of its sampling, a scoring's parts), which grows with the checks and
    the parts and is listed apart."""
    return [c for c in calls if not c.split(" -> ", 1)[1].startswith(EXCHANGE + ":")]


def store_calls_up(entries: list[Entry]) -> list[str]:
    """Check 4: the store entering a job or the math."""
    return [
        f"{e.caller} -> {e.function}"
        for e in entries
        if in_store(e.caller) and layer_of(e.callee) in ("jobs", "math")
    ]


def summary(trace: Trace) -> dict:
    """The path's files by layer, in the order first entered, with how often each was entered;
    the four checks' findings; the refit's math; the heartbeat beside it (counted apart)."""
    beside = _beside(trace.entries)
    kept = [e for e in trace.entries if e.thread not in beside]
    files = list(dict.fromkeys(m for e in kept for m in (e.caller, e.callee)))
    files = [m for m in files if m not in (OUTSIDE, MATH)]
    store = job_store_entries(kept)
    problems = {
        "callbacks": callbacks(kept),
        "entered_twice": entered_twice(trace.entries),
        "job_store_entries": {
            job: calls for job, calls in store.items() if len(counted(calls)) > STORE_ENTRIES
        },
        "job_store_entries_elsewhere": [
            f"{job}: {c}"
            for job, calls in store.items()
            for c in calls
            if not c.startswith(JOB_MODULE + " ")
        ],
        "store_calls_up": store_calls_up(kept),
    }
    steps = {}
    for e in kept:
        if e.caller != OUTSIDE:
            steps.setdefault(e.step, Counter())[e.callee] += 1
    return {
        "files": files,
        "layers": {m: layer_of(m) for m in files},
        "entries": len(kept),
        "steps": {name: dict(c) for name, c in steps.items()},
        "job_store_calls": store,
        "problems": problems,
        "math": sorted(trace.math),
        "calls": [f"{e.step}: {e.caller} -> {e.function}" for e in kept],
        "heartbeat": [f"{e.caller} -> {e.function}" for e in trace.entries if e.thread in beside],
        "trace": [asdict(e) for e in trace.entries],
    }


def run(output: Path | None = None, math_entry: str = MATH_ENTRY) -> dict:
    """Start a Redis, make a campaign, label its first points, let its first model be stored,
    then trace one label (step ``request``) to its next model and ranking (step ``refit``: the
    refit, its chain groups, its merge and a scoring part, on two workers)."""
    from fastapi.testclient import TestClient
    from redis import Redis
    from rq import SimpleWorker

    from fbgp_al.clients.ops.stack import free_port, start_redis
    from fbgp_al.clients.ops.thread_workers import run_workers, shared_scoring
    from fbgp_al.service.app import app
    from fbgp_al.service.queues import QUEUES, SERIALIZER, PlainJob
    from fbgp_al.service.settings import Settings, get_settings

    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        redis_process = start_redis(Path(tmp), port, Path(tmp) / "redis.log", password="trace")
        try:
            url = f"redis://:trace@127.0.0.1:{port}/0"
            # the jobs' timeouts as long as a traced (slower) refit may need
            settings = Settings(redis_url=url, job_timeout_seconds=600.0)
            app.dependency_overrides[get_settings] = lambda: settings
            connection = Redis.from_url(url)

            def work() -> None:
                worker = SimpleWorker(
                    list(QUEUES), connection=connection, serializer=SERIALIZER, job_class=PlainJob
                )
                worker.work(burst=True, with_scheduler=False, logging_level="WARNING")

            # sampled to a target (its chain groups judge it together at each check), on a pool
            # of more candidates than a scoring part (two parts)
            body = {
                "name": "label-path",
                "inputs": [{"name": "x", "lower": 0.5, "upper": 2.5}],
                "pool": {"type": "grid", "points_per_dim": POOL},
                "pool_subsample": POOL,
                "initial_design": {"type": "maximin-lhs", "size": 3},
                "seed": 0,
                "max_labels": 10,
                "mcmc": {"chains": 2, "warmup": 20, "samples": 20, "draws": 30},
            }
            logging.getLogger("rq").setLevel(logging.WARNING)
            # the profiler is set before the test client starts its threads (a thread takes
            # it when it starts), and records from the label on
            with Tracer(math_entry) as tracer, TestClient(app) as client:
                created = client.post("/campaigns", json=body)
                assert created.status_code == 201, created.text
                campaign = created.json()["id"]

                def label() -> int:
                    ticket = client.get(f"/campaigns/{campaign}/next").json()["ticket"]
                    r = client.post(
                        f"/campaigns/{campaign}/label", json={"ticket": ticket, "y": 0.25}
                    )
                    return r.status_code

                for _ in range(3):
                    label()
                work()
                ticket = client.get(f"/campaigns/{campaign}/next").json()["ticket"]
                time.sleep(0.1)
                with tracer.recorded("request"):
                    r = client.post(
                        f"/campaigns/{campaign}/label", json={"ticket": ticket, "y": 0.5}
                    )
                with tracer.recorded("refit"), shared_scoring():
                    run_workers(connection)
                status = client.get(f"/campaigns/{campaign}").json()
            assert r.status_code == 201, r.text
            assert status["model_version"] == 4, status
        finally:
            app.dependency_overrides.clear()
            redis_process.terminate()
            redis_process.wait()
    out = summary(tracer.trace)
    if output:
        output.write_text(json.dumps(out, indent=1))
    return out


CHECKS = {
    "callbacks": "call-backs (a layer calling one it may not import, or a file still running)",
    "entered_twice": "files the request enters twice to do work",
    "job_store_entries": f"jobs entering the campaign's store more than {STORE_ENTRIES} times",
    "job_store_entries_elsewhere": "the jobs' entries into the store not from the job module",
    "store_calls_up": "the store calling a job or the math",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fbgp-al label-path", description=__doc__)
    parser.add_argument("--json", type=Path, help="write the whole trace here")
    parser.add_argument(
        "--math",
        default=MATH_ENTRY,
        help="the module whose callees are the refit's math (default %(default)s)",
    )
    args = parser.parse_args(argv)
    out = run(args.json, args.math)
    print(f"{len(out['files'])} product files, {out['entries']} entries")
    for step, files in out["steps"].items():
        print(f"  {step}:")
        for module, k in files.items():
            print(f"    {module}  ({out['layers'][module]}; entered {k})")
    print(f"the refit's math (below {args.math}): {len(out['math'])} files")
    print(f"the jobs' entries into the store: {len(out['job_store_calls'])} jobs")
    for job, calls in out["job_store_calls"].items():
        print(f"  {job}: {len(counted(calls))} (and {len(calls) - len(counted(calls))} apart)")
        for call, k in Counter(calls).items():
            print(f"    {call}" + (f"  x{k}" if k > 1 else ""))
    print(f"beside it, the refit's heartbeat: {len(out['heartbeat'])} entries")
    failed = False
    for key, words in CHECKS.items():
        found = out["problems"][key]
        failed |= bool(found)
        print(f"{'FAIL' if found else 'ok  '} {words}: {len(found)}")
        if isinstance(found, list):
            for item, k in Counter(found).items():
                print(f"    {item}" + (f"  x{k}" if k > 1 else ""))
        for item, value in found.items() if isinstance(found, dict) else ():
            print(f"    {item}: {len(counted(value)) if isinstance(value, list) else value}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
