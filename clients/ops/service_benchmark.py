"""``fbgp-al bench-service``: latency of the labeling loop against a stack it starts itself.

1. ``/next`` and ``/label`` latency (p50, p99) with a model in place while a worker refits after
   every label: a parallel-mode 2-D campaign hands out ranked points without waiting.
2. Label-to-next-point time of a sequential 2-D campaign at n = 40 with the paper's MCMC
   settings: from posting a label until ``/next`` (long-polling) returns the point chosen by the
   model that saw it, against that refit's own seconds; the difference is the pipeline's overhead.

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
import asyncio
import contextlib
import json
import multiprocessing
import resource
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from clients.client import FbgpClient
from clients.ops import described
from clients.ops.stack import LocalStack
from clients.simulators import get_simulator
from worker.defaults import MCMC_DEFAULTS


@contextlib.contextmanager
def _service(workers: int, timeout: float, light: bool = True):
    """A client of a stack of this machine's own, started and stopped around the block
    (``light``: worker 0 light, as ``fbgp-al up`` starts it)."""
    with (tempfile.TemporaryDirectory() as tmp,
          LocalStack(Path(tmp), workers=workers, light=light).start() as stack,
          httpx.Client(base_url=stack.url, timeout=timeout) as client):  # fmt: skip
        yield client


def _body(sim, mode: str, max_labels: int, mcmc: dict) -> dict:
    return {"name": f"bench-{mode}", "inputs": sim.inputs(), "pool": sim.pool,
            "acquisition": "qb-mgp", "max_labels": max_labels, "mcmc": dict(mcmc), "mode": mode,
            "max_pending": 1_000, "seed": 3}  # fmt: skip


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


def refit_time(client, sim, rng, rounds: int, n: int = 40) -> list[float]:
    """Seconds from importing ``n`` uniform random points into a fresh campaign to its first
    model (the default MCMC settings, a cold start, and the scoring), ``rounds`` times."""
    mcmc = {**MCMC_DEFAULTS, "warm_start": False}
    times = []
    with _api(client) as api:
        for _ in range(rounds):
            body = _body(sim, "sequential", n + 1, mcmc)
            campaign = client.post("/campaigns", json=body).json()["id"]
            t = time.perf_counter()
            _initial(client, campaign, sim, rng, n)
            _wait_model(api, campaign, n)
            times.append(time.perf_counter() - t)
            d = client.get(f"/campaigns/{campaign}/model").json()["diagnostics"]
            print(f"  {times[-1]:.2f} s: refit {d['refit_seconds']:.2f} s, of which sampling "
                  f"{d['seconds']:.2f} s ({d['chain_groups']} chain group(s), "
                  f"{d['samples_per_chain']} draws/chain, {d['gradient_evaluations']} gradient "
                  f"evaluations, R-hat {d['max_rhat']:.3f}, bulk ESS {d['min_ess_bulk']:.0f})",
                  flush=True)  # fmt: skip
    return times


def throughput(client, sim, campaigns: int, simulators: int, seconds: float) -> dict:
    """Labels per minute from ``simulators`` threads (a trivial f) over ``campaigns``
    parallel-mode campaigns, and the longest any of them waited for a point."""
    import threading

    ids = []
    for _ in range(campaigns):
        body = dict(_body(sim, "parallel", 2_000, MCMC_DEFAULTS),
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


SMALL_MCMC = {"chains": 2, "warmup": 30, "samples": 20, "thinning": 2, "warm_start": False}


def _quantiles(values: list[float]) -> tuple[float, float]:
    """p50 and p99 in ms (NaN for none)."""
    if not values:
        return float("nan"), float("nan")
    return 1000 * float(np.quantile(values, 0.5)), 1000 * float(np.quantile(values, 0.99))


async def _load(url: str, ids: list[str], simulators: int, seconds: float, wait: float) -> dict:
    """``simulators`` connections labeling ``ids`` round robin for ``seconds``, and /healthz
    asked every 0.1 s on a connection of its own meanwhile."""
    # one connection each, made before the clock starts (plain HTTP: no TLS context to load)
    clients = [httpx.AsyncClient(base_url=url, verify=False) for _ in range(simulators)]
    stop = time.monotonic() + seconds
    grace = wait + 5.0  # a poll with no answer by then counts as unanswered
    t_next, t_label, statuses = [], [], {}
    labels, unanswered, errors = [0], [0], [0]
    f = lambda x: float(np.sin(3 * np.sum(x)))  # noqa: E731

    async def simulate(k: int) -> None:
        async with clients[k]:
            await labeler(k, clients[k])

    async def labeler(k: int, client: httpx.AsyncClient) -> None:
        campaign = ids[k % len(ids)]
        while time.monotonic() < stop:
            left = max(0.0, stop - time.monotonic())
            t = time.perf_counter()
            try:
                r = await client.get(f"/campaigns/{campaign}/next",
                                     params={"wait": min(wait, left)}, timeout=grace)  # fmt: skip
            except httpx.TimeoutException:
                unanswered[0] += 1
                continue
            except httpx.HTTPError:
                errors[0] += 1
                await asyncio.sleep(0.5)
                continue
            statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
            if r.status_code != 200:
                if r.status_code not in (202,):
                    await asyncio.sleep(0.5)
                continue
            t_next.append(time.perf_counter() - t)
            point = r.json()
            t = time.perf_counter()
            try:
                body = {"ticket": point["ticket"], "y": f(point["x"])}
                r = await client.post(f"/campaigns/{campaign}/label", json=body, timeout=grace)
            except httpx.HTTPError:
                errors[0] += 1
                continue
            t_label.append(time.perf_counter() - t)
            labels[0] += r.status_code == 201

    # /healthz is asked from a process of its own, so that this busy event loop's delays are
    # not counted as the API's
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    prober = context.Process(target=probe_healthz, args=(url, seconds, grace, results))
    prober.start()
    await asyncio.gather(*(simulate(k) for k in range(simulators)))
    t_health = results.get(timeout=60)
    prober.join(timeout=30)
    (n50, n99), (l50, l99), (_, h99) = (_quantiles(t_next), _quantiles(t_label),
                                        _quantiles(t_health))  # fmt: skip
    return {"simulators": simulators, "campaigns": len(ids), "seconds": seconds, "wait": wait,
            "next_200_p50_ms": n50, "next_200_p99_ms": n99, "label_p50_ms": l50,
            "label_p99_ms": l99, "healthz_p99_ms": h99, "healthz_max_ms": 1000 * max(t_health),
            "labels": labels[0], "labels_per_minute": 60 * labels[0] / seconds,
            "unanswered": unanswered[0], "errors": errors[0], "statuses": statuses}  # fmt: skip


def probe_healthz(url: str, seconds: float, grace: float, results) -> None:
    """/healthz every 0.1 s for ``seconds``: its latencies (``grace`` for a failed call)."""
    stop, out = time.monotonic() + seconds, []
    with httpx.Client(base_url=url, timeout=grace) as client:
        while time.monotonic() < stop:
            t = time.perf_counter()
            try:
                client.get("/healthz").raise_for_status()
                out.append(time.perf_counter() - t)
            except httpx.HTTPError:
                out.append(grace)
            time.sleep(0.1)
    results.put(out)


def _served(api_log: Path, start: int) -> dict:
    """The API's own latencies (its JSON log lines from byte ``start``), in seconds:
    ``/next`` answered 200 less the time it waited for a point (``waited``), that is its
    service time, and ``/label``; the clients' figures also hold their own event loop's
    delays, and for ``/next`` the wait."""
    out: dict = {"next": [], "label": []}
    with open(api_log, "rb") as log:
        log.seek(start)
        for line in log:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            route, status = record.get("route", ""), record.get("status")
            if route.endswith("/next") and status == 200:
                out["next"].append(record["seconds"] - record.get("waited", 0.0))
            elif route.endswith("/label") and status in (200, 201):
                out["label"].append(record["seconds"])
    return out


def concurrency(client, counts: list[int], campaigns: int, seconds: float, wait: float,
                api_log: Path) -> list:  # fmt: skip
    """The load of :func:`_load` for each count of simulators, each on fresh campaigns that
    have a first model (10 imported points) before it starts."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 2 * max(counts) + 256
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    sim = get_simulator("gramacy2d")
    rng = np.random.default_rng(0)
    rows = []
    for n in counts:
        ids = []
        for _ in range(campaigns):
            body = _body(sim, "parallel", 2_000, SMALL_MCMC)
            ids.append(client.post("/campaigns", json=body).raise_for_status().json()["id"])
            _initial(client, ids[-1], sim, rng, 10)
        with _api(client) as api:
            for campaign in ids:
                _wait_model(api, campaign, 10)
        start = api_log.stat().st_size
        row = asyncio.run(_load(str(client.base_url), ids, n, seconds, wait))
        served = _served(api_log, start)
        (row["served_next_p50_ms"], row["served_next_p99_ms"]) = _quantiles(served["next"])
        (row["served_label_p50_ms"], row["served_label_p99_ms"]) = _quantiles(served["label"])
        rows.append(row)
        print(f"N={n:5d} on {campaigns} campaigns, {seconds:.0f} s, wait={wait:g}: "
              f"/next (200) p50 {row['next_200_p50_ms']:.1f} ms p99 {row['next_200_p99_ms']:.1f} "
              f"ms; /label p50 {row['label_p50_ms']:.1f} ms p99 {row['label_p99_ms']:.1f} ms; "
              f"/healthz p99 {row['healthz_p99_ms']:.1f} ms (max {row['healthz_max_ms']:.0f}); "
              f"{row['labels_per_minute']:.0f} labels/min; unanswered after wait+5 s: "
              f"{row['unanswered']}; errors {row['errors']}; statuses {row['statuses']}; "
              f"as served (the API's log, waits left out): /next (200) p50 "
              f"{row['served_next_p50_ms']:.1f} ms "
              f"p99 {row['served_next_p99_ms']:.1f} ms, /label p50 "
              f"{row['served_label_p50_ms']:.1f} ms p99 {row['served_label_p99_ms']:.1f} ms",
              flush=True)  # fmt: skip
    return rows


def pool_cost(client, sizes: list[int], requests: int) -> list[dict]:
    """Per-request cost against the size of a campaign's explicit pool: for each size, a 2-D
    parallel campaign whose pool is that many random points, created among ``--campaigns``
    small ones; ``requests`` design points handed out and labeled (no model: the cost is the
    API's and Redis's alone), its status and the first page of ``GET /campaigns`` read as often.
    """
    rng = np.random.default_rng(0)
    inputs = [{"name": f"x{i + 1}", "lower": 0.0, "upper": 1.0} for i in range(2)]
    rows = []
    for size in sizes:
        # distinct points of 3 decimals (a pool's points must be distinct): 1e6 in 14 MB
        cells = rng.choice(1001 * 1001, size=size, replace=False)
        points = (np.stack([cells // 1001, cells % 1001], axis=1) / 1000).tolist()
        body = {"name": f"pool-{size}", "inputs": inputs, "acquisition": "random",
                "pool": {"type": "points", "points": points}, "mode": "parallel",
                "initial_design": {"size": requests}, "max_labels": requests + 10,
                "max_pending": 10_000, "seed": 1}  # fmt: skip
        raw = json.dumps(body).encode()
        with _probing(str(client.base_url)) as waits:  # what other requests wait meanwhile
            t = time.perf_counter()
            r = client.post("/campaigns", content=raw,
                            headers={"Content-Type": "application/json"})  # fmt: skip
            created = time.perf_counter() - t
        r.raise_for_status()
        campaign = r.json()["id"]
        del body, points, r
        t_next, t_label, t_status, t_list = [], [], [], []
        for k in range(requests):
            t = time.perf_counter()
            r = client.get(f"/campaigns/{campaign}/next")
            t_next.append(time.perf_counter() - t)
            r.raise_for_status()
            label = {"ticket": r.json()["ticket"], "y": float(k)}
            t = time.perf_counter()
            client.post(f"/campaigns/{campaign}/label", json=label).raise_for_status()
            t_label.append(time.perf_counter() - t)
            t = time.perf_counter()
            client.get(f"/campaigns/{campaign}").raise_for_status()
            t_status.append(time.perf_counter() - t)
            t = time.perf_counter()
            client.get("/campaigns", params={"limit": 50}).raise_for_status()
            t_list.append(time.perf_counter() - t)
        client.delete(f"/campaigns/{campaign}").raise_for_status()
        row = {"pool": size, "body_mb": len(raw) / 1e6, "create_s": created,
               "healthz_worst_s": max(waits, default=float("nan")), "next": _quantiles(t_next),
               "label": _quantiles(t_label), "status": _quantiles(t_status),
               "list": _quantiles(t_list)}  # fmt: skip
        rows.append(row)
        print(f"pool {size:>9,} ({row['body_mb']:.1f} MB): create {created:6.2f} s, "
              f"/healthz meanwhile at worst {row['healthz_worst_s']:.3f} s "
              f"({row['healthz_worst_s'] / created:.2f} of it) | p50/p99 ms: /next "
              f"{row['next'][0]:7.1f}/{row['next'][1]:7.1f}  /label {row['label'][0]:6.1f}/"
              f"{row['label'][1]:6.1f}  status {row['status'][0]:7.1f}/{row['status'][1]:7.1f}  "
              f"GET /campaigns?limit=50 {row['list'][0]:7.1f}/{row['list'][1]:7.1f}",
              flush=True)  # fmt: skip
    return rows


@contextlib.contextmanager
def _probing(url: str):
    """``GET /healthz`` asked again and again from a thread while the block runs: the list of
    its latencies (s), complete once the block ends (the last one answered after it)."""
    import threading

    waits: list[float] = []
    done = threading.Event()

    def probe() -> None:
        with httpx.Client(base_url=url, timeout=60) as probe_client:
            while not done.is_set():
                t = time.perf_counter()
                probe_client.get("/healthz")
                waits.append(time.perf_counter() - t)
                time.sleep(0.005)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    time.sleep(0.05)  # its connection open before the block
    try:
        yield waits
    finally:
        done.set()
        thread.join()


def scaling(rounds: int, simulator: str = "gramacy2d", n: int = 40, light: bool = False) -> None:
    """A refit's wall time on one and on two pinned workers, measured one after the other, on
    the same data (the same seed of random points for each). Both workers take every queue,
    unless ``light``: then worker 0 is light, as ``fbgp-al up`` starts two (a refit on the long
    queue, as one at n = 200 is, finds no second worker for its chains, only for its scoring)."""
    sim = get_simulator(simulator)
    result = {}
    for workers in (1, 2):
        with _service(workers, timeout=600, light=light) as client:
            result[workers] = refit_time(client, sim, np.random.default_rng(0), rounds, n)
        times = ", ".join(f"{t:.2f}" for t in result[workers])
        print(f"refit ({simulator}, n={n}, d={sim.dim}, cold) on {workers} worker(s): {times} s",
              flush=True)  # fmt: skip
    one, two = np.median(result[1]), np.median(result[2])
    print(f"median {one:.2f} s on 1 worker, {two:.2f} s on 2: {one / two:.2f}x", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="fbgp-al bench-service", description=described(__doc__))
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--scaling", action="store_true",
                        help="instead: a refit's time on 1 and on 2 workers")  # fmt: skip
    parser.add_argument("--simulator", default="gramacy2d", help="the data of --scaling")
    parser.add_argument("--labels", type=int, default=40, help="the labels of --scaling")
    parser.add_argument("--light", action="store_true",
                        help="--scaling: worker 0 light, as fbgp-al up starts two")  # fmt: skip
    parser.add_argument("--throughput", type=float, default=0, metavar="SECONDS",
                        help="instead: 8 simulators, 4 parallel campaigns, 2 workers")  # fmt: skip
    parser.add_argument("--concurrency", metavar="N,N,..",
                        help="instead: N simulator connections long-polling --campaigns "
                             "parallel campaigns on one API, for each N")  # fmt: skip
    parser.add_argument("--pool-sizes", metavar="N,N,..",
                        help="instead: per-request cost against the size of an explicit pool, "
                             "among --campaigns small campaigns")  # fmt: skip
    parser.add_argument("--campaigns", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=60.0, help="per N (--concurrency)")
    parser.add_argument("--wait", type=float, default=10.0, help="each poll's wait (--concurrency)")
    args = parser.parse_args(argv)
    if args.concurrency:
        counts = [int(n) for n in args.concurrency.split(",")]
        with (tempfile.TemporaryDirectory() as tmp,
              LocalStack(Path(tmp), workers=args.workers).start() as stack,
              httpx.Client(base_url=stack.url, timeout=120) as client):  # fmt: skip
            concurrency(client, counts, args.campaigns, args.seconds, args.wait,
                        Path(tmp) / "api.log")  # fmt: skip
        return
    if args.pool_sizes:
        with _service(args.workers, timeout=300) as client:
            sim = get_simulator("gramacy2d")
            for _ in range(args.campaigns):
                client.post("/campaigns", json=_body(sim, "parallel", 10, MCMC_DEFAULTS))
            pool_cost(client, [int(n) for n in args.pool_sizes.split(",")], args.requests)
        return
    if args.scaling:
        scaling(args.rounds, args.simulator, args.labels, args.light)
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
