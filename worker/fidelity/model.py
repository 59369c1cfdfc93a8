"""The autoregressive multi-fidelity GP (Kennedy and O'Hagan, 2000), fully Bayesian.

Levels ``t = 0 .. T-1``, lowest first; the last is the one the metamodel is for. Each level is
the one below scaled by ``rho`` plus an independent GP of its own:

    f_0(u) = delta_0(u),    f_t(u) = rho_{t-1} f_{t-1}(u) + delta_t(u),    y = f_t(u) + e_t

with ``delta_t ~ GP(0, v_t k_t)``, ``k_t`` an ARD RBF kernel of lengthscales ``l_t`` (the
single-fidelity GP's, :mod:`worker.gp`), ``v_0 = 1`` (the labels standardized together) and
``e_t ~ N(0, s2_t)``. Two runs at ``(u, t)`` and ``(u', s)`` then covary by

    Cov(f_t(u), f_s(u')) = sum_{k <= min(t, s)} c_k(t) c_k(s) v_k k_k(u, u'),
    c_k(t) = rho_k rho_{k+1} ... rho_{t-1}   (1 for k = t)

(:func:`covariance`). A level's points need not be a subset of the level below.

Hyperparameters, unconstrained (:class:`Layout`): every level's ``log l_t`` (``T x d``), the
discrepancies' ``log v_t`` (``t >= 1``), the ``rho_t`` (``T - 1``), the lowest level's ``log
(s2_0 - s2_min)`` and each other level's ``log`` ratio of its ``s2_t - s2_min`` to that one.
Priors: the single-fidelity GP's ``N(0, 3)`` on each log, ``rho ~ N(1, 1)`` (a level is its
lower neighbour's value scaled by about one, its sign and size learned) and ``N(0, 1)`` on the
noises' log ratios (``NOISE_RATIO_PRIOR_SD``). With one level this is the single-fidelity
GP's potential (:class:`worker.potential.GPPotential`). :class:`Potential` is minus the log
posterior with its analytic gradient, row by row (a row's bits do not depend on its batch), the
target that :func:`worker.nuts.sample` draws from.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch
from scipy import linalg

from fbgp_al.worker import nuts
from fbgp_al.worker.convergence import diagnose
from fbgp_al.worker.gp import JITTERS, LOG_2PI
from fbgp_al.worker.potential import PRIOR_VARIANCE
from fbgp_al.worker.vocabulary.defaults import MCMC_DEFAULTS
from fbgp_al.worker.warm_start import judge_warm_start

WARM_WARMUP = MCMC_DEFAULTS["warm_warmup"]  # a warm start's step-size adaptation, as a refit's
RHO_PRIOR = (1.0, 1.0)  # mean and sd of each rho
# The sd of the log ratio of a level's noise variance to the lowest level's: a level's few runs
# (the expensive ones) cannot tell their noise from the signal, and with a noise of its own under
# the single-fidelity prior, 4 expensive runs of Forrester's function were read as noise
# (variance 0.66 of the labels' 1) beside 11 cheap ones
NOISE_RATIO_PRIOR_SD = 1.0


@dataclass(frozen=True)
class Layout:
    """Where each hyperparameter sits in ``theta`` for ``levels`` levels of ``d`` features."""

    levels: int
    d: int

    @property
    def size(self) -> int:
        return self.levels * self.d + (self.levels - 1) * 2 + self.levels

    def split(self, theta: torch.Tensor):
        """``theta`` (``size``) -> lengthscales (``T x d``), variances (``T``, the first 1),
        rhos (``T - 1``) and the noises' exponents (``T``)."""
        T, d = self.levels, self.d
        i = T * d
        log_l = theta[:i].reshape(T, d)
        variances = torch.cat([torch.ones(1, dtype=theta.dtype), torch.exp(theta[i : i + T - 1])])
        rho = theta[i + T - 1 : i + 2 * (T - 1)]
        noise = theta[i + 2 * (T - 1) :]  # the lowest level's, then each other's ratio to it
        log_noise = noise[0] + torch.cat([torch.zeros(1, dtype=theta.dtype), noise[1:]])
        return torch.exp(log_l), variances, rho, log_noise

    def names(self) -> list[str]:
        """Each entry of ``theta``, named as the diagnostics name it."""
        T, d = self.levels, self.d
        return (
            [f"lengthscale_{t}_{i}" for t in range(T) for i in range(d)]
            + [f"variance_{t}" for t in range(1, T)]
            + [f"rho_{t}" for t in range(T - 1)]
            + ["noise"]
            + [f"noise_ratio_{t}" for t in range(1, T)]
        )

    def prior_mean(self) -> np.ndarray:
        T = self.levels
        return np.r_[np.zeros(T * self.d + T - 1), np.full(T - 1, RHO_PRIOR[0]), np.zeros(T)]

    def prior_sd(self) -> np.ndarray:
        T, s = self.levels, math.sqrt(PRIOR_VARIANCE)
        return np.r_[
            np.full(T * self.d + T - 1, s),
            np.full(T - 1, RHO_PRIOR[1]),
            s,
            np.full(T - 1, NOISE_RATIO_PRIOR_SD),
        ]


def scales(rho: torch.Tensor, t: torch.Tensor, levels: int, skip: int | None = None):
    """``c_k(t)`` for each level of ``t`` (``n``) and each ``k < levels``: ``n x levels``, 0
    where ``k > t`` (``rho``: ``levels - 1``); with ``skip``, the product without
    ``rho_skip`` (its derivative's other factors)."""
    columns = []
    for k in range(levels):
        c = torch.ones(len(t), dtype=torch.float64)
        for j in range(k, levels - 1):
            if j != skip:
                c = c * torch.where(t > j, rho[j], 1.0)
        columns.append(torch.where(t >= k, c, 0.0))
    return torch.stack(columns, 1)


def rbf(u1, u2, lengthscale):
    """``exp(-|(u1 - u2) / l|^2 / 2)``, ``n x m`` (torch, float64)."""
    a, b = u1 / lengthscale, u2 / lengthscale
    sq = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
    return torch.exp(-0.5 * torch.clamp(sq, min=0.0))


def covariance(u1, t1, u2, t2, lengthscales, variances, rho):
    """The latent covariance between runs at ``(u1, t1)`` and ``(u2, t2)`` (``n x m``) for one
    set of hyperparameters (lengthscales ``T x d``, variances ``T``, ``rho`` ``T - 1``;
    torch)."""
    T = lengthscales.shape[0]
    c1, c2 = scales(rho, t1, T), scales(rho, t2, T)
    K = torch.zeros(len(u1), len(u2), dtype=torch.float64)
    for k in range(T):
        K = K + (c1[:, k, None] * c2[None, :, k]) * variances[k] * rbf(u1, u2, lengthscales[k])
    return K


def cholesky(K):
    """Lower Cholesky factor, with growing jitter (:data:`worker.gp.JITTERS`) where it fails;
    None where none helps."""
    eye = torch.eye(len(K), dtype=K.dtype)
    for jitter in (0.0, *JITTERS):
        L, info = torch.linalg.cholesky_ex(K + jitter * eye)
        if int(info) == 0:
            return L
    return None


class Potential:
    """``U(theta) = -log p(z | theta) - log p(theta)`` for runs at features ``u`` (``n x d``)
    and levels ``t`` (``n``, ``0 .. levels-1``) with standardized labels ``z``. Called on
    ``theta`` (``B x size``): ``U`` (``B``) and its gradient, float64 numpy, the gradient
    analytic (``-tr((a a^T - K^-1) dK/dtheta) / 2`` plus the prior's; :meth:`one` is the same
    ``U`` in torch, whose autograd the tests compare it with). A row whose covariance no jitter
    factorizes gets ``U = inf`` and a zero gradient."""

    def __init__(self, u, t, z, levels: int, noise_floor: float = 0.0):
        self.u = torch.as_tensor(np.asarray(u, dtype=np.float64))
        self.t = torch.as_tensor(np.asarray(t, dtype=np.int64))
        self.z = torch.as_tensor(np.asarray(z, dtype=np.float64))
        self.layout = Layout(int(levels), self.u.shape[1])
        self.noise_floor = float(noise_floor)
        if len(self.t) != len(self.u) or len(self.z) != len(self.u):
            raise ValueError("one level and one label per run")
        if self.t.min() < 0 or self.t.max() >= levels:
            raise ValueError(f"levels must lie in 0..{levels - 1}")
        self.mean = torch.as_tensor(self.layout.prior_mean())
        self.sd = torch.as_tensor(self.layout.prior_sd())
        n, size = len(self.z), self.layout.size
        self.constant = 0.5 * n * LOG_2PI + float(torch.log(self.sd).sum()) + 0.5 * size * LOG_2PI
        un, self.tn, self.zn = self.u.numpy(), self.t.numpy(), self.z.numpy()
        self.sq = (un[:, None, :] - un[None, :, :]) ** 2  # n x n x d

    @property
    def dim(self) -> int:
        return self.layout.size

    def noise(self, log_noise):
        return self.noise_floor + torch.exp(log_noise)

    def one(self, theta: torch.Tensor) -> torch.Tensor:
        """``U`` at one ``theta`` (torch, differentiable)."""
        ell, v, rho, log_noise = self.layout.split(theta)
        K = covariance(self.u, self.t, self.u, self.t, ell, v, rho)
        K = K + torch.diag(self.noise(log_noise)[self.t])
        L = cholesky(K)
        if L is None:
            return torch.tensor(math.inf, dtype=torch.float64)
        a = torch.cholesky_solve(self.z[:, None], L)[:, 0]
        data = 0.5 * (self.z @ a) + torch.log(torch.diagonal(L)).sum()
        prior = 0.5 * (((theta - self.mean) / self.sd) ** 2).sum()
        return data + prior + self.constant

    def __call__(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        theta = np.atleast_2d(np.asarray(theta, dtype=np.float64))
        value, grad = np.full(len(theta), math.inf), np.zeros_like(theta)
        with np.errstate(all="ignore"):
            for b, row in enumerate(theta):
                out = self._row(row)
                if out is not None and np.isfinite(out[0]) and np.isfinite(out[1]).all():
                    value[b], grad[b] = out
        return value, grad

    def _row(self, theta: np.ndarray):
        T, d = self.layout.levels, self.layout.d
        ell, v, rho, log_noise = (a.numpy() for a in self.layout.split(torch.as_tensor(theta)))
        c = scales(torch.as_tensor(rho), self.t, T).numpy()  # n x T
        kernels = [v[k] * np.exp(-0.5 * (self.sq / ell[k] ** 2).sum(-1)) for k in range(T)]
        parts = [np.outer(c[:, k], c[:, k]) * kernels[k] for k in range(T)]
        noise = self.noise_floor + np.exp(log_noise)
        K = sum(parts) + np.diag(noise[self.tn])
        factor = None
        for jitter in (0.0, *JITTERS):
            try:
                factor = linalg.cho_factor(K + jitter * np.eye(len(K)), lower=True)
                break
            except (linalg.LinAlgError, ValueError):  # not positive definite; not finite
                continue
        if factor is None:
            return None
        a = linalg.cho_solve(factor, self.zn)
        W = np.outer(a, a) - linalg.cho_solve(factor, np.eye(len(K)))
        value = 0.5 * self.zn @ a + np.log(np.diagonal(factor[0])).sum()
        g = np.empty(self.layout.size)
        for k in range(T):  # log lengthscales: dK = part_k * D_i / l_i^2
            g[k * d : (k + 1) * d] = np.einsum("ab,abi->i", W * parts[k], self.sq) / ell[k] ** 2
        i = T * d
        g[i : i + T - 1] = [(W * parts[k]).sum() for k in range(1, T)]  # log v_k
        for j in range(T - 1):  # rho_j: d c_k(t) / d rho_j = c_k(t) / rho_j for k <= j < t
            dc = np.where((np.arange(T)[None, :] <= j) & (self.tn[:, None] > j), 1.0, 0.0)
            dc *= scales(torch.as_tensor(rho), self.t, T, skip=j).numpy()
            g[i + T - 1 + j] = sum(
                (W * (np.outer(dc[:, k], c[:, k]) + np.outer(c[:, k], dc[:, k])) * kernels[k]).sum()
                for k in range(T)
            )
        diag = np.diagonal(W)
        per_level = [
            (diag * (self.tn == s)).sum() * (noise[s] - self.noise_floor) for s in range(T)
        ]
        g[i + 2 * (T - 1)] = sum(per_level)  # the lowest level's log noise moves every level's
        g[i + 2 * (T - 1) + 1 :] = per_level[1:]
        mean, sd = self.mean.numpy(), self.sd.numpy()
        prior = 0.5 * (((theta - mean) / sd) ** 2).sum()
        return value + prior + self.constant, -0.5 * g + (theta - mean) / sd**2

    def values(self, theta: np.ndarray) -> np.ndarray:
        return self(theta)[0]


@dataclass
class Conditioned:
    """The multi-fidelity GP at one set of hyperparameters, conditioned on its runs: the
    latent's predictive mean and variance at any level (:meth:`predict`) and the posterior
    covariance between two sets of runs (:meth:`cross`)."""

    u: torch.Tensor
    t: torch.Tensor
    z: torch.Tensor
    lengthscales: torch.Tensor
    variances: torch.Tensor
    rho: torch.Tensor
    noise: torch.Tensor  # per level

    def __post_init__(self):
        K = self.prior(self.u, self.t, self.u, self.t) + torch.diag(self.noise[self.t])
        self.L = cholesky(K)
        if self.L is None:
            raise ValueError("the runs' covariance could not be factorized")
        self.alpha = torch.cholesky_solve(self.z[:, None], self.L)[:, 0]

    @classmethod
    def of(cls, potential: Potential, theta) -> Conditioned:
        ell, v, rho, log_noise = potential.layout.split(torch.as_tensor(theta))
        return cls(potential.u, potential.t, potential.z, ell, v, rho, potential.noise(log_noise))

    def prior(self, u1, t1, u2, t2):
        return covariance(u1, t1, u2, t2, self.lengthscales, self.variances, self.rho)

    def whitened(self, u, t):
        """``L^-1 K(runs, (u, t))``: ``n x m``."""
        k = self.prior(self.u, self.t, torch.as_tensor(u), torch.as_tensor(t))
        return torch.linalg.solve_triangular(self.L, k, upper=False)

    def predict(self, u, level: int):
        """The latent ``f_level``'s posterior mean and variance at ``u`` (``m x d``)."""
        u = torch.as_tensor(np.asarray(u, dtype=np.float64))
        t = torch.full((len(u),), int(level), dtype=torch.int64)
        k = self.prior(self.u, self.t, u, t)
        A = torch.linalg.solve_triangular(self.L, k, upper=False)
        return k.T @ self.alpha, torch.clamp(self.prior_variance(level) - (A * A).sum(0), min=0.0)

    def prior_variance(self, level: int) -> torch.Tensor:
        """``Var f_level(u)`` before any run, the same at every ``u``: ``sum_k c_k(level)^2
        v_k``."""
        c = scales(self.rho, torch.tensor([int(level)]), len(self.variances))[0]
        return (c * c * self.variances).sum()

    def cross(self, u1, t1, u2, t2):
        """The latent's posterior covariance between runs ``(u1, t1)`` and ``(u2, t2)``."""
        A1, A2 = self.whitened(u1, t1), self.whitened(u2, t2)
        u1, t1, u2, t2 = (torch.as_tensor(a) for a in (u1, t1, u2, t2))
        return self.prior(u1, t1, u2, t2) - A1.T @ A2


def sample(
    potential: Potential,
    chains: int,
    warmup: int,
    samples: int,
    seed: int,
    warm: dict | None = None,
    warm_warmup: int = WARM_WARMUP,
) -> tuple[np.ndarray, dict]:
    """NUTS draws of ``potential`` (:func:`worker.nuts.sample`, Stan's adaptation): the draws
    (``chains * samples x size``, chain-major) and their diagnostics (R-hat, ESS and divergences
    per hyperparameter, :func:`worker.convergence.diagnose`, and ``adaptation``: each chain's
    last draw, step size and inverse mass matrix).

    Cold, the chains start at seeded points near the priors' centre. Given ``warm``, an earlier
    refit's ``adaptation`` of as many chains and hyperparameters (the same campaign with more
    runs), they start from its draws with its mass matrix and ``warm_warmup`` iterations of
    step-size adaptation, and are redone cold where the draws do not mix (the single-fidelity
    refit's rule, :func:`worker.warm_start.judge_warm_start`); ``start`` says which."""
    layout = potential.layout
    started = time.perf_counter()
    fits = warm is not None and np.shape(warm.get("last")) == (chains, layout.size)
    draws, how = None, "cold"
    if fits:
        draws = nuts.sample(
            potential,
            np.asarray(warm["last"], dtype=np.float64),
            warm_warmup,
            samples,
            seed,
            step_size=np.asarray(warm["step_size"], dtype=np.float64),
            inverse_mass=np.asarray(warm["inverse_mass"], dtype=np.float64),
        )
        how, redo = judge_warm_start(draws, "warm", warm)
        calls = draws.potential_calls
        if redo:
            draws = None
    if draws is None:
        rng = np.random.default_rng([seed, 11])
        init = layout.prior_mean() + 0.1 * layout.prior_sd() * rng.standard_normal(
            (chains, layout.size)
        )
        draws = nuts.sample(potential, init, warmup, samples, seed)
        if fits:  # the discarded warm run's cost counts
            draws.potential_calls += calls
        elif warm is not None:
            how = "cold (the previous adaptation does not fit)"
    report = diagnose(draws, time.perf_counter() - started, draws.potential_calls, layout.names())
    report["start"] = how
    report["adaptation"] = {
        "last": draws.theta[:, -1].tolist(),
        "step_size": draws.step_size.tolist(),
        "inverse_mass": draws.inverse_mass.tolist(),
    }
    return draws.theta.reshape(-1, layout.size), report
