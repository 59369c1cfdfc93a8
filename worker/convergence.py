"""How far a posterior's chains have converged: bulk R-hat and bulk ESS of each hyperparameter
(:func:`convergence`), a refit's diagnostics (:func:`diagnose`), and the :class:`Target` that
sampling runs to (:func:`worker.mcmc.sample_posterior`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import torch
from pyro.ops.stats import effective_sample_size, split_gelman_rubin
from scipy.special import ndtri

from fbgp_al.worker import nuts


@dataclass(frozen=True)
class Target:
    """Sample to a target: ``draws`` draws are used for scoring (spread evenly over the chains),
    so the chains run until their bulk ESS (every hyperparameter's) is at least ``draws`` and,
    unless ``rhat`` is None, their split R-hat at most ``rhat``; or ``max_samples`` kept draws
    per chain. With ``rhat`` None R-hat is reported, not waited for (a campaign's
    ``target_rhat: null``)."""

    draws: int
    rhat: float | None = 1.01
    max_samples: int = 1000

    @classmethod
    def of(cls, mcmc: dict) -> Target | None:
        """The target a campaign's ``mcmc`` settings ask for (None: a fixed count)."""
        if not mcmc.get("draws"):
            return None
        rhat = mcmc.get("target_rhat", 1.01)  # specs made before the option: 1.01
        return cls(
            draws=int(mcmc["draws"]),
            rhat=None if rhat is None else float(rhat),
            max_samples=int(mcmc.get("max_samples", 1000)),
        )

    def share(self, chains: int, of: int) -> Target:
        """The part of the target that ``chains`` of ``of`` chains must reach on their own."""
        return replace(self, draws=max(1, math.ceil(self.draws * chains / of)))

    def met(self, d: dict) -> bool:
        rhat_met = self.rhat is None or d["max_rhat"] <= self.rhat
        return bool(rhat_met and d["min_ess_bulk"] >= self.draws)

    def more(self, draws: nuts.Draws) -> int:
        """How many more draws per chain to run after ``draws`` (0: the target is met or the
        cap reached). The ESS grows about linearly with the draws: ask for what it projects,
        10% over, at least a quarter and at most as many again as there are."""
        return self.more_of(draws.theta)

    def more_of(self, theta: np.ndarray) -> int:
        """:meth:`more` of draws ``C x S x P``: chain groups on several workers ask it of all
        the posterior's chains at each check, in chain order, and so decide as one process
        running every chain would."""
        have = theta.shape[1]
        if have >= self.max_samples:
            return 0
        rhat, ess = convergence(theta)
        if self.met({"max_rhat": max(rhat.values()), "min_ess_bulk": min(ess.values())}):
            return 0
        ess = min(ess.values())
        need = have * self.draws / ess * 1.1 if ess > 0 else 2 * have  # NaN: stuck, double
        extra = int(min(max(need - have, have / 4), have)) if np.isfinite(need) else have
        return max(1, min(extra, self.max_samples - have))


def _rank_normalized(x: np.ndarray) -> np.ndarray:
    """Rank-normalized draws (Vehtari et al. 2021), ``C x S`` -> ``C x S``."""
    ranks = np.argsort(np.argsort(x, axis=None, kind="stable"), kind="stable").reshape(x.shape)
    return ndtri((ranks + 1 - 0.375) / (x.size + 0.25))


def _split(x: np.ndarray) -> np.ndarray:
    """Each chain cut in two halves: ``C x S x ...`` -> ``2C x S//2 x ...``."""
    half = x.shape[1] // 2
    return np.concatenate([x[:, :half], x[:, half : 2 * half]], 0)


def bounded_ess(ess: float, draws: int) -> float:
    """An ESS estimate held to ``(0, N log10 N]`` for ``N`` draws, as Stan holds it (its
    autocorrelation time at least ``1 / log10 N``). Pyro's estimate has no such floor: short
    or antithetic chains give a negative time, so a negative ESS, or one far above N."""
    most = draws * math.log10(draws)
    return most if not 0 < ess <= most else ess


def convergence(theta: np.ndarray, names: list[str] | None = None) -> tuple[dict, dict]:
    """Bulk R-hat (split, rank-normalized, pyro.ops.stats.split_gelman_rubin) and bulk ESS
    (split chains, rank-normalized, pyro.ops.stats.effective_sample_size, held to
    :func:`bounded_ess`) of each hyperparameter (``lengthscale_i``, ``noise``, or ``names``) of
    draws ``C x S x P``; NaN when there are fewer than 4 draws per chain or all are equal."""
    if names is None:
        names = [f"lengthscale_{i}" for i in range(theta.shape[2] - 1)] + ["noise"]
    rhat, ess = {}, {}
    for j, name in enumerate(names):
        x = theta[:, :, j]
        if theta.shape[1] >= 4 and np.ptp(x) > 0:
            z = torch.from_numpy(_rank_normalized(x))
            rhat[name] = float(split_gelman_rubin(z, chain_dim=0, sample_dim=1))
            split = _split(z.numpy())
            ess[name] = bounded_ess(
                float(effective_sample_size(torch.from_numpy(split), 0, 1)), split.size
            )
        else:
            rhat[name], ess[name] = float("nan"), float("nan")
    return rhat, ess


def diagnose(
    draws: nuts.Draws, seconds: float, gradient_evaluations: int, names: list[str] | None = None
) -> dict:
    """Per hyperparameter (``lengthscale_i``, ``noise``, or ``names``): bulk R-hat and bulk ESS
    (see :func:`convergence`); and divergences, mean acceptance, step sizes, tree depths,
    gradient evaluations and seconds."""
    theta = draws.theta  # C x S x P
    rhat, ess = convergence(theta, names)
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
        "leapfrogs_per_draw": float(draws.n_leapfrog.mean()),
        "gradient_evaluations": gradient_evaluations,
        "seconds": seconds,
        "chains": int(theta.shape[0]),
        "samples_per_chain": int(theta.shape[1]),
    }
