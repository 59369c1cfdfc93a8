"""What a stored multi-fidelity model answers (:mod:`worker.fitting.fidelity`'s model body):
predictions at any level, acquisition values, the top level's metrics on a test set and its
Sobol indices.

Points come as the store keeps them, each followed by its level's name. The model has no mode
GP of its own; its stand-in is the kept draw of the highest posterior density (the body's
``mode``), whose mean and variance are ``mean`` and ``variance`` as a single-fidelity model's
mode GP's are, beside the mixture of the kept draws (``mixture_mean``, ``mixture_variance``).
Variances are of y: each draw's latent variance plus its level's noise.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from fbgp_al.worker.feasibility.campaign import of_model
from fbgp_al.worker.fidelity import acquisition as choice
from fbgp_al.worker.fidelity.model import Conditioned
from fbgp_al.worker.fitting import fidelity
from fbgp_al.worker.vocabulary import fidelities, sobol
from fbgp_al.worker.vocabulary.space import Space


def _points(spec: dict, x: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Points as stored -> the declared inputs' features, each point's level, and the
    features as the failure model sees them (the level included)."""
    features = Space.of(spec["inputs"]).to_gp(x)
    u, t = fidelity.split_features(features, len(fidelities.levels(spec)))
    return u, t, features


def _moments(draws: list[Conditioned], u: np.ndarray, t: np.ndarray):
    """Each draw's mean and variance of y at ``(u, t)``: ``draws x m`` each."""
    means = np.zeros((len(draws), len(u)))
    variances = np.zeros((len(draws), len(u)))
    for level in np.unique(t):
        rows = np.flatnonzero(t == level)
        for j, g in enumerate(draws):
            mean, var = g.predict(u[rows], int(level))
            means[j, rows] = mean.numpy()
            variances[j, rows] = var.numpy() + float(g.noise[int(level)])
    return means, variances


def predict(spec: dict, model: dict, labels: list[dict], x: list) -> dict:
    """The mode draw's mean and variance of y at each point's level and the mixture's, in
    the labels' units; ``fidelity``: each point's level; ``p_success`` where the model holds
    a failure model."""
    draws, data, mode = fidelity.model_draws(spec, model, labels)
    u, t, features = _points(spec, x)
    mode_mean, mode_var = _moments([mode], u, t)
    means, variances = _moments(draws, u, t)
    mixture_mean = means.mean(0)
    mixture_var = variances.mean(0) + means.var(0)
    scale = data.scale_y
    answer = {
        "mean": (scale.mean + scale.std * mode_mean[0]).tolist(),
        "variance": (scale.std**2 * mode_var[0]).tolist(),
        "mixture_mean": (scale.mean + scale.std * mixture_mean).tolist(),
        "mixture_variance": (scale.std**2 * mixture_var).tolist(),
        "fidelity": [fidelities.levels(spec)[level] for level in t],
    }
    failure = of_model(model)
    if failure is not None:
        answer["p_success"] = failure.p_success(features).tolist()
    return answer


def acquisition(spec: dict, model: dict, labels: list[dict], x: list, name: str) -> dict:
    """The acquisition's values of runs at the points' levels: ``ivr``'s top-level variance
    removed per cost, averaged over the points asked (a refit averages it over pool points),
    or a disagreement's at the top level (whatever the point's level)."""
    draws, data, _ = fidelity.model_draws(spec, model, labels)
    draws = fidelity.spaced(np.array(draws, dtype=object), fidelity.SCORING_DRAWS).tolist()
    u, t, _ = _points(spec, x)
    if name == "ivr":
        values = choice.scores(draws, u, t, np.unique(u, axis=0), data.costs, name)
    else:
        values = choice.disagreement(draws, u, name)
    return {"values": [float(v) for v in values], "acquisition": name}


def metrics(spec: dict, model: dict, labels: list[dict], x: list, y: list) -> dict:
    """The top level's metrics on a test set (the points at the top level): the mode draw's
    joint NLML per point and RMSE of its mean, and the mixture's mean NLPD (standardized
    units; ``..._y`` the densities of y itself)."""
    draws, data, mode = fidelity.model_draws(spec, model, labels)
    u, t, _ = _points(spec, x)
    top = data.levels - 1
    if (t != top).any():
        raise ValueError("the test points are of the top level")
    scale = data.scale_y
    z = (np.asarray(y, dtype=np.float64) - scale.mean) / scale.std
    tt = torch.full((len(u),), top, dtype=torch.int64)
    uu = torch.as_tensor(u)
    mean, _ = mode.predict(u, top)
    cov = mode.cross(uu, tt, uu, tt) + float(mode.noise[top]) * torch.eye(
        len(u), dtype=torch.float64
    )
    residual = torch.as_tensor(z) - mean
    L = torch.linalg.cholesky(cov)
    solved = torch.cholesky_solve(residual[:, None], L)[:, 0]
    nll = 0.5 * float(residual @ solved) + float(torch.log(torch.diagonal(L)).sum())
    nlml = (nll + 0.5 * len(u) * math.log(2 * math.pi)) / len(u)
    means, variances = _moments(draws, u, t)
    log_density = -0.5 * ((z - means) ** 2 / variances + np.log(2 * math.pi * variances))
    peak = log_density.max(0)
    mixture = peak + np.log(np.exp(log_density - peak).mean(0))
    nlpd = float(-mixture.mean())
    rmse = float(np.sqrt(np.mean((scale.mean + scale.std * mean.numpy() - np.asarray(y)) ** 2)))
    jacobian = math.log(scale.std)
    return {
        "nlml": nlml,
        "rmse": rmse,
        "nlpd_mixture": nlpd,
        "nlml_y": nlml + jacobian,
        "nlpd_mixture_y": nlpd + jacobian,
    }


def sensitivity(
    spec: dict,
    model: dict,
    labels: list[dict],
    *,
    level: float = 0.95,
    samples: int = 8192,
    seed: int = 0,
    **_,
) -> dict:
    """The top level's Sobol indices: each of :data:`worker.fitting.fidelity.SCORING_DRAWS`
    draws' top-level mean, the declared inputs uniform over their values, by Monte Carlo
    (:func:`worker.vocabulary.sobol.monte_carlo`: the levels' kernels of their own lengthscales
    leave the single GP's closed form behind), summarized over the draws as a single-fidelity
    model's (``method`` ``monte-carlo``, whatever was asked)."""
    draws, data, _ = fidelity.model_draws(spec, model, labels)
    draws = fidelity.spaced(np.array(draws, dtype=object), fidelity.SCORING_DRAWS).tolist()
    declared = Space.of(fidelities.declared_inputs(spec))
    top = data.levels - 1

    def mean(v: np.ndarray) -> np.ndarray:
        x = torch.as_tensor(declared.features(v))
        t = torch.full((len(x),), top, dtype=torch.int64)
        return np.stack([(g.prior(g.u, g.t, x, t).T @ g.alpha).numpy() for g in draws])

    per_draw = sobol.monte_carlo(declared, mean, samples=samples, seed=seed)
    return sobol.summarize(per_draw, declared, level, "monte-carlo", y_std=data.scale_y.std)
