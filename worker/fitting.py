"""One refit of a campaign as pure math: NUTS on all labels, thinning, the mode, scoring of a
fresh pool subsample, ranking, and the model body that holds it all. The answers a stored model
gives (predictions, acquisition values, test metrics) are :mod:`worker.answers`.

Inputs and outputs are plain lists and dicts (JSON-able); the store and the queue stay in
:mod:`worker.jobs`. Campaign specs are the dicts of the campaign body (``POST /campaigns`` in the
OpenAPI document).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from worker import accuracy
from worker.acquisition import greedy_batch_outputs
from worker.feasibility.campaign import FailureModel, fit_campaign
from worker.mcmc import MODE_DRAWS, Posterior, Target, run_chains, sample_posterior
from worker.scoring import Output, Scoring
from worker.spec.defaults import (
    MAX_BATCH,
    MCMC_DEFAULTS,
    RANKING_SIZE,
    STOP_TARGETS,
    known_noise,
    output_labels,
    output_names,
    output_spec,
    output_weights,
)
from worker.spec.design import GridPool, PointPool
from worker.spec.space import Space
from worker.transforms import OutputStandardization, as_tensor


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
    """The labels in the GP's units; in a known-noise campaign with their noise variances,
    ``noise / y_std^2``."""
    x = [label["x"] for label in labels]
    y = np.array([label["y"] for label in labels], dtype=float)
    space, scale_y = Space.of(spec["inputs"]), OutputStandardization.from_labels(y)
    seed = (int(spec["seed"]) * 1_000_003 + len(labels)) % 2**32
    noise = label_noise(spec, labels, scale_y)
    u = as_tensor(space.to_gp(x))
    return Data(u, scale_y.to_z(y), space, scale_y, seed, noise, input_scale_prior(spec, u))


def label_noise(spec: dict, labels: list[dict], scale_y: OutputStandardization):
    """The labels' known noise variances in the GP's units (``n``), or None when the campaign
    learns its noise."""
    if not known_noise(spec):
        return None
    return scale_y.variance_to_z([float(label.get("noise", 0.0)) for label in labels])


def warm_start_of(spec: dict, previous: dict | None) -> dict | None:
    """The previous model's adaptation, when the campaign's ``mcmc`` asks for warm starts."""
    if previous and spec["mcmc"].get("warm_start", False):
        return previous.get("adaptation")
    return None


def fit(
    spec: dict, pool: GridPool | PointPool, labels: list[dict], exclude: set[int],
    pending: list[int] = (), previous: dict | None = None, failures: list[dict] = (),
) -> tuple[dict, list]:  # fmt: skip
    """Refit on ``labels`` (``[{x, y, ...}]``), all chains in this process, and rank (see
    :func:`model_and_ranking`). ``previous``: the campaign's last model, to warm-start from when its
    ``mcmc`` asks so; ``failures``: its failed runs (``[{x, ...}]``), for its failure model."""
    started = time.perf_counter()
    data = prepare(spec, labels)
    post = posterior(spec, data, warm_start_of(spec, previous))
    failure = fit_campaign(spec, labels, list(failures), data.seed)
    return model_and_ranking(spec, pool, data, post, exclude, pending, started, failure=failure)


def failure_model(spec: dict, labels: list[dict], failures: list[dict], seed: int):
    """The campaign's failure model on its labels and failed runs, or None (none asked, or no
    run failed): :func:`worker.feasibility.campaign.fit_campaign`, for the refit jobs, whose
    math goes through this module."""
    return fit_campaign(spec, labels, failures, seed)


def noise_floor(spec: dict) -> float:
    """The campaign's least noise variance, in the GP's (standardized) units. Specs made before
    the option existed get the default floor too: without one, a deterministic simulator's
    labels stall the sampler (:class:`worker.potential.GPPotential`)."""
    return float(spec["mcmc"].get("noise_floor", MCMC_DEFAULTS["noise_floor"]))


def _sampler_options(spec: dict) -> dict:
    """The campaign's MCMC options as keywords of :mod:`worker.mcmc` (specs made before an
    option existed get the behavior they were made with, but for :func:`noise_floor`)."""
    mcmc = spec["mcmc"]
    return {"warm_warmup": mcmc.get("warm_warmup", 50), "init": mcmc.get("init", "uniform"),
            "metric": mcmc.get("metric", "diag"),
            "start_metric": mcmc.get("start_metric", False),
            "noise_floor": noise_floor(spec)}  # fmt: skip


def posterior(spec: dict, data: Data, warm: dict | None, mode_draws: int = MODE_DRAWS) -> Posterior:
    """All chains of the campaign's posterior, in this process; its mode from at most
    ``mode_draws`` draws."""
    mcmc = spec["mcmc"]
    return sample_posterior(data.u, data.z, mcmc["chains"], mcmc["warmup"], mcmc["samples"],
                            seed=data.seed, warm_start=warm, target=Target.of(mcmc),
                            mode_draws=mode_draws, label_noise=data.noise,
                            prior_mean=data.prior_mean,
                            mode_rule=mcmc.get("mode_rule", "kde"),
                            **_sampler_options(spec))  # fmt: skip


def chains(spec: dict, data: Data, chain_ids: list[int] | None = None, warm: dict | None = None,
           peers=None):  # fmt: skip
    """Some (default: all) of the posterior's chains: ``(Draws, "warm" | "cold")``. With a
    target, a group runs to its share of it; or, given ``peers`` (the other groups of the same
    refit: :class:`worker.jobs.fanout.Peers`), to the target judged at each check on all the chains
    together (:meth:`worker.convergence.Target.more_of`), as one process running every chain
    judges it, so that the merged draws are that process's. Raises
    :class:`worker.jobs.fanout.PeersLost` when the others cannot be heard."""
    mcmc = spec["mcmc"]
    ids = list(range(mcmc["chains"])) if chain_ids is None else chain_ids
    whole = Target.of(mcmc)
    target = None if whole is None else whole.share(len(ids), mcmc["chains"])
    more = None
    if target is not None and peers is not None:

        def more(draws) -> int:
            peers.publish(draws.theta, stopped=False)
            extra = whole.more_of(peers.together(draws.theta))
            if extra == 0:
                peers.publish(draws.theta, stopped=True)
            return extra

    return run_chains(data.u, data.z, ids, mcmc["warmup"], mcmc["samples"], data.seed,
                      warm_start=warm, target=target, label_noise=data.noise,
                      prior_mean=data.prior_mean, more=more,
                      **_sampler_options(spec))  # fmt: skip


def _candidates(spec: dict, pool, space, n: int, exclude: set[int], pending: list[int],
                failure: FailureModel | None = None):  # fmt: skip
    """The pool points a refit on ``n`` labels scores (a seeded subsample, none of them in
    ``exclude`` or ``pending``; with a ``failure`` model, none below its ``min_success``), the
    GP's features of them and of the ``pending`` points (None when there are no candidates, or
    no point is out), and their probabilities of success (None without a failure model)."""
    rng = np.random.default_rng([int(spec["seed"]), n])
    candidates = pool.subsample(
        spec["pool_subsample"], rng, exclude=sorted(set(exclude) | set(pending))
    )
    if not len(candidates):
        return candidates, None, None, None
    features = space.features(pool.points(candidates))
    weights = None
    if failure is not None:  # the failure model's weights, its points below min_success left out
        keep, p = failure.weigh(features)
        failure.excluded = int((~keep).sum())
        candidates, features, weights = candidates[keep], features[keep], torch.from_numpy(p[keep])
        if not len(candidates):
            return candidates, None, None, None
    pending_u = (torch.from_numpy(space.features(pool.points(list(pending))))
                 if len(pending) else None)  # fmt: skip
    return candidates, torch.from_numpy(features), pending_u, weights


# share(fn, candidates): fn's scores of the candidates, each depending on its candidate alone, so
# that the candidates may be scored in parts on other workers (worker.jobs.fanout.share_scoring);
# fn is a Scoring, which those workers rebuild from plain data
Share = Callable[[Scoring, torch.Tensor], torch.Tensor]


def here(fn: Scoring, candidates: torch.Tensor) -> torch.Tensor:
    """A :data:`Share` that scores every candidate in this process."""
    return fn(candidates)


def _scores(name: str, fn: Scoring, candidates, share: Share) -> torch.Tensor:
    """``fn``'s scores of ``candidates`` through ``share``, except ``random``'s, which are
    drawn for all the candidates at once (and cost nothing)."""
    return fn(candidates) if name == "random" else share(fn, candidates)


def _best(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows of the ``RANKING_SIZE`` highest scores, best first (ties in candidate order),
    and those scores."""
    best = np.argsort(-scores, kind="stable")[:RANKING_SIZE]
    return best, scores[best]


def _ranking(space: Space, pool, candidates, best, best_scores) -> list[dict]:
    """The ranking a model keeps: ``[{index, x, score}]`` of the candidates' rows ``best``."""
    points = space.from_pool(pool.points(candidates[best]))
    return [{"index": int(candidates[b]), "x": p, "score": float(v)}
            for b, p, v in zip(best, points, best_scores, strict=True)]  # fmt: skip


def _batch(name: str, parts: list[tuple], cand_u, size: int, pending_u, seed: int,
           share: Share, weights=None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """A greedy batch (:func:`worker.acquisition.greedy_batch_outputs`) whose first scoring
    goes through ``share``, each score weighed by ``weights`` (if any): the picked candidates'
    rows and their scores."""
    first = None
    if name != "random":  # random's scores are drawn by the batch itself
        outputs = tuple(Output(w, post, u, z, noise, seed) for w, post, u, z, noise in parts)
        first = share(Scoring(name, outputs, "batch", pending_u), cand_u)
    order, scores = greedy_batch_outputs(name, parts, cand_u, size, pending_u, seed=seed,
                                         scores=first, weights=weights)  # fmt: skip
    return order.numpy(), scores.numpy()


def model_and_ranking(
    spec: dict, pool: GridPool | PointPool, data: Data, post: Posterior, exclude: set[int],
    pending: list[int], started: float, share: Share = here, failure: FailureModel | None = None,
) -> tuple[dict, list]:  # fmt: skip
    """Thin, then rank pool points not in ``exclude``: the ``RANKING_SIZE`` best, or in parallel
    mode a greedy batch of ``max_pending`` chosen with the ``pending`` pool points (out for
    labeling) as fantasies. Returns the model (the ``/model`` body of the OpenAPI document) and the
    ranking (``[{index, x, score}]``, in the order to hand out). The candidates are scored through
    ``share`` (a greedy batch's first scoring; its picks after that, here). With a ``failure``
    model each score is weighed by the candidate's probability of success and the candidates
    below its ``min_success`` are left out (:func:`_candidates`); the model holds it."""
    u, z, seed, n = data.u, data.z, data.seed, data.n
    name = spec["acquisition"]
    thin = post.for_scoring(spec["mcmc"])
    candidates, cand_u, pending_u, weights = _candidates(spec, pool, data.space, n, exclude,
                                                         pending, failure)  # fmt: skip
    ranking = []
    if len(candidates):
        if spec.get("mode") == "parallel":
            size = min(int(spec["max_pending"]), MAX_BATCH)
            best, best_scores = _batch(name, [(1.0, thin, u, z, data.noise)], cand_u, size,
                                       pending_u, seed, share, weights)  # fmt: skip
        else:
            fn = Scoring(name, (Output(1.0, thin, u, z, data.noise, seed),))
            best, best_scores = _best(_weighed(_scores(name, fn, cand_u, share), weights))
        ranking = _ranking(data.space, pool, candidates, best, best_scores)
    estimates = accuracy_of(spec, pool, data, thin)
    diagnostics = dict(post.diagnostics, refit_seconds=time.perf_counter() - started, seed=seed)
    model = {
        "version": n,
        "n_labeled": n,
        **post.to_dict(),
        "acquisition_samples": thin.to_dict()["samples"],
        "transform": {
            **data.space.transform(),
            "y_mean": data.scale_y.mean,
            "y_std": data.scale_y.std,
        },  # fmt: skip
        "diagnostics": diagnostics,
        "accuracy": estimates,
    }
    if data.space.typed:  # the lengthscales' columns, by name
        model["features"] = data.space.feature_names
    if data.input_scale is not None:
        model["input_scale"] = data.input_scale
    if failure is not None:
        model["failures"] = failure.to_dict()
    return model, ranking


def _weighed(scores: torch.Tensor, weights: torch.Tensor | None) -> np.ndarray:
    """``scores x weights`` (each candidate's probability of success), or the scores."""
    return (scores if weights is None else scores * weights).numpy()


def accuracy_of(spec: dict, pool: GridPool | PointPool, data: Data, thin: Posterior) -> dict:
    """The model's ``accuracy`` (:func:`worker.accuracy.summary`) under the draws acquisitions
    use, integrated over a subsample of the whole pool (labeled points included) of at most
    ``accuracy.POOL_POINTS`` points, drawn from the campaign's seed alone: the same points for
    every model, so that the estimates over the labels differ by the models, not the points."""
    rng = np.random.default_rng([int(spec["seed"]), 2**32])
    index = pool.subsample(min(int(spec["pool_subsample"]), accuracy.POOL_POINTS), rng)
    points = torch.from_numpy(data.space.features(pool.points(index)))
    return accuracy.summary(data.u, data.z, thin.lengthscale, thin.noise, points,
                            data.scale_y.std, label_noise=data.noise)  # fmt: skip


# -- several outputs -------------------------------------------------------------------------
@dataclass(frozen=True)
class OutputFit:
    """One output of a multi-output campaign: its name, weight in the acquisition, its
    single-output campaign (:func:`worker.spec.defaults.output_spec`), labels in its GP's units and
    posterior."""

    name: str
    weight: float
    spec: dict
    data: Data
    post: Posterior


def prepare_outputs(spec: dict, labels: list[dict]) -> list[tuple[str, float, dict, Data]]:
    """Each output's ``(name, weight, single-output campaign, labels in its GP's units)``: each
    standardized on its own, its seed its single-output campaign's."""
    out = []
    for k, (name, weight) in enumerate(zip(output_names(spec), output_weights(spec), strict=True)):
        single = output_spec(spec, k)
        out.append((name, weight, single, prepare(single, output_labels(labels, name))))
    return out


def output_warm_start(spec: dict, previous: dict | None, name: str) -> dict | None:
    """Output ``name``'s adaptation in the previous model, when the campaign warm-starts."""
    if previous and spec["mcmc"].get("warm_start", False):
        return (previous.get("outputs") or {}).get(name, {}).get("adaptation")
    return None


def fit_outputs(spec: dict, labels: list[dict], previous: dict | None = None,
                mode_draws: int = MODE_DRAWS) -> list[OutputFit]:  # fmt: skip
    """Every output's posterior, one after the other in this process: each the posterior its
    single-output campaign would sample on the same labels (the same draws)."""
    fits = []
    for name, weight, single, data in prepare_outputs(spec, labels):
        warm = output_warm_start(spec, previous, name)
        post = posterior(single, data, warm, mode_draws)
        fits.append(OutputFit(name, weight, single, data, post))
    return fits


def multi_model_and_ranking(
    spec: dict, pool: GridPool | PointPool, fits: list[OutputFit], exclude: set[int],
    pending: list[int], started: float, share: Share = here, failure: FailureModel | None = None,
) -> tuple[dict, list]:  # fmt: skip
    """:func:`model_and_ranking` for several outputs: the same candidates (drawn from the
    campaign's seed), ranked by :func:`worker.scoring.combined_scores` (in parallel mode a
    greedy batch, :func:`worker.acquisition.greedy_batch_outputs`); the model holds each
    output's draws, mode, output transform, diagnostics and accuracy under ``outputs``."""
    first = fits[0].data
    n = first.n
    thins = [f.post.for_scoring(spec["mcmc"]) for f in fits]
    candidates, cand_u, pending_u, weights = _candidates(spec, pool, first.space, n, exclude,
                                                         pending, failure)  # fmt: skip
    ranking = []
    if len(candidates):
        if spec.get("mode") == "parallel":  # a greedy batch, each pick a fantasy of every output
            size = min(int(spec["max_pending"]), MAX_BATCH)
            parts = [(f.weight, t, f.data.u, f.data.z, f.data.noise)
                     for f, t in zip(fits, thins, strict=True)]  # fmt: skip
            best, best_scores = _batch(spec["acquisition"], parts, cand_u, size, pending_u,
                                       first.seed, share, weights)  # fmt: skip
        else:
            outputs = tuple(Output(f.weight, t, f.data.u, f.data.z, f.data.noise, f.data.seed)
                            for f, t in zip(fits, thins, strict=True))  # fmt: skip
            fn = Scoring(spec["acquisition"], outputs, "combined")
            best, best_scores = _best(_weighed(_scores(spec["acquisition"], fn, cand_u, share),
                                               weights))  # fmt: skip
        ranking = _ranking(first.space, pool, candidates, best, best_scores)
    outputs = {}
    for f, thin in zip(fits, thins, strict=True):
        body = f.post.to_dict()
        body["diagnostics"] = dict(body["diagnostics"], seed=f.data.seed)
        outputs[f.name] = {
            **body,
            "acquisition_samples": thin.to_dict()["samples"],
            "transform": {"y_mean": f.data.scale_y.mean, "y_std": f.data.scale_y.std},
            "accuracy": accuracy_of(spec, pool, f.data, thin),
        }
    model = {
        "version": n,
        "n_labeled": n,
        "outputs": outputs,
        "transform": first.space.transform(),
        "diagnostics": summary_diagnostics(outputs, time.perf_counter() - started, first.seed),
        "accuracy": worst_accuracy([o["accuracy"] for o in outputs.values()]),
    }
    if first.space.typed:
        model["features"] = first.space.feature_names
    if first.input_scale is not None:  # the same inputs for every output
        model["input_scale"] = first.input_scale
    if failure is not None:  # one failure model: a run fails or answers for every output
        model["failures"] = failure.to_dict()
    return model, ranking


def summary_diagnostics(outputs: dict, seconds: float, seed: int) -> dict:
    """A multi-output refit's diagnostics over its outputs: the largest R-hat, the smallest
    ESS, all divergences, each output's warm start."""
    d = [o["diagnostics"] for o in outputs.values()]
    return {
        "refit_seconds": seconds, "seed": seed,
        "max_rhat": max(x["max_rhat"] for x in d),
        "min_ess_bulk": min(x["min_ess_bulk"] for x in d),
        "divergences": sum(int(x["divergences"]) for x in d),
        "warm_start": "; ".join(sorted({str(x.get("warm_start")) for x in d})),
        "chain_groups": 1,
    }  # fmt: skip


def worst_accuracy(estimates: list[dict]) -> dict:
    """The outputs' accuracy estimates that a stopping rule may name, each the worst (largest)
    over the outputs, so that a target is met when every output meets it."""
    return {key: max(e[key] for e in estimates) for key in STOP_TARGETS
            if all(e.get(key) is not None for e in estimates)}  # fmt: skip
