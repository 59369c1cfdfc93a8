"""``fbgp-al label-path``: the product modules one label goes through, from ``POST .../label``
to the next point being ready (the refit it triggers stored its model and ranking), traced in
one process: the API in process (FastAPI's test client) on a Redis of its own, the refit run
by an RQ worker in the same process (``SimpleWorker``, no fork).

Every call is watched (``sys.setprofile``, in every thread): a call from a frame of one product
module into another is an entry into that module; a library's frames count as their caller's.
A room *re-entered* was entered, left, and entered again from outside; a *call-back* is an
entry into a room that is still running below the caller (a room calling back into one that
called it, directly or through others). The math a refit runs
(what :mod:`worker.fitting` calls: NUTS, the GP, the acquisitions) is the refit's own work
(``bench-core`` measures it), and is reported on its own line, not as the path's.
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
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from fbgp_al.clients.ops import imports

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("service", "worker", "clients")
# below this module, the refit's math: counted apart from the path
MATH_ENTRY = "fbgp_al.worker.fitting"
MATH, OUTSIDE = "<math>", "<outside>"
PLUMBING = {"fbgp_al.service.middleware", "fbgp_al.service.deps"}
SUSPENDABLE = inspect.CO_COROUTINE | inspect.CO_GENERATOR | inspect.CO_ASYNC_GENERATOR


@functools.lru_cache(maxsize=4096)
def room_of(filename: str) -> str | None:
    """The room of a frame's file: a module of a package's own (``service/loop.py``), or the
    subpackage a module is in, whose modules are one room behind one face (``service/store/``
    and ``service/keys.py``: :class:`service.store.CampaignStore`, the one object the routes and
    the jobs use; ``service/routes/``, ``service/schemas/``, the RQ glue of ``service/jobs/``);
    and none, as a library's, for the HTTP plumbing every request passes (middleware,
    dependencies) and the vocabulary every layer shares (``worker/vocabulary/``), which call no
    product code."""
    module = module_of(filename)
    if module is None or module in PLUMBING:
        return None
    if module == "fbgp_al.service.keys":
        return "fbgp_al.service.store"
    parts = module.split(".")
    if parts[1:3] == ["worker", "vocabulary"]:
        return None
    return ".".join(parts[:3])


def module_of(filename: str, root: Path = ROOT) -> str | None:
    """The product module of a frame's file, or None for a library's (or the tracer's own)."""
    try:
        parts = list(Path(filename).resolve().relative_to(root).with_suffix("").parts)
    except ValueError:
        return None
    if not parts or parts[0] not in PACKAGES or parts[:3] == ["clients", "ops", "label_path"]:
        return None
    return imports.module_name(Path(root, *parts).with_suffix(".py"), root)


@dataclass
class Trace:
    """The entries from one room into another, in order (``thread``, ``from``, ``into``, and the
    module entered), and the math modules the refit ran below :data:`MATH_ENTRY`."""

    entries: list[tuple[int, str, str, str]] = field(default_factory=list)
    math: set[str] = field(default_factory=set)
    callbacks: set[int] = field(default_factory=set)  # the entries that are call-backs


class Tracer:
    """``sys.setprofile`` in this thread and every thread started while it runs: each frame's
    product module, a library's frames counted as their caller's, and each entry recorded."""

    def __init__(self, math_entry: str = MATH_ENTRY):
        self.math_entry = math_entry
        self.trace = Trace()
        self.stacks: dict[int, list[str]] = {}
        self.lock = threading.Lock()
        self.recording = False  # the stacks are kept from the start; entries only while True
        self.suspendable: dict[int, object] = {}

    def _profile(self, frame, event, arg):
        if event not in ("call", "return"):
            return
        stack = self.stacks.setdefault(threading.get_ident(), [])
        if event == "return":
            if stack:
                stack.pop()
            return
        caller = stack[-1] if stack else OUTSIDE
        module = room_of(frame.f_code.co_filename) or caller
        resumed = False
        if frame.f_code.co_flags & SUSPENDABLE:  # a coroutine or generator: resumed, or new?
            resumed = id(frame) in self.suspendable
            self.suspendable[id(frame)] = frame  # held, so that no other frame takes its id
        if caller in (MATH, self.math_entry) and module not in (caller, self.math_entry):
            if self.recording:
                self._note(self.trace.math.add, module_of(frame.f_code.co_filename) or module)
            module = MATH  # the refit's math: its own work, not the path's
        elif module not in (caller, OUTSIDE) and self.recording and not resumed:
            actual = f"{module_of(frame.f_code.co_filename) or module}:{frame.f_code.co_name}"
            with self.lock:
                if module in stack:
                    self.trace.callbacks.add(len(self.trace.entries))
                self.trace.entries.append((threading.get_ident(), caller, module, actual))
        stack.append(module)

    def _note(self, add, item) -> None:
        with self.lock:
            add(item)

    def __enter__(self):
        threading.setprofile(self._profile)
        sys.setprofile(self._profile)
        return self

    @contextlib.contextmanager
    def recorded(self):
        self.recording = True
        try:
            yield
        finally:
            self.recording = False

    def __exit__(self, *exc):
        sys.setprofile(None)
        threading.setprofile(None)


def summary(trace: Trace) -> dict:
    """The path's rooms in the order first entered, how often each was entered from another
    (the framework's calls into the path, a route or a job, are its start, not counted), the
    rooms re-entered (over the whole path, and within each step: the request, the refit job),
    the call-backs, and the refit's math. The heartbeat beside a refit (a thread whose first
    entry is into its lease) is counted apart: it is not the label's path."""
    first: dict[int, str] = {}
    for thread, _, _, module in trace.entries:
        first.setdefault(thread, module)
    beside = {t for t, module in first.items() if module.split(":")[0].endswith(".lease")}
    kept = [(i, e) for i, e in enumerate(trace.entries) if e[0] not in beside]
    path = [(s, t) for _, (_, s, t, _) in kept]
    entered: Counter = Counter(target for source, target in path if source != OUTSIDE)
    steps: dict[str, Counter] = {}
    step = None
    for _, (_, source, target, actual) in kept:
        if source == OUTSIDE and target in ("fbgp_al.service.routes", "fbgp_al.service.jobs"):
            step = actual
            steps[step] = Counter()
        elif step is not None and source != OUTSIDE:
            steps[step][target] += 1
    return {
        "modules": list(dict.fromkeys(target for _, target in path)),
        "entries": len(path),
        "entered": dict(entered),
        "reentered": sorted(m for m, k in entered.items() if k > 1),
        "steps": {name: dict(c) for name, c in steps.items()},
        "callbacks": [f"{e[1]} -> {e[3]}" for i, e in kept if i in trace.callbacks],
        "math": sorted(trace.math),
        "sequence": [f"{source} -> {target}" for source, target in path],
        "calls": [f"{e[1]} -> {e[3]}" for _, e in kept],
        "heartbeat": [f"{s} -> {t}" for thread, s, t, _ in trace.entries if thread in beside],
    }


def run(output: Path | None = None, math_entry: str = MATH_ENTRY) -> dict:
    """Start a Redis, make a campaign, label its first points, let its first model be stored,
    then trace one label to its next model and ranking."""
    import time

    from fastapi.testclient import TestClient
    from redis import Redis
    from rq import SimpleWorker

    from fbgp_al.clients.ops.stack import free_port, start_redis
    from fbgp_al.service.app import app
    from fbgp_al.service.queues import QUEUES, SERIALIZER, PlainJob
    from fbgp_al.service.settings import Settings, get_settings

    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        redis_process = start_redis(Path(tmp), port, Path(tmp) / "redis.log", password="trace")
        try:
            url = f"redis://:trace@127.0.0.1:{port}/0"
            settings = Settings(redis_url=url)
            app.dependency_overrides[get_settings] = lambda: settings
            connection = Redis.from_url(url)

            def work() -> None:
                worker = SimpleWorker(
                    list(QUEUES), connection=connection, serializer=SERIALIZER, job_class=PlainJob
                )
                worker.work(burst=True, with_scheduler=False, logging_level="WARNING")

            body = {
                "name": "label-path",
                "inputs": [{"name": "x", "lower": 0.5, "upper": 2.5}],
                "pool": {"type": "grid", "points_per_dim": 64},
                "initial_design": {"type": "maximin-lhs", "size": 3},
                "seed": 0,
                "max_labels": 10,
                "mcmc": {"chains": 2, "warmup": 20, "samples": 20},
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
                with tracer.recorded():
                    r = client.post(
                        f"/campaigns/{campaign}/label", json={"ticket": ticket, "y": 0.5}
                    )
                    work()
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
    print(
        f"{len(out['modules'])} rooms, {out['entries']} entries, "
        f"{len(out['callbacks'])} call-backs, {len(out['reentered'])} re-entered"
    )
    for module in out["modules"]:
        k = out["entered"].get(module, 0)
        times = "entered by the framework" if k == 0 else f"entered {k} time{'s' * (k > 1)}"
        print(f"  {module}  ({times})")
    for step, rooms in out["steps"].items():
        listed = ", ".join(f"{room} {k}" for room, k in rooms.items())
        print(f"  within {step}: {listed or 'no other room'}")
    for callback in out["callbacks"]:
        print(f"  call-back: {callback}")
    print(f"the refit's math (below {args.math}): {', '.join(out['math'])}")
    print(f"beside it, the refit's heartbeat: {len(out['heartbeat'])} entries")
    return 0 if not out["callbacks"] and len(out["modules"]) <= 8 else 1


if __name__ == "__main__":
    sys.exit(main())
