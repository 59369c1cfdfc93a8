"""Fully Bayesian GP fits: NUTS draws of the hyperparameters, their diagnostics and mode.

``sample_posterior(u, z, chains, warmup, samples, seed)`` returns a :class:`Posterior` holding
``chains * samples`` draws of the ARD lengthscales and the noise variance (scaled units, see
docs/concepts/index.md), the posterior mode used by ALM and predictions, and per-refit
diagnostics.

With a :class:`Target` the chains run past ``samples`` until the draws used for scoring are
backed by enough effective draws (bulk ESS >= their number) and the chains agree (split R-hat
<= ``target.rhat``), or until ``target.max_samples`` per chain.

Its parts live beside it: where cold chains start (:mod:`worker.cold_start`), when a warm start
is kept (:mod:`worker.warm_start`), R-hat, ESS, the diagnostics and the :class:`Target`
(:mod:`worker.convergence`), and the mode (:mod:`worker.mode`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Generator
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from fbgp_al.worker import nuts
from fbgp_al.worker.cold_start import initial_points
from fbgp_al.worker.convergence import Target, diagnose
from fbgp_al.worker.mode import MODE_DRAWS, mode_index, posterior_mode_index
from fbgp_al.worker.potential import GPPotential
from fbgp_al.worker.transforms import DTYPE, as_tensor
from fbgp_al.worker.vocabulary.defaults import MCMC_DEFAULTS
from fbgp_al.worker.warm_start import judge_warm_start, usable

METRICS = ("diag", "dense")


@dataclass
class Posterior:
    """Draws of the GP hyperparameters, chain-major: chain ``c``'s draws are rows
    ``c * per_chain ... (c + 1) * per_chain - 1``.

    ``lengthscale`` is ``S x d`` and ``noise`` (the variance ``s2``) is ``S``; ``mode_*`` is the
    draw of highest KDE density in log space (computed on all the draws, or on a seeded
    subsample of ``MODE_DRAWS``, and kept by :meth:`thinned`); ``diagnostics`` is a JSON-able
    dict (see :func:`diagnose`); ``adaptation`` holds the sampler's final step sizes, inverse mass
    matrices and last states.
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

    def spread(self, draws: int) -> Posterior:
        """About ``draws`` draws, the same number from each chain, evenly spaced along it and
        ending with its last draw (all of them when there are fewer)."""
        per = min(self.per_chain, max(1, math.ceil(draws / self.chains)))
        keep = torch.from_numpy(
            np.round(np.linspace(self.per_chain / per - 1, self.per_chain - 1, per)).astype(int)
        )
        rows = (torch.arange(self.chains)[:, None] * self.per_chain + keep[None, :]).reshape(-1)
        return replace(self, lengthscale=self.lengthscale[rows], noise=self.noise[rows])

    def for_scoring(self, mcmc: dict) -> Posterior:
        """The draws a campaign's ``mcmc`` settings hand to the acquisition: ``draws`` of them
        spread over the chains when it samples to a target, else every ``thinning``-th; all of
        a Laplace mixture's (:mod:`worker.laplace`: as many as scoring takes, and independent)."""
        if self.diagnostics.get("method") == "laplace":
            return self
        if mcmc.get("draws"):
            return self.spread(int(mcmc["draws"]))
        return self.thinned(int(mcmc["thinning"]))

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
            self,
            lengthscale=self.mode_lengthscale[None],
            noise=torch.tensor([self.mode_noise], dtype=DTYPE),
            chains=1,
        )

    def to_dict(self) -> dict:
        """Plain lists and numbers, as a model body (``GET /campaigns/{id}/model``,
        docs/reference/http.md) holds them:
        ``samples`` (``lengthscale``, ``noise``), ``mode``, ``chains``, ``diagnostics`` and
        ``adaptation``."""
        return {
            "samples": {"lengthscale": self.lengthscale.tolist(), "noise": self.noise.tolist()},
            "mode": {"lengthscale": self.mode_lengthscale.tolist(), "noise": self.mode_noise},
            "chains": self.chains,
            "diagnostics": self.diagnostics,
            "adaptation": self.adaptation,
        }

    @classmethod
    def from_dict(cls, data: dict, draws: str = "samples") -> Posterior:
        """The inverse of :meth:`to_dict`, from a model body too: ``draws="acquisition_samples"``
        reads its thinned draws (the ones acquisitions and predictions use)."""
        return cls(
            lengthscale=as_tensor(data[draws]["lengthscale"]),
            noise=as_tensor(data[draws]["noise"]),
            chains=int(data["chains"]),
            mode_lengthscale=as_tensor(data["mode"]["lengthscale"]),
            mode_noise=float(data["mode"]["noise"]),
            diagnostics=data.get("diagnostics", {}),
            adaptation=data.get("adaptation", {}),
        )


def sample_posterior(
    u,
    z,
    chains: int = MCMC_DEFAULTS["chains"],
    warmup: int = MCMC_DEFAULTS["warmup"],
    samples: int = MCMC_DEFAULTS["samples"],
    seed: int = 0,
    *,
    target_accept: float = 0.8,
    max_tree_depth: int = 10,
    warm_start: dict | None = None,
    warm_warmup: int = MCMC_DEFAULTS["warm_warmup"],
    init: str = MCMC_DEFAULTS["init"],
    target: Target | None = None,
    metric: str = "diag",
    mode_draws: int = MODE_DRAWS,
    label_noise=None,
    start_metric: bool = MCMC_DEFAULTS["start_metric"],
    prior_mean=None,
    mode_rule: str = "kde",
    noise_floor: float = MCMC_DEFAULTS["noise_floor"],
) -> Posterior:
    """NUTS draws of ``(l_1..l_d, s2)`` given inputs ``u`` (``n x d``, unit cube) and standardized
    outputs ``z`` (``n``), priors LogNormal(0, sqrt(3)) on each. Deterministic for a given seed.

    ``warm_start``: the ``adaptation`` of an earlier posterior of the same campaign (last draws,
    step sizes, inverse mass matrices; with its ``max_rhat``). The chains then start from those
    draws with that mass matrix and ``warm_warmup`` iterations of step-size adaptation; if the
    result does not mix (see :mod:`worker.warm_start`), it is redone cold with the full warm-up.
    ``diagnostics["warm_start"]`` says which happened. ``init``: where cold chains start (see
    ``INITS`` in :mod:`worker.cold_start`). ``target``: run past ``samples`` draws per chain to
    it (see :class:`Target`).
    ``metric``: the mass matrix, ``"diag"`` or ``"dense"`` (Stan's ``diag_e``, ``dense_e``).
    ``mode_draws``: the most draws the mode's KDE looks at (see :func:`posterior_mode_index`).
    ``label_noise``: the labels' known noise variances (``n``, standardized units), added to the
    covariance's diagonal beside the sampled ``s2`` (None: none). ``start_metric``: cold
    chains that start from the posterior's modes (``init="grid"`` with two inputs or more) begin
    their warm-up with their mode's Laplace covariance as their inverse mass matrix instead of
    the identity, and adapt from there as Stan does (with one input the grid start keeps the
    identity: on a two-mode posterior the grid's covariance gave more divergences).
    ``prior_mean``: the priors' means on the log-hyperparameters (``d + 1``, default 0; see
    :class:`~worker.potential.GPPotential`); where cold chains start moves with them.
    ``mode_rule``: how the mode is picked from the draws (see :func:`mode_index`).
    ``noise_floor``: the least noise variance (standardized units): ``s2 = noise_floor +
    exp(theta_noise)`` (see :class:`~worker.potential.GPPotential`); the draws' ``noise`` include
    it.
    """
    u, z = _checked(u, z, chains, samples, warmup)
    started = time.perf_counter()
    ids = list(range(chains))
    kw = {
        "target_accept": target_accept,
        "max_tree_depth": max_tree_depth,
        "init": init,
        "target": target,
        "metric": metric,
        "label_noise": label_noise,
        "start_metric": start_metric,
        "prior_mean": prior_mean,
        "noise_floor": noise_floor,
    }
    draws, how = run_chains(
        u, z, ids, warmup, samples, seed, warm_start=warm_start, warm_warmup=warm_warmup, **kw
    )
    calls = draws.potential_calls
    how, redo = judge_warm_start(draws, how, warm_start, target)
    if redo:
        draws, _ = run_chains(u, z, ids, warmup, samples, seed, **kw)
        draws.potential_calls += calls  # the discarded warm run's cost counts
    post = assemble(
        draws,
        u.shape[1],
        time.perf_counter() - started,
        how,
        seed,
        mode_draws,
        mode_rule=mode_rule,
        prior_mean=prior_mean,
        noise_floor=noise_floor,
    )
    if target is not None:
        post.diagnostics["target"] = {
            "draws": target.draws,
            "rhat": target.rhat,
            "max_samples": target.max_samples,
            "met": target.met(post.diagnostics),
        }
    return post


def _checked(u, z, chains, samples, warmup):
    u, z = as_tensor(u), as_tensor(z).reshape(-1)
    if u.ndim != 2 or len(u) != len(z) or len(z) == 0:
        raise ValueError("u must be n x d and z of length n, n >= 1")
    if chains < 1 or samples < 1 or warmup < 0:
        raise ValueError("need chains >= 1, samples >= 1, warmup >= 0")
    return u, z


def run_chains(*args, target: Target | None = None, more=None, **kwargs) -> tuple[nuts.Draws, str]:
    """:func:`chain_sampling` (the same arguments), its checks answered here: with a
    ``target``, these chains run to it on their own (a group alone: pass its share), unless
    ``more`` (``Draws -> int``, as :func:`worker.nuts.sample`'s) says when to stop instead;
    with neither, the draws asked for. Returns the draws and ``"warm"`` or ``"cold"``."""
    if more is None and target is not None:
        more = target.more
    return nuts.answered(chain_sampling(*args, **kwargs), more)


def chain_sampling(
    u,
    z,
    chain_ids: list[int],
    warmup: int,
    samples: int,
    seed: int,
    *,
    warm_start: dict | None = None,
    warm_warmup: int = MCMC_DEFAULTS["warm_warmup"],
    target_accept: float = 0.8,
    max_tree_depth: int = 10,
    init: str = MCMC_DEFAULTS["init"],
    metric: str = "diag",
    label_noise=None,
    start_metric: bool = False,
    prior_mean=None,
    noise_floor: float = MCMC_DEFAULTS["noise_floor"],
) -> Generator[nuts.Draws, int, tuple[nuts.Draws, str]]:
    """NUTS for the chains numbered ``chain_ids`` of a posterior (all of them, or a group that a
    worker runs while others run the rest): each chain's initial point and random streams depend
    only on ``seed`` and its number. A generator (:func:`worker.nuts.sampling`): it yields the
    kept draws at each check, is sent how many more per chain to run (0: stop), and returns the
    draws and ``"warm"`` or ``"cold"``. ``label_noise``, ``start_metric``, ``prior_mean``,
    ``noise_floor``: as :func:`sample_posterior`'s."""
    u, z = as_tensor(u), as_tensor(z).reshape(-1)
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; known: {', '.join(METRICS)}")
    noise = None if label_noise is None else as_tensor(label_noise).numpy()
    potential = GPPotential(u, z, noise, prior_mean, noise_floor)
    settings = nuts.NutsSettings(
        target_accept=target_accept, max_tree_depth=max_tree_depth, dense_mass=metric == "dense"
    )
    ids = np.asarray(chain_ids, dtype=np.int64)
    if usable(warm_start, ids, potential):
        rows = {
            k: np.asarray(warm_start[k], dtype=np.float64)[ids]
            for k in ("last", "step_size", "inverse_mass")
        }
        draws = yield from nuts.sampling(
            potential,
            rows["last"],
            warm_warmup,
            samples,
            seed,
            settings,
            step_size=rows["step_size"],
            inverse_mass=rows["inverse_mass"],
            chain_ids=ids,
        )
        return draws, "warm"
    start, guess = initial_points(potential, ids, seed, init)
    if not start_metric:
        guess = None
    draws = yield from nuts.sampling(
        potential,
        start,
        warmup,
        samples,
        seed,
        settings,
        chain_ids=ids,
        inverse_mass=guess,
        adapt_mass=True,
    )
    return draws, "cold"


def assemble(
    draws: nuts.Draws,
    d: int,
    seconds: float,
    how: str,
    seed: int,
    mode_draws: int = MODE_DRAWS,
    *,
    mode_rule: str = "kde",
    prior_mean=None,
    noise_floor: float = MCMC_DEFAULTS["noise_floor"],
) -> Posterior:
    """The posterior of all chains' draws: diagnostics, the mode (:func:`mode_index`'s), what a
    warm start needs. The noise variances are ``noise_floor + exp(theta_noise)``."""
    theta = torch.from_numpy(draws.theta.reshape(-1, d + 1))  # chain-major
    mode = theta[mode_index(theta.numpy(), mode_rule, mode_draws, seed, prior_mean)]
    diagnostics = diagnose(draws, seconds, draws.potential_calls)
    diagnostics["warm_start"] = how
    diagnostics["method"] = "nuts"
    return Posterior(
        lengthscale=theta[:, :d].exp(),
        noise=noise_floor + theta[:, d].exp(),
        chains=draws.theta.shape[0],
        mode_lengthscale=mode[:d].exp(),
        mode_noise=noise_floor + float(mode[d].exp()),
        diagnostics=dict(diagnostics, noise_floor=noise_floor),
        adaptation={
            "step_size": draws.step_size.tolist(),
            "inverse_mass": draws.inverse_mass.tolist(),
            "last": draws.theta[:, -1].tolist(),
            "max_rhat": diagnostics["max_rhat"],
            "seed": seed,
        },
    )


__all__ = [
    "Posterior",
    "Target",
    "sample_posterior",
    "mode_index",
    "posterior_mode_index",
    "diagnose",
]
