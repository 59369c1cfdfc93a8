"""The demo campaign that ``fbgp-al up --demo NAME`` runs against the stack it started: a
built-in simulator labels a campaign over HTTP, then the model is scored on the paper's test set.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from clients.client import FbgpClient
from clients.reproduction.protocol import run_setup
from clients.runner import run_simulator
from clients.simulators import get_simulator
from worker.defaults import INITIAL_DESIGN_SIZE, MCMC_PRESETS


def run_demo(url: str, simulator: str = "gramacy1d", labels: int = 15, acquisition: str = "qb-mgp",
             token: str | None = None) -> dict:  # fmt: skip
    sim = get_simulator(simulator)
    setup = run_setup(sim, 0)
    body = {
        "name": f"demo-{simulator}",
        "inputs": sim.inputs(),
        "pool": sim.pool,
        "acquisition": acquisition,
        "initial_design": {"type": "maximin-lhs", "size": INITIAL_DESIGN_SIZE},
        "max_labels": labels,
        "mcmc": dict(MCMC_PRESETS["demo"]),
        "seed": setup.seed,
    }
    with FbgpClient(url, token, timeout=120) as api:
        campaign = api.create_campaign(body).id
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
        api.wait_for_model(campaign, labels)  # the last model sees every label
        metrics = dataclasses.asdict(api.evaluate(campaign, setup.test_x, setup.test_y))
        took = time.perf_counter() - started
        print(f"demo: done in {took:.1f} s; test NLML {metrics['nlml']:.3f}, "
              f"RMSE {metrics['rmse']:.4f}", flush=True)  # fmt: skip
        return {"campaign": campaign, **metrics}
