"""Fully Bayesian GP fits: NUTS draws of the hyperparameters, their diagnostics and mode.

``sample_posterior(u, z, chains, warmup, samples, seed)`` returns a :class:`Posterior` holding
``chains * samples`` draws of the ARD lengthscales and the noise variance (scaled units, see
CONTRACT.md), the posterior mode used by ALM and predictions, and per-refit diagnostics.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from pyro.ops.stats import effective_sample_size, split_gelman_rubin
from scipy.special import ndtri
from scipy.stats import gaussian_kde

from worker import nuts
from worker.potential import GPPotential
from worker.transforms import DTYPE, as_tensor

# Chains start uniformly in [-2, 2] on every log-hyperparameter (Stan's and Pyro's default).
INIT_RADIUS = 2.0


@dataclass
class Posterior:
    """Draws of the GP hyperparameters, chain-major: chain ``c``'s draws are rows
    ``c * per_chain ... (c + 1) * per_chain - 1``.

    ``lengthscale`` is ``S x d`` and ``noise`` (the variance ``s2``) is ``S``; ``mode_*`` is the
    draw of highest KDE density in log space (computed on the full set of draws and kept by
    :meth:`thinned`); ``diagnostics`` is a JSON-able dict (see :func:`diagnose`); ``adaptation``
    holds the sampler's final step sizes, inverse mass matrices and last states.
    """

    lengthscale: torch.Tensor
    noise: torch.Tensor
    chains: int
    mode_lengthscale: torch.Tensor
    mode_noise: float
    diagnostics: dict = field(default_factory=dict)
    adaptation: dict = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.noise)

    @property
    def per_chain(self) -> int:
        return self.size // self.chains

    def log_draws(self) -> torch.Tensor:
        """``S x (d + 1)``: log lengthscales, then log noise."""
        return torch.cat([self.lengthscale.log(), self.noise.log()[:, None]], -1)

    def thinned(self, thinning: int) -> Posterior:
        """Every ``thinning``-th draw of each chain (the last of each block of ``thinning``)."""
        if thinning < 1:
            raise ValueError("thinning must be >= 1")
        keep = torch.arange(thinning - 1, self.per_chain, thinning)
        rows = (torch.arange(self.chains)[:, None] * self.per_chain + keep[None, :]).reshape(-1)
        return replace(self, lengthscale=self.lengthscale[rows], noise=self.noise[rows])

    def mode(self) -> Posterior:
        """The single-draw posterior at the mode (for ALM and predictions)."""
        return replace(
            self, lengthscale=self.mode_lengthscale[None], noise=torch.tensor([self.mode_noise],
            dtype=DTYPE), chains=1,
        )  # fmt: skip

    def to_dict(self) -> dict:
        """Plain lists and numbers, for JSON."""
        return {
            "lengthscale": self.lengthscale.tolist(),
            "noise": self.noise.tolist(),
            "chains": self.chains,
            "mode": {"lengthscale": self.mode_lengthscale.tolist(), "noise": self.mode_noise},
            "diagnostics": self.diagnostics,
            "adaptation": self.adaptation,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Posterior:
        return cls(
            lengthscale=as_tensor(data["lengthscale"]),
            noise=as_tensor(data["noise"]),
            chains=int(data["chains"]),
            mode_lengthscale=as_tensor(data["mode"]["lengthscale"]),
            mode_noise=float(data["mode"]["noise"]),
            diagnostics=data.get("diagnostics", {}),
            adaptation=data.get("adaptation", {}),
        )


# A warm start is trusted only when its previous posterior mixed, and is redone cold when its own
# draws do not (Stan's and the thresholds: R-hat above 1.05, few effective draws, any
# divergence).
WARM_MAX_RHAT = 1.05
WARM_MIN_ESS = 100.0


def sample_posterior(
    u,
    z,
    chains: int = 5,
    warmup: int = 200,
    samples: int = 300,
    seed: int = 0,
    *,
    target_accept: float = 0.8,
    max_tree_depth: int = 10,
    warm_start: dict | None = None,
    warm_warmup: int = 50,
) -> Posterior:
    """NUTS draws of ``(l_1..l_d, s2)`` given inputs ``u`` (``n x d``, unit cube) and standardized
    outputs ``z`` (``n``), priors LogNormal(0, sqrt(3)) on each. Deterministic for a given seed.

    ``warm_start``: the ``adaptation`` of an earlier posterior of the same campaign (last draws,
    step sizes, inverse mass matrices; with its ``max_rhat``). The chains then start from those
    draws with that mass matrix and ``warm_warmup`` iterations of step-size adaptation; if the
    result does not mix (see ``WARM_*``), it is redone cold with the full warm-up.
    ``diagnostics["warm_start"]`` says which happened.
    """
    u, z = as_tensor(u), as_tensor(z).reshape(-1)
    if u.ndim != 2 or len(u) != len(z) or len(z) == 0:
        raise ValueError("u must be n x d and z of length n, n >= 1")
    if chains < 1 or samples < 1 or warmup < 0:
        raise ValueError("need chains >= 1, samples >= 1, warmup >= 0")
    started = time.perf_counter()
    potential = GPPotential(u, z)
    settings = nuts.NutsSettings(target_accept=target_accept, max_tree_depth=max_tree_depth)
    how = "cold"
    draws = None
    if _usable(warm_start, chains, potential):
        init = np.asarray(warm_start["last"], dtype=np.float64)
        draws = nuts.sample(potential, init, warm_warmup, samples, seed, settings,
                            step_size=warm_start["step_size"],
                            inverse_mass=warm_start["inverse_mass"])  # fmt: skip
        d = diagnose(draws, 0.0, potential.evaluations)
        if d["max_rhat"] > WARM_MAX_RHAT or d["min_ess_bulk"] < WARM_MIN_ESS or d["divergences"]:
            how = f"redone cold (R-hat {d['max_rhat']:.3f}, ESS {d['min_ess_bulk']:.0f}, " \
                  f"{d['divergences']} divergences)"  # fmt: skip
            draws = None
        else:
            how = "warm"
    elif warm_start is not None:
        how = "cold (the previous posterior did not mix or does not fit)"
    if draws is None:
        init = _initial_points(potential, chains, seed)
        draws = nuts.sample(potential, init, warmup, samples, seed, settings)
    seconds = time.perf_counter() - started
    theta = torch.from_numpy(draws.theta.reshape(-1, potential.dim))  # chain-major
    d = u.shape[1]
    mode = theta[posterior_mode_index(theta.numpy())]
    diagnostics = diagnose(draws, seconds, potential.evaluations)
    diagnostics["warm_start"] = how
    return Posterior(
        lengthscale=theta[:, :d].exp(),
        noise=theta[:, d].exp(),
        chains=chains,
        mode_lengthscale=mode[:d].exp(),
        mode_noise=float(mode[d].exp()),
        diagnostics=diagnostics,
        adaptation={
            "step_size": draws.step_size.tolist(),
            "inverse_mass": draws.inverse_mass.tolist(),
            "last": draws.theta[:, -1].tolist(),
            "max_rhat": diagnostics["max_rhat"],
            "seed": seed,
        },
    )


def _usable(warm: dict | None, chains: int, potential: GPPotential) -> bool:
    """A warm start fits (same chains and parameters, finite) and its posterior mixed."""
    if not warm or not all(k in warm for k in ("last", "step_size", "inverse_mass")):
        return False
    last = np.asarray(warm["last"], dtype=np.float64)
    if last.shape != (chains, potential.dim) or len(warm["step_size"]) != chains:
        return False
    if not float(warm.get("max_rhat", np.inf)) <= WARM_MAX_RHAT:
        return False
    return bool(np.isfinite(potential(last)[0]).all())


def _initial_points(potential: GPPotential, chains: int, seed: int) -> np.ndarray:
    """Per chain, a uniform draw in ``[-2, 2]^P`` with a finite potential (chain ``c`` uses its own
    stream, as in the sampler)."""
    init = np.empty((chains, potential.dim))
    for c in range(chains):
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(c, 1)))
        for _ in range(100):
            init[c] = rng.uniform(-INIT_RADIUS, INIT_RADIUS, potential.dim)
            if np.isfinite(potential(init[c : c + 1])[0]).all():
                break
    return init


def posterior_mode_index(log_draws: np.ndarray) -> int:
    """Index of the draw (``S x P``, log space) with the highest Gaussian-KDE density
    (scipy.stats.gaussian_kde, Scott's bandwidth). Draws too degenerate for a KDE (all equal, or
    a singular covariance) fall back to the first draw of the most frequent value."""
    try:
        density = gaussian_kde(log_draws.T)(log_draws.T)
    except (np.linalg.LinAlgError, ValueError):
        values, counts = np.unique(log_draws, axis=0, return_counts=True)
        most = values[np.argmax(counts)]
        return int(np.flatnonzero((log_draws == most).all(1))[0])
    return int(np.argmax(density))


def _rank_normalized(x: np.ndarray) -> np.ndarray:
    """Rank-normalized draws (Vehtari et al. 2021), ``C x S`` -> ``C x S``."""
    ranks = np.argsort(np.argsort(x, axis=None, kind="stable"), kind="stable").reshape(x.shape)
    return ndtri((ranks + 1 - 0.375) / (x.size + 0.25))


def _split(x: np.ndarray) -> np.ndarray:
    """Each chain cut in two halves: ``C x S x ...`` -> ``2C x S//2 x ...``."""
    half = x.shape[1] // 2
    return np.concatenate([x[:, :half], x[:, half : 2 * half]], 0)


def diagnose(draws: nuts.Draws, seconds: float, gradient_evaluations: int) -> dict:
    """Per hyperparameter (``lengthscale_i``, ``noise``): bulk R-hat (split, rank-normalized,
    pyro.ops.stats.split_gelman_rubin) and bulk ESS (split chains, rank-normalized,
    pyro.ops.stats.effective_sample_size); and divergences, mean acceptance, step sizes, tree
    depths, gradient evaluations and seconds."""
    theta = draws.theta  # C x S x P
    names = [f"lengthscale_{i}" for i in range(theta.shape[2] - 1)] + ["noise"]
    rhat, ess = {}, {}
    for j, name in enumerate(names):
        x = theta[:, :, j]
        if theta.shape[1] >= 4 and np.ptp(x) > 0:
            z = torch.from_numpy(_rank_normalized(x))
            rhat[name] = float(split_gelman_rubin(z, chain_dim=0, sample_dim=1))
            ess[name] = float(effective_sample_size(torch.from_numpy(_split(z.numpy())), 0, 1))
        else:
            rhat[name], ess[name] = float("nan"), float("nan")
    return {
        "rhat": rhat,
        "ess_bulk": ess,
        "max_rhat": max(rhat.values()),
        "min_ess_bulk": min(ess.values()),
        "divergences": int(draws.diverging.sum()),
        "warmup_divergences": int(draws.warmup_divergences.sum()),
        "accept_mean": float(draws.accept_stat.mean()),
        "step_size": [float(s) for s in draws.step_size],
        "tree_depth_mean": float(draws.tree_depth.mean()),
        "tree_depth_max": int(draws.tree_depth.max()),
        "gradient_evaluations": gradient_evaluations,
        "seconds": seconds,
        "chains": int(theta.shape[0]),
        "samples_per_chain": int(theta.shape[1]),
    }


__all__ = ["Posterior", "sample_posterior", "posterior_mode_index", "diagnose"]
