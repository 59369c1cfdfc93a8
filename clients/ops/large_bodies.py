"""``fbgp-al bench-service --large-bodies N``: what several large request bodies at once do to
the rest of the API. ``N`` clients each create a campaign with an explicit pool of ``points``
1-D points (about 14 MiB of JSON at 700,000), all at once, on a stack of its own, while another
polls ``/healthz`` every 20 ms; reported are the creations' seconds and ``/healthz``'s worst
and 99th-percentile latency, against one creation alone; each twice, side by side on stacks of
their own: with bodies over ``FBGP_LARGE_BODY_BYTES`` parsed off the event loop
(:class:`service.middleware.OffTheLoop`, the default), and with every body parsed on it (the
setting raised above the body limit)."""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np

from fbgp_al.clients.ops.stack import LocalStack


def body(points: int, k: int) -> bytes:
    """A campaign over ``x`` in [0.5, 2.5] with ``points`` distinct explicit points."""
    x = 0.5 + 2.0 * (np.arange(points) + 0.5 * (k + 1) / 16) / points
    spec = {
        "name": f"large-body-{k}",
        "max_labels": 20,
        "inputs": [{"name": "x", "lower": 0.5, "upper": 2.5}],
        "pool": {"type": "points", "points": x[:, None].tolist()},
    }
    return json.dumps(spec).encode()


def once(bodies: list[bytes], env: dict) -> dict:
    """The creations and ``/healthz``'s latencies on a fresh stack with ``env``."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        LocalStack(Path(tmp), workers=1, env=dict(os.environ, **env)).start() as stack,
    ):
        done, latencies = threading.Event(), []

        def poll():
            with httpx.Client(base_url=stack.url, timeout=120) as client:
                while not done.is_set():
                    started = time.perf_counter()
                    client.get("/healthz").raise_for_status()
                    latencies.append(time.perf_counter() - started)
                    time.sleep(0.02)

        def create(raw: bytes) -> float:
            with httpx.Client(base_url=stack.url, timeout=300) as client:
                started = time.perf_counter()
                r = client.post(
                    "/campaigns", content=raw, headers={"Content-Type": "application/json"}
                )
                assert r.status_code == 201, r.text[:300]
                return time.perf_counter() - started

        poller = threading.Thread(target=poll)
        poller.start()
        time.sleep(0.5)
        with ThreadPoolExecutor(len(bodies)) as pool:
            seconds = list(pool.map(create, bodies))
        time.sleep(0.5)
        done.set()
        poller.join()
    return {
        "create_seconds": seconds,
        "healthz_max": max(latencies),
        "healthz_p99": float(np.quantile(latencies, 0.99)),
        "healthz_calls": len(latencies),
    }


def measure(n: int, points: int) -> dict:
    bodies = [body(points, k) for k in range(n)]
    mib = sum(map(len, bodies)) / n / 2**20
    print(f"creations of {points:,}-point pools ({mib:.1f} MiB each), and /healthz meanwhile")
    report = {"bodies": n, "points": points, "mib_each": mib}
    on_loop = {"FBGP_LARGE_BODY_BYTES": str(2**40)}
    for where, env in (("off the loop", {}), ("on the loop", on_loop)):
        for name, some in (("one alone", bodies[:1]), (f"{n} at once", bodies)):
            r = report[f"{where}, {name}"] = once(some, env)
            took = r["create_seconds"]
            print(
                f"  {where}, {name:10s} /healthz worst {r['healthz_max']:.2f} s, p99 "
                f"{r['healthz_p99']:.2f} s ({r['healthz_calls']} calls); creations "
                f"{min(took):.1f} to {max(took):.1f} s"
            )
    for name in ("one alone", f"{n} at once"):
        ratio = report[f"on the loop, {name}"]["healthz_max"] / max(
            report[f"off the loop, {name}"]["healthz_max"], 1e-9
        )
        print(f"  {name}: /healthz's worst latency {ratio:.2f}x lower off the loop")
    return report
