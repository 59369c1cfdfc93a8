"""The data and the reference fits of ``fbgp-al bench-core``: the paper's simulators' data, a
campaign's labels as a refit sees them, Pyro's NUTS as the reference posterior, and how far two
posteriors agree."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from fbgp_al.clients.simulators import get_simulator
from fbgp_al.worker.mcmc import Posterior, Target, sample_posterior
from fbgp_al.worker.transforms import OutputStandardization


def data(simulator: str, n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` uniform random inputs of a simulator (unit cube) and standardized noisy outputs."""
    sim = get_simulator(simulator)
    rng = np.random.default_rng(seed)
    u = rng.random((n, sim.dim))
    y = sim.sample(sim.lower + u * (sim.upper - sim.lower), rng)
    return torch.from_numpy(u), OutputStandardization.from_labels(y).to_z(y)


RESULTS = Path(__file__).resolve().parents[2] / "docs" / "reproduction" / "results.jsonl"


# the reproduction's campaigns whose labels make a case's data, in this order (see campaign_data)
CAMPAIGN_ORDER = ("qb-mgp", "b-qbc", "bald", "b-alm", "alm")


def campaign_data(simulator: str, n: int, results=RESULTS) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``n`` points that the reproduction's campaigns of ``simulator`` labeled, with
    their labels (unit inputs, standardized outputs): those of its QB-MGP campaign of run 0 in
    the order they were chosen, then, past that campaign's length, the points of its other
    campaigns (run 0's B-QBC, BALD, B-ALM, ALM, then run 1's, ...) not labeled yet."""
    from fbgp_al.clients.reproduction.results import labeled_points, read_results

    sim = get_simulator(simulator)
    records = [r for r in read_results(results) if r["simulator"] == simulator]
    runs = sorted({r["run"] for r in records})
    xs, ys, seen = [], [], set()
    for run in runs:
        for acquisition in CAMPAIGN_ORDER:
            x, y = labeled_points(records, simulator, acquisition, run)
            if y is None:
                continue
            for point, label in zip(x, y, strict=True):
                key = tuple(np.round(point, 12))
                if key not in seen:
                    seen.add(key)
                    xs.append(point)
                    ys.append(label)
            if len(xs) >= n:
                x, y = np.array(xs[:n]), np.array(ys[:n])
                z = OutputStandardization.from_labels(y).to_z(y)
                return torch.from_numpy(sim.to_unit(x)), z
    raise ValueError(f"the reproduction's {simulator} campaigns hold {len(xs)} points, not {n}")


def reference_posterior(u, z, chains=5, warmup=200, samples=300, seed=0) -> np.ndarray:
    """Log draws ``(chains * samples) x (d + 1)`` from the paper's path (Pyro GPRegression +
    NUTS), chains one after another."""
    import pyro
    import pyro.contrib.gp as gp
    import pyro.distributions as dist
    from pyro.infer import MCMC, NUTS

    d = u.shape[1]
    scale = torch.tensor(math.sqrt(3.0), dtype=torch.float64)
    zero = torch.zeros((), dtype=torch.float64)
    draws = []
    for chain in range(chains):
        pyro.clear_param_store()
        pyro.set_rng_seed(seed * 1000 + chain)
        kernel = gp.kernels.RBF(input_dim=d, variance=torch.tensor(1.0, dtype=torch.float64))
        kernel.lengthscale = pyro.nn.PyroSample(
            dist.LogNormal(zero.expand(d), scale.expand(d)).to_event(1)
        )
        kernel.variance = torch.tensor(1.0, dtype=torch.float64)  # fixed, as the service has it
        model = gp.models.GPRegression(u, z, kernel, noise=torch.tensor(0.1, dtype=torch.float64))
        model.noise = pyro.nn.PyroSample(dist.LogNormal(zero, scale))
        mcmc = MCMC(
            NUTS(model.model, target_accept_prob=0.8),
            num_samples=samples,
            warmup_steps=warmup,
            disable_progbar=True,
        )
        mcmc.run()
        s = mcmc.get_samples()
        lengthscale = s["kernel.lengthscale"].reshape(samples, d)
        draws.append(torch.cat([lengthscale.log(), s["noise"].reshape(samples, 1).log()], 1))
    return torch.cat(draws).numpy()


def agreement(ours: np.ndarray, reference: np.ndarray) -> float:
    """Largest |difference| of the 5/50/95% quantiles of any log-hyperparameter, in units of the
    reference posterior's sd."""
    q = [0.05, 0.5, 0.95]
    diff = np.abs(np.quantile(ours, q, axis=0) - np.quantile(reference, q, axis=0))
    return float((diff / reference.std(0)).max())


def fit(u, z, mcmc: dict, seed: int, warm: Posterior | None = None) -> Posterior:
    """A refit as the service runs it with campaign settings ``mcmc`` (warm from ``warm``)."""
    return sample_posterior(
        u,
        z,
        mcmc["chains"],
        mcmc["warmup"],
        mcmc["samples"],
        seed=seed,
        warm_start=warm.adaptation if warm is not None and mcmc.get("warm_start") else None,
        warm_warmup=mcmc.get("warm_warmup", 50),
        init=mcmc.get("init", "grid"),
        target=Target.of(mcmc),
        metric=mcmc.get("metric", "diag"),
        start_metric=mcmc.get("start_metric", False),
    )
