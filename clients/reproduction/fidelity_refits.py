"""``fbgp-al bench-fidelity --refits N``: a multi-fidelity campaign's refit at ``N`` labels by
NUTS and by the Laplace mixture, side by side, in the worker's math
(:func:`worker.fitting.fidelity.sample`, the campaign's defaults but ``mcmc.laplace_from``).

The labels: a problem's (:mod:`.fidelity_problems`) two levels at seeded uniform points, a fifth of
them expensive, with noise of sd 0.01 times the labels' spread. Each arm refits cold at ``N``
labels, then warm at ``N + 1`` (a label's refit) from the cold one's adaptation; the mixture also at
``N + 1`` from NUTS's cold adaptation, as a campaign that reaches ``laplace_from`` on NUTS switches.
Per refit: the method used, seconds, the mixture's ``k``; against NUTS's warm draws, the largest
difference of a hyperparameter's posterior mean in NUTS's sds (NUTS's at ``N`` for the cold mixture,
at ``N + 1`` for the others), and each arm's top-level RMSE (the draws' mean) at 500 seeded uniform
points.
"""

from __future__ import annotations

import numpy as np

from fbgp_al.clients.reproduction.fidelity_problems import Problem
from fbgp_al.service.schemas.campaigns import CampaignCreate
from fbgp_al.worker.fitting import fidelity
from fbgp_al.worker.vocabulary import fidelities

TEST_POINTS = 500
EXPENSIVE_SHARE = 0.2
NOISE = 0.01  # of the labels' spread


def campaign(problem: Problem, laplace_from: int | None, n: int, mcmc: dict | None = None) -> dict:
    """A campaign of the problem's inputs and two levels at 1:10 for ``n`` labels, the defaults
    otherwise (``mcmc``'s settings beside ``laplace_from``)."""
    side = int(np.ceil(n ** (1 / problem.dim))) + 1
    body = {
        "inputs": [
            {"name": f"x{i + 1}", "lower": lo, "upper": hi}
            for i, (lo, hi) in enumerate(zip(problem.lower, problem.upper, strict=True))
        ],
        "pool": {"type": "grid", "points_per_dim": side},
        "fidelities": [{"name": "cheap", "cost": 1}, {"name": "expensive", "cost": 10}],
        "mcmc": {**(mcmc or {}), "laplace_from": laplace_from},
        "max_labels": n,
        "seed": 0,
    }
    return fidelities.with_level(CampaignCreate.model_validate(body).model_dump())


def labels_of(problem: Problem, n: int, seed: int) -> list[dict]:
    """``n`` labels in the campaign's units, the expensive ones every fifth."""
    rng = np.random.default_rng([seed, 17])
    u = rng.random((n, problem.dim))
    t = (np.arange(n) % round(1 / EXPENSIVE_SHARE) == 0).astype(int)
    y = np.array([problem.at(u[i : i + 1], t[i])[0] for i in range(n)])
    y = y + NOISE * y.std() * rng.standard_normal(n)
    x = problem.from_unit(u)
    names = ("cheap", "expensive")
    return [{"x": [*map(float, x[i]), names[t[i]]], "y": float(y[i]), "index": i} for i in range(n)]


def top_rmse(fit: fidelity.LevelFit, theta: np.ndarray, problem: Problem) -> float:
    """The top level's RMSE of the draws' mean at :data:`TEST_POINTS` seeded uniform points."""
    test = np.random.default_rng(99).random((TEST_POINTS, problem.dim))
    means = [g.predict(test, 1)[0].numpy() for g in fidelity.conditioned(fit.potential, theta)]
    scale = fit.data.scale_y
    predicted = scale.mean + scale.std * np.mean(means, axis=0)
    return float(np.sqrt(np.mean((predicted - problem.at(test, 1)) ** 2)))


def refits(problem: Problem, n: int, seed: int, mcmc: dict | None = None) -> list[dict]:
    """The rows of both arms (see the module); ``mcmc``: settings other than the defaults."""
    labels = labels_of(problem, n + 1, seed)
    nuts_spec = campaign(problem, None, n + 1, mcmc)
    mix_spec = campaign(problem, 1, n + 1, mcmc)
    nuts_cold = fidelity.sample(nuts_spec, labels[:n])
    runs = [
        ("nuts", "cold", nuts_spec, nuts_cold),
        ("nuts", "warm", nuts_spec, fidelity.sample(nuts_spec, labels, _model(nuts_cold))),
    ]
    mix_cold = fidelity.sample(mix_spec, labels[:n])
    runs += [
        ("laplace", "cold", mix_spec, mix_cold),
        ("laplace", "warm", mix_spec, fidelity.sample(mix_spec, labels, _model(mix_cold))),
        ("laplace", "from NUTS", mix_spec, fidelity.sample(mix_spec, labels, _model(nuts_cold))),
    ]
    references = {
        n: fidelity.kept(nuts_cold, nuts_spec),
        n + 1: fidelity.kept(runs[1][3], nuts_spec),
    }
    rows = []
    for arm, refit, spec, fit in runs:
        theta = fidelity.kept(fit, spec)
        report = fit.report
        reference = references[fit.data.n]
        shift = np.abs(theta.mean(0) - reference.mean(0)) / reference.std(0)
        rows.append(
            {
                "problem": problem.name,
                "seed": seed,
                "n": fit.data.n,
                "arm": arm,
                "refit": refit,
                "method": report.get("method", "nuts"),
                "seconds": fit.seconds,
                "khat": report.get("khat", report.get("laplace", {}).get("khat")),
                "draws": len(theta),
                "mean_shift_sd": None if arm == "nuts" else float(shift.max()),
                "rmse": top_rmse(fit, theta, problem),
            }
        )
    return rows


def _model(fit) -> dict:
    return {"adaptation": fit.report["adaptation"]}


def table(rows: list[dict]) -> str:
    lines = [
        "| problem | seed | n | arm | refit | method | seconds | k | draws "
        "| largest mean shift against NUTS's on the same labels (sds) | top-level RMSE |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        k = "" if r["khat"] is None else f"{r['khat']:.2f}"
        shift = "" if r["mean_shift_sd"] is None else f"{r['mean_shift_sd']:.2f}"
        lines.append(
            f"| {r['problem']} | {r['seed']} | {r['n']} | {r['arm']} | {r['refit']} "
            f"| {r['method']} | {r['seconds']:.1f} | {k} | {r['draws']} "
            f"| {shift} | {r['rmse']:.4g} |"
        )
    return "\n".join(lines)
