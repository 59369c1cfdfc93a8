"""``fbgp-al soak --adversarial``: a well-behaved campaign's pace alone, and beside a greedy
tenant on the same stack.

It starts its own stack (:class:`clients.ops.stack.LocalStack`) and runs two phases of
``seconds`` each. In both, a fresh well-behaved campaign (1-D Gramacy & Lee, sequential, small
MCMC) is labeled by one simulator, and every wait for a point is timed: from the answer to one
label (or the start) until ``/next`` hands out the next point. In the second phase a greedy
tenant works beside it, within every limit the service states (:class:`service.settings.Settings`):

- ``mcmc``: a campaign with the most NUTS iterations a refit may run, fed a label whenever a
  model arrives, so that its refits never stop;
- ``evaluate``: several threads posting ``/evaluate`` with the most test points allowed, back to
  back, to one campaign;
- ``pool``: a parallel 10-D campaign with the largest grid, the most points out at once, BALD and
  the largest pool subsample that scoring allows, whose simulator takes every point it can;
- ``calls``: four campaigns, each keeping one ``/predict`` of 100,000 points out, back to back
  (each within its own ``limit_model_calls``: together they would hold four workers);
- ``imports``: two campaigns whose first model is quick (3 labels), then 1,500 labels imported
  at once each (a refit judged by its last time would take the short lane, the light worker's).

At the end of the second phase the greedy campaigns are deleted, and the seconds until no job of
theirs runs on a worker are reported. Every label the service acknowledged must be stored.
The target: the well-behaved campaign's labels per minute and worst wait within 2x of its pace
alone.
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np

from fbgp_al.clients.client import ApiError, FbgpClient, Pending
from fbgp_al.clients.ops.labelers import Labeler, Ledger, error_kind
from fbgp_al.clients.ops.soak import MCMC
from fbgp_al.clients.ops.soak_report import check_labels
from fbgp_al.clients.ops.stack import LocalStack, fbgp_env
from fbgp_al.clients.simulators import get_simulator
from fbgp_al.service import queues
from fbgp_al.service.settings import Settings

EVALUATE_THREADS = 4
CALL_CAMPAIGNS = 4  # campaigns each keeping one /predict of PREDICT_POINTS out
PREDICT_POINTS = 100_000
IMPORT_CAMPAIGNS = 2  # campaigns each importing IMPORT_LABELS labels after a 3-label model
IMPORT_LABELS = 1_500
TARGET_RATIO = 2.0  # the well-behaved campaign's pace with the greedy tenant, at most this worse


class TimedLabeler(Labeler):
    """A :class:`clients.ops.labelers.Labeler` that asks again soon after a 202, so that its waits
    measure the service, not its own sleeps."""

    pending_pause = 0.5


def well_behaved_body(seed: int) -> dict:
    sim = get_simulator("gramacy1d")
    return {
        "name": "well-behaved",
        "inputs": sim.inputs(),
        "pool": {"type": "grid", "points_per_dim": 1001},
        "acquisition": "qb-mgp",
        "initial_design": {"type": "maximin-lhs", "size": 3},
        "max_labels": 1000,
        "mcmc": dict(MCMC),
        "seed": seed,
    }


def _inputs(d: int) -> list[dict]:
    return [{"name": f"x{i}", "lower": 0.0, "upper": 1.0} for i in range(d)]


def greedy_bodies(limits: Settings, seed: int) -> dict[str, dict]:
    """The greedy tenant's campaigns, each at the limits the service states."""
    per_chain = limits.limit_mcmc_iterations // 2
    mcmc = {"chains": 2, "warmup": min(10_000, per_chain // 2), "thinning": 10}
    mcmc["samples"] = min(10_000, per_chain - mcmc["warmup"])
    d, k = 10, 2
    while (k + 1) ** d <= limits.limit_grid_points:
        k += 1
    pending = min(limits.limit_pending, 1000)
    draws = 2 * 50  # the pool campaign's acquisition draws: chains x samples / thinning
    subsample = max(1, min(1_000_000, limits.limit_scoring_work // draws))
    small = {
        "inputs": _inputs(2),
        "max_labels": 2000,
        "mcmc": dict(MCMC),
        "seed": seed,
        "pool": {"type": "grid", "points_per_dim": 100},
    }
    calls = {f"calls-{k}": dict(small, name=f"greedy-calls-{k}") for k in range(CALL_CAMPAIGNS)}
    imports = {
        f"imports-{k}": dict(small, name=f"greedy-imports-{k}") for k in range(IMPORT_CAMPAIGNS)
    }
    return {
        **calls,
        **imports,
        "mcmc": {
            "name": "greedy-mcmc",
            "inputs": _inputs(2),
            "max_labels": 1000,
            "pool": {"type": "grid", "points_per_dim": 100},
            "mcmc": mcmc,
            "seed": seed,
        },
        "evaluate": {
            "name": "greedy-evaluate",
            "inputs": _inputs(2),
            "max_labels": 1000,
            "pool": {"type": "grid", "points_per_dim": 100},
            "mcmc": dict(MCMC),
            "seed": seed,
        },
        "pool": {
            "name": "greedy-pool",
            "inputs": _inputs(d),
            "max_labels": 1000,
            "pool": {"type": "grid", "points_per_dim": k},
            "pool_subsample": subsample,
            "acquisition": "bald",
            "mode": "parallel",
            "max_pending": pending,
            "mcmc": {"chains": 2, "warmup": 50, "samples": 100, "thinning": 2},
            "seed": seed,
        },
    }


class Greedy:
    """The greedy tenant's threads; ``answers`` counts its calls' outcomes by kind."""

    def __init__(
        self, url: str, limits: Settings, seed: int, ledger: Ledger, stop: threading.Event
    ):
        self.url, self.limits, self.ledger, self.stop = url, limits, ledger, stop
        self.rng = np.random.default_rng(seed)
        self.bodies = greedy_bodies(limits, seed)
        self.ids: dict[str, str] = {}
        self.answers: Counter = Counter()
        self._lock = threading.Lock()
        self.writers: list[threading.Thread] = []  # the threads that label
        self.callers: list[threading.Thread] = []  # the threads of model calls

    def count(self, what: str) -> None:
        """One answer of the phase (one that comes after its end is not counted)."""
        with self._lock:
            if not self.stop.is_set():
                self.answers[what] += 1

    def start(self) -> None:
        with FbgpClient(self.url, token="", timeout=60.0) as api:
            for kind, body in self.bodies.items():
                self.ids[kind] = api.create_campaign(body).id
            x = self.rng.uniform(size=(8, 2))
            for kind in self.ids:
                if kind == "mcmc" or kind == "evaluate" or kind.startswith("calls-"):
                    api.import_observations(
                        self.ids[kind], x.tolist(), np.sin(6 * x).sum(1).tolist()
                    )
                elif kind.startswith("imports-"):
                    api.import_observations(
                        self.ids[kind], x[:3].tolist(), np.sin(6 * x[:3]).sum(1).tolist()
                    )
        writers = [self._mcmc, self._pool]
        writers += [lambda k=k: self._imports(f"imports-{k}") for k in range(IMPORT_CAMPAIGNS)]
        callers = [self._evaluate] * EVALUATE_THREADS
        callers += [lambda k=k: self._calls(f"calls-{k}") for k in range(CALL_CAMPAIGNS)]
        self.writers = [threading.Thread(target=run, daemon=True) for run in writers]
        self.callers = [threading.Thread(target=run, daemon=True) for run in callers]
        for thread in self.writers + self.callers:
            thread.start()

    def _mcmc(self) -> None:
        """A label whenever a model arrives: a refit at the limit runs all the time."""
        campaign = self.ids["mcmc"]
        with FbgpClient(self.url, token="", timeout=60.0) as api:
            while not self.stop.is_set():
                with contextlib.suppress(ApiError, httpx.HTTPError):
                    status = api.campaign(campaign)
                    if status.refit == "idle":
                        x = self.rng.uniform(size=(1, 2))
                        api.import_observations(campaign, x.tolist(), [float(np.sin(6 * x).sum())])
                        self.count("mcmc label")
                self.stop.wait(1.0)

    def _evaluate(self) -> None:
        campaign = self.ids["evaluate"]
        m = self.limits.limit_evaluate_points
        rng = np.random.default_rng(self.rng.integers(2**32))
        # no retries: each 429 or 503 is an answer to count, and the thread asks again
        with FbgpClient(self.url, token="", timeout=150.0, retries=0) as api:
            while not self.stop.is_set():
                x = rng.uniform(size=(m, 2))
                try:
                    api.evaluate(campaign, x.tolist(), np.sin(6 * x).sum(1).tolist())
                    self.count("evaluate 200")
                except ApiError as error:
                    self.count(f"evaluate {error.status_code}")
                    self.stop.wait(1.0)
                except httpx.HTTPError as error:
                    self.count(f"evaluate {type(error).__name__}")

    def _calls(self, kind: str) -> None:
        """One ``/predict`` of :data:`PREDICT_POINTS` points out at a time, back to back."""
        campaign = self.ids[kind]
        rng = np.random.default_rng(self.rng.integers(2**32))
        with FbgpClient(self.url, token="", timeout=300.0, retries=0) as api:
            while not self.stop.is_set():
                try:
                    api.predict(campaign, rng.uniform(size=(PREDICT_POINTS, 2)).tolist())
                    self.count("predict 200")
                except ApiError as error:
                    self.count(f"predict {error.status_code}")
                    self.stop.wait(1.0)
                except httpx.HTTPError as error:
                    self.count(f"predict {type(error).__name__}")

    def _imports(self, kind: str) -> None:
        """Once its 3-label model is stored, :data:`IMPORT_LABELS` labels imported at once."""
        campaign = self.ids[kind]
        rng = np.random.default_rng(self.rng.integers(2**32))
        with FbgpClient(self.url, token="", timeout=60.0) as api:
            while not self.stop.is_set():
                with contextlib.suppress(ApiError, httpx.HTTPError):
                    if api.campaign(campaign).model_version == 3:
                        x = rng.uniform(size=(IMPORT_LABELS, 2))
                        api.import_observations(campaign, x.tolist(), np.sin(6 * x).sum(1).tolist())
                        self.count("import 201")
                        return
                self.stop.wait(0.5)

    def _pool(self) -> None:
        """Takes every point it can; labels one in four of them, a second later."""
        campaign = self.ids["pool"]
        out: list[str] = []
        with FbgpClient(self.url, token="", timeout=60.0) as api:
            while not self.stop.is_set():
                try:
                    point = api.try_next(campaign, wait=2.0)
                except (ApiError, httpx.HTTPError) as error:
                    self.count(f"pool next {error_kind(error)}")
                    self.stop.wait(1.0)
                    continue
                if point is None:
                    return
                if isinstance(point, Pending):
                    self.count("pool next 202")
                    self.stop.wait(1.0)
                    continue
                self.count("pool next 200")
                out.append(point.ticket)
                if len(out) % 4 == 0:
                    self.stop.wait(1.0)
                    y = float(np.sin(6 * np.asarray(point.x)).sum())
                    with contextlib.suppress(ApiError, httpx.HTTPError):
                        api.label(campaign, point.ticket, y)
                        self.ledger.ack(campaign, point.ticket, y, True)

    def join(self, threads: list[threading.Thread]) -> None:
        for thread in threads:
            thread.join(timeout=200)


def _phase(
    stack: LocalStack, seconds: float, seed: int, greedy: bool, progress: Callable[[str], None]
) -> dict:
    ledger, stop = Ledger(), threading.Event()
    with FbgpClient(stack.url, token="") as api:
        campaign = api.create_campaign(well_behaved_body(seed)).id
    tenant = Greedy(stack.url, Settings(), seed, ledger, stop) if greedy else None
    if tenant is not None:
        tenant.start()
    labeler = TimedLabeler(stack.url, campaign, "gramacy1d", [seed, 0], ledger, stop)
    began = time.monotonic()
    labeler.start()
    time.sleep(seconds)
    stop.set()
    labeler.join(timeout=120)
    elapsed = time.monotonic() - began
    row: dict = {"greedy": greedy, "seconds": round(elapsed, 1)}
    with FbgpClient(stack.url, token="", timeout=60.0) as api:
        acked = ledger.of(campaign)
        waits = labeler.waits
        row.update(
            labels=len(acked),
            labels_per_minute=round(60 * len(acked) / elapsed, 1),
            worst_wait_seconds=round(max(waits), 2) if waits else None,
            median_wait_seconds=round(statistics.median(waits), 2) if waits else None,
            check=check_labels(stack, api, campaign, acked),
        )
        if tenant is not None:
            tenant.join(tenant.writers)  # every label it sent answered
            row["greedy_answers"] = dict(tenant.answers)
            row["greedy_checks"] = {
                kind: check_labels(stack, api, c, ledger.of(c)) for kind, c in tenant.ids.items()
            }
            deleted = time.monotonic()
            for c in tenant.ids.values():  # its model calls still out end with their campaign
                api.delete_campaign(c)
            tenant.join(tenant.callers)
            row["workers_free_after_delete_seconds"] = _workers_free(stack, tenant.ids, deleted)
    progress(
        f"soak --adversarial: {'with' if greedy else 'without'} the greedy tenant: "
        f"{row['labels']} labels, worst wait {row['worst_wait_seconds']} s"
    )
    return row


def _workers_free(
    stack: LocalStack, campaigns: dict[str, str], since: float, limit: float = 120.0
) -> float | None:
    """Seconds from ``since`` until no worker runs a job of ``campaigns`` (None: not in
    ``limit`` seconds)."""
    redis = stack.client()
    ids = set(campaigns.values())
    while time.monotonic() - since < limit:
        busy = False
        for worker in queues.workers(redis):
            job = worker.get_current_job()
            if job is not None and job.args and job.args[0] in ids:
                busy = True
        if not busy:
            return round(time.monotonic() - since, 2)
        time.sleep(0.2)
    return None


def run_adversarial(
    seconds: float = 90.0,
    workers: int = 2,
    seed: int = 0,
    data_dir: Path | None = None,
    progress: Callable[[str], None] = print,
) -> dict:
    """Both phases (module docstring) on one stack; the figures as a dict."""
    with contextlib.ExitStack() as cleanup:
        if data_dir is None:
            data_dir = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="soak-")))
        stack = LocalStack(Path(data_dir), workers=workers, env=fbgp_env())
        try:
            stack.start()
            alone = _phase(stack, seconds, seed, False, progress)
            beside = _phase(stack, seconds, seed, True, progress)
        finally:
            stack.stop()
    rate = alone["labels_per_minute"] / max(beside["labels_per_minute"], 1e-9)
    wait = (beside["worst_wait_seconds"] or float("inf")) / (alone["worst_wait_seconds"] or 1e-9)
    lost = sum(p["check"]["lost"] for p in (alone, beside))
    lost += sum(c["lost"] for c in beside.get("greedy_checks", {}).values())
    return {
        "seconds": seconds,
        "workers": workers,
        "seed": seed,
        "alone": alone,
        "beside_greedy": beside,
        "rate_ratio": round(rate, 2),
        "wait_ratio": round(wait, 2),
        "target_ratio": TARGET_RATIO,
        "lost": lost,
        "met": rate <= TARGET_RATIO and wait <= TARGET_RATIO and lost == 0,
    }


def summary(report: dict) -> str:
    a, b = report["alone"], report["beside_greedy"]
    return "\n".join(
        [
            f"soak --adversarial: {report['seconds']:g} s per phase, {report['workers']} workers",
            f"  alone:          {a['labels_per_minute']:6.1f} labels/min, worst wait "
            f"{a['worst_wait_seconds']} s, median {a['median_wait_seconds']} s",
            f"  beside greedy:  {b['labels_per_minute']:6.1f} labels/min, worst wait "
            f"{b['worst_wait_seconds']} s, median {b['median_wait_seconds']} s",
            f"  ratios: labels/min {report['rate_ratio']}x, worst wait {report['wait_ratio']}x "
            f"(target <= {report['target_ratio']:g}x)",
            f"  greedy answers: {b.get('greedy_answers')}",
            f"  workers free {b.get('workers_free_after_delete_seconds')} s after the greedy "
            "campaigns were deleted",
            f"  acknowledged labels lost: {report['lost']}",
        ]
    )
