"""``fbgp-al bench-service``: latency of the labeling loop against a stack it starts itself.

1. ``/next`` and ``/label`` latency (p50, p99) with a model in place while a worker refits after
   every label: a parallel-mode 2-D campaign hands out ranked points without waiting.
2. Label-to-next-point time of a sequential 2-D campaign at n = 40 with the paper's MCMC
   settings: from posting a label until ``/next`` (long-polling) returns the point chosen by the
   model that saw it, against that refit's own seconds; the difference is the pipeline's overhead.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from clients.client import FbgpClient
from clients.ops.stack import LocalStack
from clients.simulators import get_simulator
from worker.defaults import MCMC_DEFAULTS


@contextlib.contextmanager
def _service(workers: int, timeout: float):
    """A client of a stack of this machine's own, started and stopped around the block."""
    with (tempfile.TemporaryDirectory() as tmp, LocalStack(Path(tmp), workers=workers).start() as
          stack, httpx.Client(base_url=stack.url, timeout=timeout) as client):  # fmt: skip
        yield client


def _body(sim, mode: str, max_labels: int, mcmc: dict) -> dict:
    return {"name": f"bench-{mode}", "inputs": sim.inputs(), "pool": sim.pool,
            "acquisition": "qb-mgp", "max_labels": max_labels, "mcmc": dict(mcmc), "mode": mode,
            "max_pending": 10_000, "seed": 3}  # fmt: skip


def _api(client: httpx.Client) -> FbgpClient:
    """An SDK client of the same service, for waiting (the measured calls stay plain httpx)."""
    return FbgpClient(str(client.base_url), token="", timeout=client.timeout.read or 120)


def _wait_model(api: FbgpClient, campaign: str, version: int, seconds: float = 600) -> None:
    api.wait_for_model(campaign, version, timeout=seconds, poll=0.05)


def _initial(client, campaign, sim, rng, n):
    x = sim.lower + rng.random((n, sim.dim)) * (sim.upper - sim.lower)
    r = client.post(f"/campaigns/{campaign}/observations",
                    json={"x": x.tolist(), "y": sim.sample(x, rng).tolist()})  # fmt: skip
    r.raise_for_status()


def latency(client, sim, rng, requests: int) -> dict:
    campaign = client.post(
        "/campaigns", json=_body(sim, "parallel", 40 + 2 * requests, MCMC_DEFAULTS)
    ).json()["id"]
    _initial(client, campaign, sim, rng, 40)
    with _api(client) as api:
        _wait_model(api, campaign, 40)
    t_next, t_label = [], []
    for _ in range(requests):
        t = time.perf_counter()
        r = client.get(f"/campaigns/{campaign}/next")
        t_next.append(time.perf_counter() - t)
        if r.status_code != 200:
            continue
        point = r.json()
        y = float(sim.sample(np.array([point["x"]]), rng)[0])
        t = time.perf_counter()
        client.post(f"/campaigns/{campaign}/label", json={"ticket": point["ticket"], "y": y})
        t_label.append(time.perf_counter() - t)
    ms = lambda v, q: 1000 * float(np.quantile(v, q))  # noqa: E731
    out = {"next_p50_ms": ms(t_next, 0.5), "next_p99_ms": ms(t_next, 0.99),
           "label_p50_ms": ms(t_label, 0.5), "label_p99_ms": ms(t_label, 0.99),
           "requests": requests}  # fmt: skip
    print(f"/next  p50 {out['next_p50_ms']:.1f} ms  p99 {out['next_p99_ms']:.1f} ms   "
          f"/label p50 {out['label_p50_ms']:.1f} ms  p99 {out['label_p99_ms']:.1f} ms  "
          f"({requests} each, a refit running after every label)", flush=True)  # fmt: skip
    return out


def label_to_next(client, sim, rng, rounds: int) -> list[dict]:
    campaign = client.post(
        "/campaigns", json=_body(sim, "sequential", 40 + rounds + 1, MCMC_DEFAULTS)
    ).json()["id"]
    _initial(client, campaign, sim, rng, 39)
    with _api(client) as api:
        _wait_model(api, campaign, 39)
    rows = []
    point = client.get(f"/campaigns/{campaign}/next", params={"wait": 60}).json()
    for _ in range(rounds):
        y = float(sim.sample(np.array([point["x"]]), rng)[0])
        t = time.perf_counter()
        client.post(f"/campaigns/{campaign}/label", json={"ticket": point["ticket"], "y": y})
        r = client.get(f"/campaigns/{campaign}/next", params={"wait": 60})
        total = time.perf_counter() - t
        point = r.json()
        model = client.get(f"/campaigns/{campaign}/model").json()
        refit = model["diagnostics"]["refit_seconds"]
        rows.append({"n": point["model_version"], "total_s": total, "refit_s": refit,
                     "overhead_s": total - refit})  # fmt: skip
        share = 100 * (total - refit) / total
        print(f"n={point['model_version']}: label -> next point {total:.2f} s, refit "
              f"{refit:.2f} s, overhead {total - refit:.3f} s ({share:.1f}%)")  # fmt: skip
    return rows


def refit_time(client, sim, rng, rounds: int) -> list[float]:
    """Seconds from importing 40 points into a fresh 2-D campaign to its first model (5 chains,
    200 + 300, cold), ``rounds`` times."""
    mcmc = {**MCMC_DEFAULTS, "warm_start": False}
    times = []
    with _api(client) as api:
        for _ in range(rounds):
            body = _body(sim, "sequential", 41, mcmc)
            campaign = client.post("/campaigns", json=body).json()["id"]
            t = time.perf_counter()
            _initial(client, campaign, sim, rng, 40)
            _wait_model(api, campaign, 40)
            times.append(time.perf_counter() - t)
    return times


def throughput(client, sim, campaigns: int, simulators: int, seconds: float) -> dict:
    """Labels per minute from ``simulators`` threads (a trivial f) over ``campaigns``
    parallel-mode campaigns, and the longest any of them waited for a point."""
    import threading

    ids = []
    for _ in range(campaigns):
        body = dict(_body(sim, "parallel", 10_000, MCMC_DEFAULTS),
                    max_pending=simulators // campaigns)  # fmt: skip
        ids.append(client.post("/campaigns", json=body).json()["id"])
    stop = time.monotonic() + seconds
    counts, waits = [0] * simulators, [0.0] * simulators

    def simulate(k: int):
        campaign = ids[k % campaigns]
        with httpx.Client(base_url=str(client.base_url), timeout=120) as own:
            while time.monotonic() < stop:
                t = time.perf_counter()
                r = own.get(f"/campaigns/{campaign}/next", params={"wait": 10})
                if r.status_code != 200:
                    continue
                waits[k] = max(waits[k], time.perf_counter() - t)
                point = r.json()
                y = float(np.sin(3 * np.sum(point["x"])))
                own.post(f"/campaigns/{campaign}/label", json={"ticket": point["ticket"], "y": y})
                counts[k] += 1

    threads = [threading.Thread(target=simulate, args=(k,)) for k in range(simulators)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = sum(counts)
    out = {"labels": total, "per_minute": 60 * total / seconds, "longest_wait_s": max(waits)}
    print(f"{simulators} simulators on {campaigns} parallel campaigns for {seconds:.0f} s: "
          f"{total} labels, {out['per_minute']:.1f} per minute, longest wait for a point "
          f"{out['longest_wait_s']:.1f} s", flush=True)  # fmt: skip
    return out


def scaling(rounds: int) -> None:
    """A refit's wall time on one and on two pinned workers, measured one after the other."""
    sim = get_simulator("gramacy2d")
    rng = np.random.default_rng(0)
    result = {}
    for workers in (1, 2):
        with _service(workers, timeout=300) as client:
            result[workers] = refit_time(client, sim, rng, rounds)
        times = ", ".join(f"{t:.2f}" for t in result[workers])
        print(f"refit (5 chains, n=40, d=2) on {workers} worker(s): {times} s", flush=True)
    one, two = np.median(result[1]), np.median(result[2])
    print(f"median {one:.2f} s on 1 worker, {two:.2f} s on 2: {one / two:.2f}x", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="fbgp-al bench-service", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--scaling", action="store_true",
                        help="instead: a refit's time on 1 and on 2 workers")  # fmt: skip
    parser.add_argument("--throughput", type=float, default=0, metavar="SECONDS",
                        help="instead: 8 simulators, 4 parallel campaigns, 2 workers")  # fmt: skip
    args = parser.parse_args(argv)
    if args.scaling:
        scaling(args.rounds)
        return
    if args.throughput:
        with _service(2, timeout=120) as client:
            throughput(client, get_simulator("gramacy2d"), 4, 8, args.throughput)
        return
    sim = get_simulator("gramacy2d")
    rng = np.random.default_rng(0)
    with _service(args.workers, timeout=120) as client:
        latency(client, sim, rng, args.requests)
        label_to_next(client, sim, rng, args.rounds)
