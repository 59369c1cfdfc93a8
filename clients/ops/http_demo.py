"""The demo campaign that ``fbgp-al up --demo NAME`` runs against the stack it started: a
built-in simulator labels a campaign over HTTP, then the model is scored on the paper's test set.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from fbgp_al.clients.client import FbgpClient
from fbgp_al.clients.reproduction.protocol import run_setup
from fbgp_al.clients.runner import run_simulator
from fbgp_al.clients.simulators import MultiSimulator, get_simulator
from fbgp_al.worker.vocabulary.defaults import INITIAL_DESIGN_SIZE, MCMC_PRESETS


def run_demo(
    url: str,
    simulator: str = "gramacy1d",
    labels: int = 15,
    acquisition: str = "qb-mgp",
    token: str | None = None,
) -> dict:
    sim = get_simulator(simulator)
    if isinstance(sim, MultiSimulator):
        return run_multi_demo(url, sim, labels, acquisition, token)
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
        print(
            f"demo: done in {took:.1f} s; test NLML {metrics['nlml']:.3f}, "
            f"RMSE {metrics['rmse']:.4f}",
            flush=True,
        )
        return {"campaign": campaign, **metrics}


def run_multi_demo(
    url: str,
    sim: MultiSimulator,
    labels: int,
    acquisition: str,
    token: str | None = None,
    test_points: int = 200,
) -> dict:
    """The demo of a simulator of several outputs: a multi-output campaign labeled over HTTP,
    then each output's model scored on noisy test points drawn from its pool."""
    body = {
        "name": f"demo-{sim.name}",
        "inputs": sim.inputs(),
        "outputs": sim.campaign_outputs(),
        "pool": sim.pool,
        "acquisition": acquisition,
        "initial_design": {"type": "maximin-lhs", "size": INITIAL_DESIGN_SIZE},
        "max_labels": labels,
        "mcmc": dict(MCMC_PRESETS["demo"]),
        "seed": 0,
    }
    rng = np.random.default_rng(0)
    with FbgpClient(url, token, timeout=120) as api:
        campaign = api.create_campaign(body).id
        print(
            f"demo: campaign {campaign} ({sim.name}: {', '.join(sim.output_names)}; "
            f"{acquisition}, {labels} labels)",
            flush=True,
        )
        started = time.perf_counter()

        def show(x, y, n):
            values = ", ".join(f"{k} = {v:.4g}" for k, v in y.items())
            print(f"  label {n:3d}: x = {np.round(x, 4).tolist()}  {values}", flush=True)

        run_simulator(url, campaign, lambda x: sim.label(x, rng), token=token, on_label=show)
        api.wait_for_model(campaign, labels)
        grid = rng.integers(0, sim.points_per_dim, size=(test_points, sim.dim))
        test_x = sim.from_unit(grid / (sim.points_per_dim - 1))
        test_y = {k: v.tolist() for k, v in sim.sample_outputs(test_x, rng).items()}
        scores = api.evaluate(campaign, test_x.tolist(), test_y)
        took = time.perf_counter() - started
        for name, e in scores.items():
            print(f"demo: {name}: test NLML {e.nlml:.3f}, RMSE {e.rmse:.4g}", flush=True)
        print(f"demo: done in {took:.1f} s", flush=True)
        return {
            "campaign": campaign,
            "outputs": {name: dataclasses.asdict(e) for name, e in scores.items()},
        }
