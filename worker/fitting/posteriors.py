"""A refit's posterior: the labels in the GP's units, NUTS on all of them (or some chains of
it: a chain group, whose checks its driver answers), and the failure model beside it."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

import numpy as np
import torch

from fbgp_al.worker.feasibility.campaign import fit_campaign
from fbgp_al.worker.laplace import laplace_posterior
from fbgp_al.worker.mcmc import (
    MODE_DRAWS,
    Posterior,
    Target,
    chain_sampling,
    sample_posterior,
)
from fbgp_al.worker.nuts import Draws
from fbgp_al.worker.transforms import OutputStandardization, as_tensor
from fbgp_al.worker.vocabulary.defaults import (
    MCMC_DEFAULTS,
    known_noise,
    output_transform,
)
from fbgp_al.worker.vocabulary.space import Space

# what a NUTS refit reports of a Laplace mixture it tried and did not use
LAPLACE_TRIED = (
    "khat",
    "khat_limit",
    "importance_ess",
    "widened",
    "modes",
    "gradient_evaluations",
    "value_evaluations",
    "seconds",
    "warm_start",
)


@dataclass(frozen=True)
class Data:
    """A campaign's labels in the GP's units, and the seed of the refit on them."""

    u: torch.Tensor
    z: torch.Tensor
    space: Space
    scale_y: OutputStandardization
    seed: int
    noise: torch.Tensor | None = None  # the labels' known noise variances in the GP's units
    # the priors' means on the log-hyperparameters (None: 0), see input_scale_prior
    prior_mean: np.ndarray | None = None

    @property
    def n(self) -> int:
        return len(self.z)

    @property
    def input_scale(self) -> list[float] | None:
        """Per feature, the range the lengthscales' priors are stated for (None: the box)."""
        return None if self.prior_mean is None else np.exp(self.prior_mean[:-1]).tolist()


def input_scale_prior(spec: dict, u: torch.Tensor) -> np.ndarray | None:
    """The priors' means (``d + 1``) for a campaign's ``input_scaling``, or None for ``box``.

    ``labels``: as if every feature were min-max scaled by the labels' range ``r`` before the GP,
    as the paper's code scales its inputs (``utils/transformations.py``) at every refit, with
    LogNormal(0, sqrt(3)) priors on those lengthscales. The GP keeps the unit cube and its
    lengthscales ``l = l' r``, so the priors centre on ``log r`` (:class:`GPPotential`). A feature
    whose labels do not vary keeps the box (``r = 1``)."""
    if spec.get("input_scaling", "box") != "labels":
        return None
    values = u.numpy()
    span = values.max(0) - values.min(0) if len(values) else np.ones(values.shape[1])
    span = np.where(span > 1e-9, span, 1.0)
    return np.concatenate([np.log(span), [0.0]])


def prepare(spec: dict, labels: list[dict]) -> Data:
    """The labels in the GP's units (``log y`` standardized for an output declared ``log``); in
    a known-noise campaign with their noise variances, ``noise / y_std^2`` (of ``log y``:
    ``noise / y^2 / y_std^2``)."""
    x = [label["x"] for label in labels]
    y = np.array([label["y"] for label in labels], dtype=float)
    log = output_transform(spec) == "log"
    space, scale_y = Space.of(spec["inputs"]), OutputStandardization.from_labels(y, log)
    seed = (int(spec["seed"]) * 1_000_003 + len(labels)) % 2**32
    noise = label_noise(spec, labels, scale_y)
    u = as_tensor(space.to_gp(x))
    return Data(u, scale_y.to_z(y), space, scale_y, seed, noise, input_scale_prior(spec, u))


def label_noise(spec: dict, labels: list[dict], scale_y: OutputStandardization):
    """The labels' known noise variances in the GP's units (``n``), or None when the campaign
    learns its noise."""
    if not known_noise(spec):
        return None
    return scale_y.variance_to_z(
        [float(label.get("noise", 0.0)) for label in labels], [label["y"] for label in labels]
    )


def warm_start_of(spec: dict, previous: dict | None) -> dict | None:
    """The previous model's adaptation, when the campaign's ``mcmc`` asks for warm starts."""
    if previous and spec["mcmc"].get("warm_start", False):
        return previous.get("adaptation")
    return None


def failure_model(spec: dict, labels: list[dict], failures: list[dict], seed: int):
    """The campaign's failure model on its labels and failed runs, or None (none asked, or no
    run failed): :func:`worker.feasibility.campaign.fit_campaign`."""
    return fit_campaign(spec, labels, list(failures), seed)


def noise_floor(spec: dict) -> float:
    """The campaign's least noise variance, in the GP's (standardized) units. Specs made before
    the option existed get the default floor too: without one, a deterministic simulator's
    labels stall the sampler (:class:`worker.potential.GPPotential`)."""
    return float(spec["mcmc"].get("noise_floor", MCMC_DEFAULTS["noise_floor"]))


def _sampler_options(spec: dict) -> dict:
    """The campaign's MCMC options as keywords of :mod:`worker.mcmc` (specs made before an
    option existed get the behavior they were made with, but for :func:`noise_floor`)."""
    mcmc = spec["mcmc"]
    return {
        "warm_warmup": mcmc.get("warm_warmup", 50),
        "init": mcmc.get("init", "uniform"),
        "metric": mcmc.get("metric", "diag"),
        "start_metric": mcmc.get("start_metric", False),
        "noise_floor": noise_floor(spec),
    }


def uses_laplace(spec: dict, n: int) -> bool:
    """Whether a refit on ``n`` labels starts from the Laplace mixture (``mcmc.laplace_from``;
    specs made before the option: never)."""
    first = spec["mcmc"].get("laplace_from")
    return first is not None and n >= int(first)


def scoring_draws(mcmc: dict) -> int:
    """The draws a campaign's scoring takes: its target's ``draws``, or of a count every
    ``thinning``-th of ``chains x samples``."""
    if mcmc.get("draws"):
        return int(mcmc["draws"])
    return int(mcmc["chains"]) * (int(mcmc["samples"]) // int(mcmc["thinning"]))


def posterior(
    spec: dict,
    data: Data,
    warm: dict | None,
    mode_draws: int = MODE_DRAWS,
    proposals: int | None = None,
) -> Posterior:
    """The campaign's posterior, in this process: past ``mcmc.laplace_from`` labels the
    Laplace mixture's importance-resampled draws (:func:`worker.laplace.laplace_posterior`,
    ``proposals`` of them weighed; None: its own count) where their Pareto ``k`` says they are
    reliable; else all chains of NUTS (started from that mixture's draws where it was tried),
    its mode from at most ``mode_draws`` draws. A NUTS posterior that tried the mixture says so
    in ``diagnostics["laplace"]``."""
    mcmc = spec["mcmc"]
    tried = None
    if uses_laplace(spec, data.n):
        post = laplace_posterior(
            data.u,
            data.z,
            scoring_draws(mcmc),
            data.seed,
            previous=warm,
            chains=mcmc["chains"],
            label_noise=data.noise,
            prior_mean=data.prior_mean,
            noise_floor=noise_floor(spec),
            proposals=proposals,
        )
        d = post.diagnostics
        if d["khat"] <= d["khat_limit"]:
            return post
        tried = {key: d[key] for key in LAPLACE_TRIED}
        warm = post.adaptation  # its draws and spread start the chains
    post = sample_posterior(
        data.u,
        data.z,
        mcmc["chains"],
        mcmc["warmup"],
        mcmc["samples"],
        seed=data.seed,
        warm_start=warm,
        target=Target.of(mcmc),
        mode_draws=mode_draws,
        label_noise=data.noise,
        prior_mean=data.prior_mean,
        mode_rule=mcmc.get("mode_rule", "kde"),
        **_sampler_options(spec),
    )
    if tried is not None:
        post.diagnostics["laplace"] = tried
        post.adaptation["searched_at"] = warm["searched_at"]  # when the modes were last searched
    return post


@dataclass(frozen=True)
class Check:
    """A chain group's check, yielded to whoever drives its sampling (:func:`grouped`): its
    kept draws so far (``theta``, ``C x S x P``) and whether it has stopped (the target met).
    A check that has not stopped is answered with every chain's first ``S`` draws, the other
    groups' and its own, in chain order; or with None, for a group that judges its share of
    the target on its own draws (:func:`alone`). A stopped check's answer is not read."""

    theta: np.ndarray
    stopped: bool = False


GroupSteps = Generator[Check, np.ndarray | None, tuple[Draws, str]]


def chains(*args, **kwargs) -> tuple[Draws, str]:
    """:func:`grouped` (the same arguments), its checks answered here (:func:`alone`)."""
    return alone(grouped(*args, **kwargs))


def alone(steps: GroupSteps) -> tuple[Draws, str]:
    """Drive a chain group's steps in this process, with no other group to hear: at each check
    it judges its share of the target on its own draws (all the chains: the whole target)."""
    try:
        next(steps)
        while True:
            steps.send(None)
    except StopIteration as done:
        return done.value


def grouped(
    spec: dict, data: Data, chain_ids: list[int] | None = None, warm: dict | None = None
) -> GroupSteps:
    """Some (default: all) of the posterior's chains, ``(Draws, "warm" | "cold")``, as a
    generator of :class:`Check` steps. With no target the chains run the draws asked for and
    yield nothing. With a target, each time the kept draws asked for are there the group yields
    a check; answered with every chain's draws (the other groups', which its driver, a refit's
    job, gets from them: :func:`service.jobs.fanout.together`), it judges the target on them all
    (:meth:`worker.convergence.Target.more_of`), as one process running every chain judges it,
    so that the merged draws are that process's; answered with None (:func:`alone`), it judges
    its share of the target on its own. Once the target is met it yields a stopped check, then
    returns."""
    mcmc = spec["mcmc"]
    ids = list(range(mcmc["chains"])) if chain_ids is None else chain_ids
    whole = Target.of(mcmc)
    checks = chain_sampling(
        data.u,
        data.z,
        ids,
        mcmc["warmup"],
        mcmc["samples"],
        data.seed,
        warm_start=warm,
        label_noise=data.noise,
        prior_mean=data.prior_mean,
        **_sampler_options(spec),
    )
    try:
        draws = next(checks)
        while True:
            extra = 0
            if whole is not None:
                together = yield Check(draws.theta)
                if together is None:
                    extra = whole.share(len(ids), mcmc["chains"]).more_of(draws.theta)
                else:
                    extra = whole.more_of(together)
                if extra == 0:
                    yield Check(draws.theta, stopped=True)
            draws = checks.send(extra)
    except StopIteration as done:
        return done.value
