"""``fbgp-al bench-service``: latency of the labeling loop against a stack it starts itself.

1. ``/next`` and ``/label`` latency (p50, p99) with a model in place while a worker refits after
   every label: a parallel-mode 2-D campaign hands out ranked points without waiting. Beside
   it, the CPU milliseconds the API, Redis and the workers spent per ``/next`` and ``/label``
   pair: on a machine other processes load, the wall times move with them, the CPU times do not.
2. Label-to-next-point time of a sequential 2-D campaign at n = 40 with the paper's MCMC
   settings: from posting a label until ``/next`` (long-polling) returns the point chosen by the
   model that saw it, against that refit's own seconds; the difference is the pipeline's overhead.

``--label-to-next --simulator hartmann6 --labels 200``: instead, that time at 200 imported labels
with the service's own defaults, against ``--url`` (a stack of any version, ``fbgp-al up``) or a
stack of ``--workers`` it starts; ``--seed`` draws another data set.

``--concurrency 100,300,1000``: instead, N simulator connections (asyncio and httpx, one
connection each, a trivial f) long-poll M parallel-mode campaigns on one API process and the
stack's workers, for each N in turn: ``/next`` and ``/label`` p50/p99, ``/healthz`` p99 asked
beside the load, labels per minute, and the polls left unanswered after ``wait`` + 5 s.

``--pool-sizes 100,100000,1000000``: instead, the cost of ``/next``, ``/label``, a status and
a page of ``GET /campaigns`` against the size of a campaign's explicit pool, and the worst wait
of a ``/healthz`` asked while that campaign is created (the API's other requests wait while it
parses and validates the body in its event loop).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from fbgp_al.clients.ops import described
from fbgp_al.clients.ops.bench_stack import (
    campaign_body,
    import_random,
    sdk_client,
    service,
    stack_client,
    wait_model,
)
from fbgp_al.clients.ops.load_benchmark import concurrency, pool_cost
from fbgp_al.clients.ops.stack import LocalStack
from fbgp_al.clients.simulators import get_simulator
from fbgp_al.worker.vocabulary.defaults import MCMC_DEFAULTS
from fbgp_al.worker.vocabulary.sampler import sampler_line


def latency(client, sim, rng, requests: int, stack=None) -> dict:
    campaign = client.post(
        "/campaigns", json=campaign_body(sim, "parallel", 40 + 2 * requests, MCMC_DEFAULTS)
    ).json()["id"]
    import_random(client, campaign, sim, rng, 40)
    with sdk_client(client) as api:
        wait_model(api, campaign, 40)
    t_next, t_label = [], []
    cpu_before = stack.cpu_seconds() if stack is not None else {}
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
    cpu = {}
    if stack is not None:
        cpu = {
            f"{part}_cpu_ms": 1000 * (seconds - cpu_before[part]) / requests
            for part, seconds in stack.cpu_seconds().items()
        }
    ms = lambda v, q: 1000 * float(np.quantile(v, q))  # noqa: E731
    out = {
        "next_p50_ms": ms(t_next, 0.5),
        "next_p99_ms": ms(t_next, 0.99),
        "label_p50_ms": ms(t_label, 0.5),
        "label_p99_ms": ms(t_label, 0.99),
        "requests": requests,
        **cpu,
    }
    print(
        f"/next  p50 {out['next_p50_ms']:.1f} ms  p99 {out['next_p99_ms']:.1f} ms   "
        f"/label p50 {out['label_p50_ms']:.1f} ms  p99 {out['label_p99_ms']:.1f} ms  "
        f"({requests} each, a refit running after every label)",
        flush=True,
    )
    if cpu:
        print(
            "CPU per /next + /label pair: "
            + ", ".join(f"{k.removesuffix('_cpu_ms')} {v:.1f} ms" for k, v in cpu.items()),
            flush=True,
        )
    return out


def label_to_next(
    client, sim, rng, rounds: int, n: int = 40, mcmc: dict | None = MCMC_DEFAULTS, wait: float = 60
) -> list[dict]:
    """A sequential campaign's label-to-next-point time at ``n`` labels and up: ``n - 1``
    uniform random points imported, its model awaited, then ``rounds`` times a label posted and
    ``/next`` long-polled until the point of the model that saw it, against that refit's own
    seconds. ``mcmc``: the campaign's settings (None: the service's defaults, whatever its
    version's are, so that one command measures any stack)."""
    body = campaign_body(sim, "sequential", n + rounds, mcmc or {})  # a point after the last
    if mcmc is None:
        del body["mcmc"]
    created = client.post("/campaigns", json=body)
    if created.status_code != 201:
        raise SystemExit(f"the stack refused the campaign: {created.status_code} {created.text}")
    campaign = created.json()["id"]
    t = time.perf_counter()
    import_random(client, campaign, sim, rng, n - 1)
    with sdk_client(client) as api:
        wait_model(api, campaign, n - 1, seconds=3600)
    first = time.perf_counter() - t
    if n > 40:
        print(f"{sim.name}: {n - 1} points imported, first model in {first:.2f} s", flush=True)
    rows = []
    point = _next_point(client, campaign, wait)
    for _ in range(rounds):
        y = float(sim.sample(np.array([point["x"]]), rng)[0])
        t = time.perf_counter()
        client.post(f"/campaigns/{campaign}/label", json={"ticket": point["ticket"], "y": y})
        point = _next_point(client, campaign, wait)
        total = time.perf_counter() - t
        d = client.get(f"/campaigns/{campaign}/model").json()["diagnostics"]
        refit = d["refit_seconds"]
        rows.append(
            {
                "n": point["model_version"],
                "total_s": total,
                "refit_s": refit,
                "overhead_s": total - refit,
                "sampling_s": d.get("seconds"),
                "draws_per_chain": d.get("samples_per_chain"),
                "chain_groups": d.get("chain_groups", 1),
            }
        )
        share = 100 * (total - refit) / total
        print(
            f"n={point['model_version']}: label -> next point {total:.2f} s, refit "
            f"{refit:.2f} s ({d.get('method', 'nuts')} {d.get('seconds', float('nan')):.2f} "
            f"s, {d.get('samples_per_chain')} draws/chain, {d.get('chain_groups', 1)} chain "
            f"group(s)), overhead {total - refit:.3f} s ({share:.1f}%)",
            flush=True,
        )
    return rows


def _next_point(client, campaign: str, wait: float) -> dict:
    """The campaign's next point, long-polled again while the service answers 202 (its poll
    ended before a point was ready: a service caps a poll's wait)."""
    while True:
        r = client.get(f"/campaigns/{campaign}/next", params={"wait": wait})
        if r.status_code != 202:
            return r.json()


def refit_time(client, sim, rng, rounds: int, n: int = 40) -> list[float]:
    """Seconds from importing ``n`` uniform random points into a fresh campaign to its first
    model (the default MCMC settings, a cold start, and the scoring), ``rounds`` times."""
    mcmc = {**MCMC_DEFAULTS, "warm_start": False}
    times = []
    with sdk_client(client) as api:
        for _ in range(rounds):
            body = campaign_body(sim, "sequential", n + 1, mcmc)
            campaign = client.post("/campaigns", json=body).json()["id"]
            t = time.perf_counter()
            import_random(client, campaign, sim, rng, n)
            wait_model(api, campaign, n)
            times.append(time.perf_counter() - t)
            d = client.get(f"/campaigns/{campaign}/model").json()["diagnostics"]
            print(
                f"  {times[-1]:.2f} s: refit {d['refit_seconds']:.2f} s, of which sampling "
                f"{d['seconds']:.2f} s ({d['chain_groups']} chain group(s), "
                f"{d['samples_per_chain']} draws/chain, {d['gradient_evaluations']} gradient "
                f"evaluations; {sampler_line(d)})",
                flush=True,
            )
    return times


def throughput(client, sim, campaigns: int, simulators: int, seconds: float) -> dict:
    """Labels per minute from ``simulators`` threads (a trivial f) over ``campaigns``
    parallel-mode campaigns, and the longest any of them waited for a point."""
    import threading

    ids = []
    for _ in range(campaigns):
        body = dict(
            campaign_body(sim, "parallel", 2_000, MCMC_DEFAULTS),
            max_pending=simulators // campaigns,
        )
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
    print(
        f"{simulators} simulators on {campaigns} parallel campaigns for {seconds:.0f} s: "
        f"{total} labels, {out['per_minute']:.1f} per minute, longest wait for a point "
        f"{out['longest_wait_s']:.1f} s",
        flush=True,
    )
    return out


def scaling(rounds: int, simulator: str = "gramacy2d", n: int = 40, light: bool = False) -> None:
    """A refit's wall time on one and on two pinned workers, measured one after the other, on
    the same data (the same seed of random points for each). Both workers take every queue,
    unless ``light``: then worker 0 is light, as ``fbgp-al up`` starts two (a refit on the long
    queue, as one at n = 200 is, finds no second worker for its chains, only for its scoring)."""
    sim = get_simulator(simulator)
    result = {}
    for workers in (1, 2):
        with service(workers, timeout=600, light=light) as client:
            result[workers] = refit_time(client, sim, np.random.default_rng(0), rounds, n)
        times = ", ".join(f"{t:.2f}" for t in result[workers])
        print(
            f"refit ({simulator}, n={n}, d={sim.dim}, cold) on {workers} worker(s): {times} s",
            flush=True,
        )
    one, two = np.median(result[1]), np.median(result[2])
    print(f"median {one:.2f} s on 1 worker, {two:.2f} s on 2: {one / two:.2f}x", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="fbgp-al bench-service", description=described(__doc__))
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument(
        "--scaling", action="store_true", help="instead: a refit's time on 1 and on 2 workers"
    )
    parser.add_argument("--simulator", default="gramacy2d", help="the data of --scaling")
    parser.add_argument("--labels", type=int, default=40, help="the labels of --scaling")
    parser.add_argument(
        "--light", action="store_true", help="--scaling: worker 0 light, as fbgp-al up starts two"
    )
    parser.add_argument(
        "--throughput",
        type=float,
        default=0,
        metavar="SECONDS",
        help="instead: 8 simulators, 4 parallel campaigns, 2 workers",
    )
    parser.add_argument(
        "--concurrency",
        metavar="N,N,..",
        help="instead: N simulator connections long-polling --campaigns "
        "parallel campaigns on one API, for each N",
    )
    parser.add_argument(
        "--pool-sizes",
        metavar="N,N,..",
        help="instead: per-request cost against the size of an explicit pool, "
        "among --campaigns small campaigns",
    )
    parser.add_argument(
        "--large-bodies",
        type=int,
        metavar="N",
        help="instead: N campaigns with large explicit pools created at once, "
        "and /healthz meanwhile",
    )
    parser.add_argument("--points", type=int, default=700_000, help="each --large-bodies pool")
    parser.add_argument(
        "--label-to-next",
        action="store_true",
        help="instead: label to next point of --simulator at --labels labels, "
        "--rounds times, with the service's default settings, against "
        "--url or a stack of --workers (worker 0 light, as fbgp-al up)",
    )
    parser.add_argument("--url", help="--label-to-next: a running stack (any version)")
    parser.add_argument(
        "--seed", type=int, default=0, help="--label-to-next: the seed of its points and labels"
    )
    parser.add_argument("--campaigns", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=60.0, help="per N (--concurrency)")
    parser.add_argument("--wait", type=float, default=10.0, help="each poll's wait (--concurrency)")
    args = parser.parse_args(argv)
    if args.large_bodies:
        from fbgp_al.clients.ops.large_bodies import measure

        measure(args.large_bodies, args.points)
        return
    if args.concurrency:
        counts = [int(n) for n in args.concurrency.split(",")]
        with (
            tempfile.TemporaryDirectory() as tmp,
            LocalStack(Path(tmp), workers=args.workers).start() as stack,
            httpx.Client(base_url=stack.url, timeout=120) as client,
        ):
            concurrency(
                client, counts, args.campaigns, args.seconds, args.wait, Path(tmp) / "api.log"
            )
        return
    if args.pool_sizes:
        with service(args.workers, timeout=300) as client:
            sim = get_simulator("gramacy2d")
            for _ in range(args.campaigns):
                client.post("/campaigns", json=campaign_body(sim, "parallel", 10, MCMC_DEFAULTS))
            pool_cost(client, [int(n) for n in args.pool_sizes.split(",")], args.requests)
        return
    if args.scaling:
        scaling(args.rounds, args.simulator, args.labels, args.light)
        return
    if args.label_to_next:
        sim, rng = get_simulator(args.simulator), np.random.default_rng(args.seed)
        stack = (
            httpx.Client(base_url=args.url, timeout=3700)
            if args.url
            else service(args.workers, timeout=3700, light=args.workers > 1)
        )
        with stack as client:
            label_to_next(client, sim, rng, args.rounds, args.labels, None, wait=3600)
        return
    if args.throughput:
        with service(2, timeout=120) as client:
            throughput(client, get_simulator("gramacy2d"), 4, 8, args.throughput)
        return
    sim = get_simulator("gramacy2d")
    rng = np.random.default_rng(0)
    with stack_client(args.workers, timeout=120) as (stack, client):
        latency(client, sim, rng, args.requests, stack)
        label_to_next(client, sim, rng, args.rounds)
