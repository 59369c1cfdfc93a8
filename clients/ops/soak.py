"""``fbgp-al soak``: a bounded soak test of a whole stack under faults.

It starts its own stack (:class:`clients.ops.stack.LocalStack`: Redis with its append-only file
fsynced on every write, the API, pinned workers), creates a few small campaigns (1-D Gramacy &
Lee and 2-D Branin, sequential and parallel), and runs simulator threads that label them over
HTTP while faults are injected on a schedule spread over the run:

- ``worker``: SIGKILL of a busy worker's whole process group (its work horse included), started
  again about 3 s later;
- ``horse``: SIGKILL of a busy worker's work horse alone;
- ``redis``: SIGKILL of Redis, started again about 3 s later on the same port and data directory;
- ``api``: SIGKILL of the API, started again at once.

Recovery time: for a worker or a horse, seconds from the kill until every campaign that is not
done has a model newer than before the kill (or is done); for Redis and the API, seconds from the
kill until ``/readyz`` answers 200 and a label has been acknowledged after the restart.

At the end every acknowledged label (a 201, or a 200 for a repeat whose first answer was lost)
must be stored: by ticket and ``y`` in the store, and by ``y`` in ``GET .../observations``.
Stored labels that were never acknowledged (a 201 lost with a killed API, never asked again) are
allowed and counted as ``extra``. Every campaign must be done or have a newer model than at the
last fault (``progressing``); one that is neither gets up to 90 s more before it counts as stuck.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from redis.exceptions import RedisError
from rq.exceptions import NoSuchJobError

from fbgp_al.clients.client import FbgpClient
from fbgp_al.clients.errors import ApiError, RefitFailed
from fbgp_al.clients.ops.labelers import LABEL_PATIENCE, Labeler, Ledger
from fbgp_al.clients.ops.soak_report import MEMORY_SETTLE, check_labels
from fbgp_al.clients.ops.stack import LocalStack, fbgp_env
from fbgp_al.clients.simulators import get_simulator
from fbgp_al.service import queues
from fbgp_al.service.store import CampaignStore

FAULT_KINDS = ("worker", "horse", "redis", "api")
MCMC = {"chains": 2, "warmup": 60, "samples": 40, "thinning": 2}
RECOVERY_LIMIT = 120.0  # seconds a fault's recovery is waited for
STUCK_GRACE = 90.0  # seconds more a campaign that is neither done nor progressing gets
JUST_STARTED = 0.2  # seconds: a refit killed this soon after it began is killed mid-sampling


def campaign_kind(index: int) -> tuple[str, str]:
    """Campaign ``index``'s simulator and mode: sequential for even ``index``, parallel for odd;
    Gramacy & Lee 1-D or Branin 2-D so that every pairing comes up in four campaigns."""
    return ("gramacy1d", "branin")[(index + index // 2) % 2], ("sequential", "parallel")[index % 2]


def campaign_body(index: int, simulators: int, seed: int, max_labels: int) -> dict:
    """A small, fast campaign of :func:`campaign_kind` ``index``."""
    name, mode = campaign_kind(index)
    sim = get_simulator(name)
    pool = {"type": "grid", "points_per_dim": 1001 if sim.dim == 1 else 50}
    return {
        "name": f"soak-{index}-{name}-{mode}",
        "inputs": sim.inputs(),
        "pool": pool,
        "acquisition": "qb-mgp",
        "initial_design": {"type": "maximin-lhs", "size": 3},
        "max_labels": max_labels,
        "mcmc": dict(MCMC),
        "mode": mode,
        "max_pending": simulators,
        "lease_seconds": 20,
        "seed": seed + index,
    }


def _version(status) -> int:
    return -1 if status.model_version is None else status.model_version


class Soak:
    def __init__(
        self,
        stack: LocalStack,
        campaigns: list[str],
        ledger: Ledger,
        progress: Callable[[str], None],
    ):
        self.stack, self.campaigns, self.ledger, self.progress = stack, campaigns, ledger, progress
        self.api = FbgpClient(stack.url, token="", timeout=30.0, retries=12)
        self.redis = stack.client()
        self.store = CampaignStore(self.redis)
        self.t0 = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def statuses(self) -> dict:
        return {c: self.api.campaign(c) for c in self.campaigns}

    def versions(self) -> dict[str, int]:
        return {c: _version(s) for c, s in self.statuses().items()}

    def state(self, campaign: str) -> dict:
        """The campaign's refit state in the store (asked again while Redis reconnects)."""
        for attempt in range(20):
            try:
                return self.store.campaigns.state(campaign)
            except RedisError:
                if attempt == 19:
                    raise
                time.sleep(0.25)
        raise AssertionError("unreachable")

    def stored_versions(self) -> dict[str, int]:
        """The model versions as the store has them now (quicker than over HTTP)."""
        versions = {}
        for c in self.campaigns:
            version = self.state(c).get("model_version")
            versions[c] = -1 if version is None else int(version)
        return versions

    def running_refit(self) -> tuple[int, int, str, str] | None:
        """A worker whose work horse runs a campaign's refit now, begun less than
        :data:`JUST_STARTED` seconds ago (so that it is still sampling, not storing its model
        already): ``(worker index, horse pid, campaign, job id)``."""
        running, now = {}, time.time()
        for c in self.campaigns:
            state = self.store.campaigns.state(c)
            started = float(state.get("started_at") or 0.0)
            if (
                state.get("refit") == "running"
                and state.get("refit_job")
                and (now - started < JUST_STARTED)
            ):
                running[state["refit_job"]] = c
        if not running:
            return None
        pids = {p.pid: k for k, p in enumerate(self.stack.workers) if p is not None}
        for worker in queues.workers(self.redis):
            job, k = worker.get_current_job_id(), pids.get(worker.pid)
            if job in running and k is not None:
                horse = self.stack.horse_of(k)
                if horse is not None:
                    return k, horse, running[job], job
        return None

    def busy_worker(self, seconds: float) -> tuple[int, int | None, str | None, str | None]:
        """:meth:`running_refit`, waited for up to ``seconds``; else worker 0, its work horse if
        any, and None."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with contextlib.suppress(RedisError):
                found = self.running_refit()
                if found is not None:
                    return found
            time.sleep(0.05)
        return 0, self.stack.horse_of(0), None, None

    def interrupted(self, campaign: str | None, job: str | None, version: int) -> bool:
        """Whether refit ``job`` of ``campaign`` is still in charge with no newer model than
        ``version``: killed before it stored its model."""
        if campaign is None:
            return False
        state = self.state(campaign)
        stored = int(state["model_version"]) if state.get("model_version") else -1
        return state.get("refit_job") == job and stored == version

    def newer_model(self, campaign: str, version: int, deadline: float) -> bool:
        """Whether ``campaign`` is done or has a model newer than ``version`` by ``deadline``
        (``time.monotonic()``): :meth:`FbgpClient.wait_for_model` in steps of a second, riding
        out transient errors and failed refits (one is revived)."""
        while True:
            with contextlib.suppress(ApiError, httpx.HTTPError, RefitFailed, TimeoutError):
                if self.api.campaign(campaign).state == "done":
                    return True
                step = min(1.0, deadline - time.monotonic())
                self.api.wait_for_model(campaign, version + 1, timeout=max(step, 0.0), poll=0.25)
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.25)

    def wait_models(self, before: dict[str, int], kill: float) -> float | None:
        """Seconds from ``kill`` until every campaign not done has a model newer than
        ``before`` (None after :data:`RECOVERY_LIMIT`). Versions only grow and done is final,
        so the campaigns can be waited for one after another."""
        deadline = kill + RECOVERY_LIMIT
        if all(self.newer_model(c, before[c], deadline) for c in self.campaigns):
            return time.monotonic() - kill
        return None

    def wait_service(self, kill: float, restarted: float) -> tuple[float | None, bool]:
        """Seconds from ``kill`` until ``/readyz`` says ready and a label has been acknowledged
        after ``restarted`` (or every campaign is done: then no label can come), and whether a
        label came."""
        ready = False
        while time.monotonic() - kill < RECOVERY_LIMIT:
            with contextlib.suppress(ApiError, httpx.HTTPError):
                ready = ready or self.api.readyz().ready
                if ready and self.ledger.last_ack > restarted:
                    return time.monotonic() - kill, True
                if ready and all(s.state == "done" for s in self.statuses().values()):
                    return time.monotonic() - kill, False
            time.sleep(0.1)
        return None, False

    def inject(self, kind: str) -> dict:
        stack = self.stack
        fault: dict = {"kind": kind, "at": round(self.now(), 1)}
        if kind in ("worker", "horse"):
            k, horse, refit_of, job = self.busy_worker(30.0)
            before = self.stored_versions()
            fault.update(worker=k, refit_of=refit_of, at=round(self.now(), 1))
            kill = time.monotonic()
            what = f"refit of {refit_of} running" if refit_of else "no refit found running"
            if kind == "worker":
                stack.kill_worker(k)  # the worker and its work horse
            elif horse is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(horse, signal.SIGKILL)
            fault["interrupted"] = self.interrupted(refit_of, job, before.get(refit_of, -1))
            if fault["interrupted"]:
                what += ", killed before it stored its model"
            if kind == "worker":
                self.progress(
                    f"soak: {fault['at']:6.1f} s  SIGKILL worker {k}'s process group ({what})"
                )
                time.sleep(3.0)
                stack.start_worker(k)
            else:
                self.progress(
                    f"soak: {fault['at']:6.1f} s  SIGKILL work horse {horse} of worker {k} ({what})"
                )
            seconds = self.wait_models(before, kill)
            label_after = None
        elif kind == "redis":
            kill = time.monotonic()
            stack.kill_redis()
            self.progress(f"soak: {fault['at']:6.1f} s  SIGKILL Redis")
            time.sleep(3.0)
            stack.start_redis()
            seconds, label_after = self.wait_service(kill, time.monotonic())
        elif kind == "api":
            kill = time.monotonic()
            stack.kill_api()
            self.progress(f"soak: {fault['at']:6.1f} s  SIGKILL API")
            stack.start_api()
            seconds, label_after = self.wait_service(kill, time.monotonic())
        else:
            raise ValueError(kind)
        fault["recovery_seconds"] = None if seconds is None else round(seconds, 2)
        if label_after is not None:
            fault["label_after"] = label_after
        said = "not recovered" if seconds is None else f"recovered in {seconds:.1f} s"
        self.progress(f"soak: {self.now():6.1f} s  {kind}: {said}")
        return fault


def _refit_state(soak: Soak, campaign: str) -> dict:
    """The campaign's refit state in the store, with its job's status and the ages in seconds."""
    state, now = soak.state(campaign), time.time()
    for key in ("queued_at", "started_at", "heartbeat"):
        if state.get(key):
            state[key + "_age"] = round(now - float(state[key]), 1)
    try:
        job = queues.fetch_job(state.get("refit_job", ""), soak.redis)
        state["job_status"], state["job_worker"] = str(job.get_status()), job.worker_name
    except NoSuchJobError:
        state["job_status"] = "missing"
    return state


def run_soak(
    seconds: float = 180,
    campaigns: int = 3,
    simulators_per_campaign: int = 2,
    workers: int = 2,
    data_dir: Path | None = None,
    seed: int = 0,
    progress: Callable[[str], None] = print,
    max_labels: int | None = None,
    faults: tuple[str, ...] = FAULT_KINDS,
    memory: bool = False,
) -> dict:
    """Run the soak (module docstring) for about ``seconds`` of labeling plus the recovery and
    progress waits; its figures as a dict. ``memory``: with Redis's memory (:func:`redis_memory`)
    at the start, at its peak, and once the refits have ended.

    ``max_labels`` per campaign (default ``1.5 * seconds``, at least 60: more than the campaigns
    can label in that time here, so that they are still running when the faults come).
    ``faults``: the kinds injected, in this order, once per 90 s of ``seconds`` (at least once).
    """
    unknown = set(faults) - set(FAULT_KINDS)
    if unknown:
        raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {FAULT_KINDS}")
    if max_labels is None:
        max_labels = max(60, round(1.5 * seconds))
    temporary = data_dir is None
    with contextlib.ExitStack() as cleanup:
        if temporary:
            data_dir = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="soak-")))
        stack = LocalStack(Path(data_dir), workers=workers, env=fbgp_env())
        try:
            stack.start()
            start = redis_memory(stack) if memory else None
            report = _soak(
                stack,
                seconds,
                campaigns,
                simulators_per_campaign,
                seed,
                progress,
                max_labels,
                tuple(faults),
            )
            if memory:
                report["redis_memory"] = dict(start=start, **_memory_after(stack, progress))
            if not temporary:  # the caller's data directory: the stack's logs stay there
                report["data_dir"] = str(stack.data_dir)
            return report
        finally:
            stack.stop()


def redis_memory(stack: LocalStack) -> dict:
    """Redis's memory now and at its peak (MB), and how many job records it holds."""
    with stack.client() as redis:
        info = redis.info("memory")
        jobs = sum(1 for key in redis.scan_iter("rq:job:*", count=1000) if key.count(b":") == 2)
    mb = 1e6
    return {
        "mb": round(info["used_memory"] / mb, 1),
        "peak_mb": round(info["used_memory_peak"] / mb, 1),
        "jobs": jobs,
    }


def _memory_after(stack: LocalStack, progress: Callable[[str], None]) -> dict:
    """Redis's memory once no worker runs a job any more, then :data:`MEMORY_SETTLE` s later."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and any(stack.horse_of(k) for k in range(len(stack.workers))):
        time.sleep(1.0)
    ended = redis_memory(stack)
    progress(f"soak: refits ended, Redis at {ended['mb']} MB; waiting {MEMORY_SETTLE:.0f} s")
    time.sleep(MEMORY_SETTLE)
    return {"refits_ended": ended, "settled": redis_memory(stack)}


def _soak(
    stack: LocalStack,
    seconds: float,
    n_campaigns: int,
    n_simulators: int,
    seed: int,
    progress: Callable[[str], None],
    max_labels: int,
    kinds: tuple[str, ...],
) -> dict:
    ledger, stop = Ledger(), threading.Event()
    bodies = [campaign_body(i, n_simulators, seed, max_labels) for i in range(n_campaigns)]
    with FbgpClient(stack.url, token="") as api:
        ids = [api.create_campaign(body).id for body in bodies]
    for c, body in zip(ids, bodies, strict=True):
        progress(f"soak: campaign {c}: {body['name']}, {body['max_labels']} labels")
    soak = Soak(stack, ids, ledger, progress)
    threads = [
        Labeler(stack.url, c, campaign_kind(i)[0], [seed, i, j], ledger, stop)
        for i, c in enumerate(ids)
        for j in range(n_simulators)
    ]
    for thread in threads:
        thread.start()
    rounds = max(1, round(seconds / 90))
    plan = kinds * rounds
    schedule = [seconds * (i + 1) / (len(plan) + 1) for i in range(len(plan))]
    faults, last_versions, waiting = [], {}, []
    try:
        for when, kind in zip(schedule, plan, strict=True):
            time.sleep(max(0.0, when - soak.now()))
            last_versions = soak.versions()
            faults.append(soak.inject(kind))
        time.sleep(max(0.0, seconds - soak.now()))
        # done, or a newer model than at the last fault; else up to STUCK_GRACE s more
        deadline = time.monotonic() + STUCK_GRACE
        waiting = [c for c in ids if not soak.newer_model(c, last_versions.get(c, -1), deadline)]
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=LABEL_PATIENCE + 40)
    elapsed = soak.now()
    progress(f"soak: {elapsed:6.1f} s  simulators stopped")
    rows = []
    for i, c in enumerate(ids):
        status = soak.api.campaign(c)
        check = check_labels(stack, soak.api, c, ledger.of(c))
        progressing = _version(status) > last_versions.get(c, -1)
        rows.append(
            {
                "id": c,
                "name": bodies[i]["name"],
                "mode": bodies[i]["mode"],
                "n_labeled": status.n_labeled,
                "max_labels": status.max_labels,
                "model_version": status.model_version,
                "state": status.state,
                "progressing": status.state == "done" or progressing,
                "stuck": c in waiting,
                **check,
            }
        )
        if c in waiting:  # what it waits for, to tell why
            rows[-1]["refit_state"] = _refit_state(soak, c)
    soak.api.close()
    total = {
        k: sum(r[k] for r in rows)
        for k in ("acknowledged", "stored", "lost", "lost_y", "extra", "observations")
    }
    return {
        "seconds": seconds,
        "elapsed_seconds": round(elapsed, 1),
        "campaigns": n_campaigns,
        "simulators": n_campaigns * n_simulators,
        "workers": len(stack.workers),
        "seed": seed,
        "labels_acknowledged": total["acknowledged"],
        "labels_stored": total["stored"],
        "lost": total["lost"],
        "lost_y": total["lost_y"],
        "extra": total["extra"],
        "acknowledged_by_repeat": ledger.repeats,
        "labels_rejected": dict(ledger.rejected),
        "labels_unanswered": ledger.unanswered,
        "transient_errors": dict(ledger.errors),
        "faults": faults,
        "unrecovered": sum(f["recovery_seconds"] is None for f in faults),
        "campaign_details": rows,
        "stuck": sum(r["stuck"] for r in rows),
    }
