"""The demo campaign that ``fbgp-al up --demo NAME`` runs against the stack it started: a
built-in simulator labels a campaign over HTTP, then the model is scored on the paper's test set.
"""

from __future__ import annotations

import time

import httpx
import numpy as np

from clients.protocol import run_setup
from clients.runner import run_simulator
from clients.simulators import get_simulator

DEMO_MCMC = {"chains": 4, "warmup": 100, "samples": 100, "thinning": 5}


def run_demo(url: str, simulator: str = "gramacy1d", labels: int = 15, acquisition: str = "qb-mgp",
             token: str | None = None) -> dict:  # fmt: skip
    sim = get_simulator(simulator)
    setup = run_setup(sim, 0)
    body = {
        "name": f"demo-{simulator}",
        "inputs": sim.inputs(),
        "pool": sim.pool,
        "acquisition": acquisition,
        "initial_design": {"type": "maximin-lhs", "size": 3},
        "max_labels": labels,
        "mcmc": DEMO_MCMC,
        "seed": setup.seed,
    }
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
        r = client.post("/campaigns", json=body)
        r.raise_for_status()
        campaign = r.json()["id"]
        print(
            f"demo: campaign {campaign} ({simulator}, {acquisition}, {labels} labels)", flush=True
        )
        rng = np.random.default_rng(setup.seed)
        started = time.perf_counter()

        def f(x):
            return float(sim.sample(np.array([x]), rng)[0])

        def show(x, y, n):
            print(f"  label {n:3d}: x = {np.round(x, 4).tolist()}  y = {y:.4f}", flush=True)

        run_simulator(url, campaign, f, token=token, on_label=show)
        # the last model sees every label
        while client.get(f"/campaigns/{campaign}").json()["model_version"] != labels:
            time.sleep(0.2)
        test = {"x": setup.test_x.tolist(), "y": setup.test_y.tolist()}
        metrics = client.post(f"/campaigns/{campaign}/evaluate", json=test).json()
        took = time.perf_counter() - started
        print(f"demo: done in {took:.1f} s; test NLML {metrics['nlml']:.3f}, "
              f"RMSE {metrics['rmse']:.4f}", flush=True)  # fmt: skip
        return {"campaign": campaign, **metrics}
