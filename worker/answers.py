"""What a stored model answers (CONTRACT.md's ``/predict``, ``/acquisition`` and ``/evaluate``),
as pure functions of the campaign's spec, its model body and its labels: the posterior-mode GP's
and the mixture's predictions, acquisition values, and the paper's test metrics.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from worker.acquisition import evaluate as acquisition_values
from worker.acquisition import qb_mgp
from worker.design import Box
from worker.gp import Conditioned, predictive_covariance
from worker.mcmc import Posterior
from worker.transforms import OutputStandardization, as_tensor


def _context(spec: dict, model: dict, labels: list[dict]):
    """The model's transforms, the labels it saw in its units, and its thinned draws."""
    x = np.array([label["x"] for label in labels[: model["n_labeled"]]], dtype=float)
    y = np.array([label["y"] for label in labels[: model["n_labeled"]]], dtype=float)
    t = model["transform"]
    box = Box(lower=tuple(t["lower"]), upper=tuple(t["upper"]))
    scale_y = OutputStandardization(mean=t["y_mean"], std=t["y_std"])
    post = Posterior.from_dict(model, draws="acquisition_samples")
    return box, scale_y, as_tensor(box.to_unit(x)), scale_y.to_z(y), post


def predict(spec: dict, model: dict, labels: list[dict], x: list) -> dict:
    """Mode GP's mean and variance of y, and the mixture's, in original units."""
    box, scale_y, u, z, post = _context(spec, model, labels)
    cand = as_tensor(box.to_unit(x))
    mode = post.mode()
    mean, var = Conditioned.fit(u, z, mode.lengthscale, mode.noise).predict(cand)
    m_mean, m_var = Conditioned.fit(u, z, post.lengthscale, post.noise).predict(cand)
    mixture_mean = m_mean.mean(0)
    mixture_var = qb_mgp(m_mean, m_var)  # QB-MGP's score is the mixture's variance
    return {
        "mean": scale_y.mean_from_z(mean[0]).tolist(),
        "variance": scale_y.variance_from_z(var[0]).tolist(),
        "mixture_mean": scale_y.mean_from_z(mixture_mean).tolist(),
        "mixture_variance": scale_y.variance_from_z(mixture_var).tolist(),
    }


def acquisition(spec: dict, model: dict, labels: list[dict], x: list, name: str) -> dict:
    box, _, u, z, post = _context(spec, model, labels)
    values = acquisition_values(name, post, u, z, as_tensor(box.to_unit(x)), seed=model["version"])
    return {"values": values.tolist(), "acquisition": name}


def metrics(spec: dict, model: dict, labels: list[dict], x: list, y: list) -> dict:
    """The paper's metrics on a test set (CONTRACT.md): joint NLML of the mode GP per point and
    the mixture's mean NLPD (standardized units), RMSE of the mode GP's mean (original units)."""
    box, scale_y, u, z, post = _context(spec, model, labels)
    cand = as_tensor(box.to_unit(x))
    z_test = scale_y.to_z(y)
    mode = post.mode()
    mean, cov = predictive_covariance(u, z, mode.lengthscale, mode.noise, cand)
    dist = torch.distributions.MultivariateNormal(mean[0], covariance_matrix=_psd(cov[0]))
    nlml = float(-dist.log_prob(z_test)) / len(z_test)
    rmse = float(torch.sqrt(((scale_y.mean_from_z(mean[0]) - as_tensor(y)) ** 2).mean()))
    m_mean, m_var = Conditioned.fit(u, z, post.lengthscale, post.noise).predict(cand)
    log_density = -0.5 * ((z_test - m_mean) ** 2 / m_var + torch.log(2 * math.pi * m_var))
    nlpd = -(torch.logsumexp(log_density, 0) - math.log(len(m_mean)))
    return {"nlml": nlml, "rmse": rmse, "nlpd_mixture": float(nlpd.mean()), "n": len(z_test)}


def _psd(cov: torch.Tensor) -> torch.Tensor:
    """The covariance, with jitter on its diagonal if rounding made it indefinite."""
    eye = torch.eye(len(cov), dtype=cov.dtype)
    for jitter in (0.0, 1e-10, 1e-8, 1e-6):
        if torch.linalg.cholesky_ex(cov + jitter * eye)[1] == 0:
            return cov + jitter * eye
    return cov + 1e-4 * eye
