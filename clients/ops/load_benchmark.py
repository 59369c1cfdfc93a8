"""``fbgp-al bench-service --concurrency`` and ``--pool-sizes``: many simulator connections
long-polling campaigns on one API, and the cost of a request against the size of a campaign's
explicit pool (see :mod:`clients.ops.service_benchmark`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import resource
import time
from pathlib import Path

import httpx
import numpy as np

from fbgp_al.clients.ops.bench_stack import campaign_body, import_random, sdk_client, wait_model
from fbgp_al.clients.simulators import get_simulator

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
                r = await client.get(
                    f"/campaigns/{campaign}/next", params={"wait": min(wait, left)}, timeout=grace
                )
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
    (n50, n99), (l50, l99), (_, h99) = (
        _quantiles(t_next),
        _quantiles(t_label),
        _quantiles(t_health),
    )
    return {
        "simulators": simulators,
        "campaigns": len(ids),
        "seconds": seconds,
        "wait": wait,
        "next_200_p50_ms": n50,
        "next_200_p99_ms": n99,
        "label_p50_ms": l50,
        "label_p99_ms": l99,
        "healthz_p99_ms": h99,
        "healthz_max_ms": 1000 * max(t_health),
        "labels": labels[0],
        "labels_per_minute": 60 * labels[0] / seconds,
        "unanswered": unanswered[0],
        "errors": errors[0],
        "statuses": statuses,
    }


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


def concurrency(
    client, counts: list[int], campaigns: int, seconds: float, wait: float, api_log: Path
) -> list:
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
            body = campaign_body(sim, "parallel", 2_000, SMALL_MCMC)
            ids.append(client.post("/campaigns", json=body).raise_for_status().json()["id"])
            import_random(client, ids[-1], sim, rng, 10)
        with sdk_client(client) as api:
            for campaign in ids:
                wait_model(api, campaign, 10)
        start = api_log.stat().st_size
        row = asyncio.run(_load(str(client.base_url), ids, n, seconds, wait))
        served = _served(api_log, start)
        (row["served_next_p50_ms"], row["served_next_p99_ms"]) = _quantiles(served["next"])
        (row["served_label_p50_ms"], row["served_label_p99_ms"]) = _quantiles(served["label"])
        rows.append(row)
        print(
            f"N={n:5d} on {campaigns} campaigns, {seconds:.0f} s, wait={wait:g}: "
            f"/next (200) p50 {row['next_200_p50_ms']:.1f} ms p99 {row['next_200_p99_ms']:.1f} "
            f"ms; /label p50 {row['label_p50_ms']:.1f} ms p99 {row['label_p99_ms']:.1f} ms; "
            f"/healthz p99 {row['healthz_p99_ms']:.1f} ms (max {row['healthz_max_ms']:.0f}); "
            f"{row['labels_per_minute']:.0f} labels/min; unanswered after wait+5 s: "
            f"{row['unanswered']}; errors {row['errors']}; statuses {row['statuses']}; "
            f"as served (the API's log, waits left out): /next (200) p50 "
            f"{row['served_next_p50_ms']:.1f} ms "
            f"p99 {row['served_next_p99_ms']:.1f} ms, /label p50 "
            f"{row['served_label_p50_ms']:.1f} ms p99 {row['served_label_p99_ms']:.1f} ms",
            flush=True,
        )
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
        body = {
            "name": f"pool-{size}",
            "inputs": inputs,
            "acquisition": "random",
            "pool": {"type": "points", "points": points},
            "mode": "parallel",
            "initial_design": {"size": requests},
            "max_labels": requests + 10,
            "max_pending": 10_000,
            "seed": 1,
        }
        raw = json.dumps(body).encode()
        with _probing(str(client.base_url)) as waits:  # what other requests wait meanwhile
            t = time.perf_counter()
            r = client.post("/campaigns", content=raw, headers={"Content-Type": "application/json"})
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
        row = {
            "pool": size,
            "body_mb": len(raw) / 1e6,
            "create_s": created,
            "healthz_worst_s": max(waits, default=float("nan")),
            "next": _quantiles(t_next),
            "label": _quantiles(t_label),
            "status": _quantiles(t_status),
            "list": _quantiles(t_list),
        }
        rows.append(row)
        print(
            f"pool {size:>9,} ({row['body_mb']:.1f} MB): create {created:6.2f} s, "
            f"/healthz meanwhile at worst {row['healthz_worst_s']:.3f} s "
            f"({row['healthz_worst_s'] / created:.2f} of it) | p50/p99 ms: /next "
            f"{row['next'][0]:7.1f}/{row['next'][1]:7.1f}  /label {row['label'][0]:6.1f}/"
            f"{row['label'][1]:6.1f}  status {row['status'][0]:7.1f}/{row['status'][1]:7.1f}  "
            f"GET /campaigns?limit=50 {row['list'][0]:7.1f}/{row['list'][1]:7.1f}",
            flush=True,
        )
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
