"""Expectation propagation for the probit failure model (GPML Algorithm 3.5): the sites at their
fixed point and EP's log marginal likelihood."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import linalg, special

from fbgp_al.worker.feasibility.likelihoods import LOG_SQRT_2PI, _cholesky

# EP: stop when log Z_EP moves by less than this after a sweep; sites' precisions capped
EP_TOL = 1e-10
EP_SWEEPS = 100
EP_MAX_TAU = 1e10


@dataclass
class Sites:
    """Expectation propagation's Gaussian sites ``N(f_i; nu_i / tau_i, 1 / tau_i)`` at their fixed
    point, with ``sqrt(tau)``, ``L = chol(I + S^1/2 K S^1/2)``, ``alpha`` (the latent mean is
    ``k*' alpha``) and EP's log marginal likelihood ``log Z_EP`` (GPML eq. 3.65)."""

    tau: np.ndarray
    nu: np.ndarray
    sW: np.ndarray
    L: np.ndarray
    alpha: np.ndarray
    log_marginal: float
    sweeps: int


def _ep_state(K: np.ndarray, tau: np.ndarray, nu: np.ndarray):
    """The posterior ``N(mu, Sigma)`` of the latents under the sites, from scratch (GPML
    Algorithm 3.5, lines 10-12): ``Sigma = K - V' V`` with ``V = L^-1 S^1/2 K``."""
    sW = np.sqrt(tau)
    L = _cholesky(np.eye(len(tau)) + sW[:, None] * K * sW[None, :])
    V = linalg.solve_triangular(L, sW[:, None] * K, lower=True)
    Sigma = K - V.T @ V
    return sW, L, Sigma, Sigma @ nu


def _ep_log_marginal(y, tau, nu, L, Sigma, mu) -> float:
    """``log Z_EP`` (GPML eq. 3.65) in the form that stays finite as sites vanish (``tau_i ->
    0``), as the GPML toolbox's ``infEP`` writes it: the cavities' normalizers, the Gaussian
    terms of the sites against the cavities, and ``-log|B| / 2``."""
    v = np.diag(Sigma)
    tau_c = 1.0 / v - tau
    nu_c = mu / v - nu
    z = y * (nu_c / tau_c) / np.sqrt(1.0 + 1.0 / tau_c)
    value = (
        special.log_ndtr(z).sum()
        + 0.5 * nu @ Sigma @ nu
        - 0.5 * (v * nu) @ nu
        + 0.5 * nu_c @ ((tau / tau_c * nu_c - 2.0 * nu) * v)
        + 0.5 * np.log1p(tau / tau_c).sum()
        - np.log(np.diag(L)).sum()
    )
    return float(value)


def expectation_propagation(K: np.ndarray, y: np.ndarray, tau0=None, nu0=None) -> Sites:
    """GPML Algorithm 3.5 for the probit likelihood: sequential sweeps over the sites, each
    matching the mean and variance of ``cavity x Phi(y_i f_i)`` in closed form (GPML eq. 3.58)
    and updating ``Sigma`` by rank one, ``Sigma`` refactorized after each sweep; until ``log
    Z_EP`` moves by less than ``EP_TOL``. ``tau0, nu0``: sites to start from (the previous
    hyperparameters' fixed point)."""
    n = len(y)
    tau = np.zeros(n) if tau0 is None else np.array(tau0, dtype=np.float64)
    nu = np.zeros(n) if nu0 is None else np.array(nu0, dtype=np.float64)
    sW, L, Sigma, mu = _ep_state(K, tau, nu)
    value, sweeps = -math.inf, 0
    for sweeps in range(1, EP_SWEEPS + 1):  # noqa: B007
        for i in range(n):
            s_ii = Sigma[i, i]
            tau_c = 1.0 / s_ii - tau[i]
            if not tau_c > 0.0:
                continue
            var_c = 1.0 / tau_c
            m_c = (mu[i] / s_ii - nu[i]) * var_c
            root = math.sqrt(1.0 + var_c)
            z = y[i] * m_c / root
            r = math.exp(-0.5 * z * z - LOG_SQRT_2PI - float(special.log_ndtr(z)))
            mu_hat = m_c + y[i] * var_c * r / root
            var_hat = max(var_c - var_c * var_c * r * (z + r) / (1.0 + var_c), var_c * 1e-12)
            tau_new = min(max(1.0 / var_hat - tau_c, 0.0), EP_MAX_TAU)
            delta = tau_new - tau[i]
            tau[i] = tau_new
            nu[i] = mu_hat / var_hat - m_c * tau_c
            s = Sigma[:, i].copy()
            Sigma -= (delta / (1.0 + delta * s_ii)) * np.outer(s, s)
            mu = Sigma @ nu
        sW, L, Sigma, mu = _ep_state(K, tau, nu)
        new = _ep_log_marginal(y, tau, nu, L, Sigma, mu)
        done = abs(new - value) < EP_TOL
        value = new
        if done:
            break
    alpha = nu - sW * linalg.cho_solve((L, True), sW * (K @ nu))
    return Sites(tau=tau, nu=nu, sW=sW, L=L, alpha=alpha, log_marginal=value, sweeps=sweeps)
