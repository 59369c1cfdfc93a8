"""One refit of a campaign as pure math: NUTS on all labels (or, past ``mcmc.laplace_from``, a
Laplace mixture checked by importance sampling), thinning, the mode, scoring of a
fresh pool subsample, ranking, and the model body that holds it all. The answers a stored model
gives (predictions, acquisition values, test metrics) are :mod:`worker.answers`.

Inputs and outputs are plain lists and dicts (JSON-able); the store and the queue stay in
:mod:`service.jobs`. Campaign specs are the dicts of the campaign body (``POST /campaigns`` in the
OpenAPI document).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from fbgp_al.worker.fitting import fidelity
from fbgp_al.worker.fitting.outputs import (
    OutputFit,
    fit_outputs,
    multi_model_and_ranking,
    multi_ranked,
    prepare_outputs,
    worst_accuracy,
)
from fbgp_al.worker.fitting.posteriors import (
    Check,
    Data,
    GroupSteps,
    alone,
    chains,
    failure_model,
    grouped,
    input_scale_prior,
    label_noise,
    noise_floor,
    posterior,
    prepare,
    uses_laplace,
    warm_start_of,
)
from fbgp_al.worker.fitting.ranking import (
    Steps,
    ToScore,
    accuracy_of,
    here,
    model_and_ranking,
)
from fbgp_al.worker.fitting.ranking import ranked as single_ranked
from fbgp_al.worker.mcmc import MODE_DRAWS, Posterior
from fbgp_al.worker.vocabulary.defaults import output_names
from fbgp_al.worker.vocabulary.design import GridPool, PointPool
from fbgp_al.worker.vocabulary.fidelities import levels

__all__ = [
    "Check",
    "Data",
    "GroupSteps",
    "OutputFit",
    "Sampled",
    "Steps",
    "ToScore",
    "accuracy_of",
    "alone",
    "chains",
    "failure_model",
    "fit",
    "fit_outputs",
    "grouped",
    "here",
    "input_scale_prior",
    "label_noise",
    "model_and_ranking",
    "multi_model_and_ranking",
    "noise_floor",
    "posterior",
    "prepare",
    "prepare_outputs",
    "rank",
    "ranked",
    "sample",
    "uses_laplace",
    "warm_start_of",
    "worst_accuracy",
]


@dataclass(frozen=True)
class Sampled:
    """A refit's posterior, sampled before its candidates are read: the ``labels`` it was
    sampled on, in the GP's units (``data``) and ``post``, or with several outputs each
    output's ``fits``, or with fidelities the multi-fidelity model's (``levels``)."""

    labels: list[dict]
    data: Data | None = None
    post: Posterior | None = None
    fits: list[OutputFit] | None = None
    levels: fidelity.LevelFit | None = None

    @property
    def seed(self) -> int:
        if self.levels is not None:
            return self.levels.data.seed
        return (self.data if self.fits is None else self.fits[0].data).seed


def sample(
    spec: dict, labels: list[dict], previous: dict | None = None, mode_draws: int = MODE_DRAWS
) -> Sampled:
    """The posterior of every output on ``labels``, all chains here, warm-started from the
    ``previous`` model when the campaign's ``mcmc`` asks so; with fidelities, the
    multi-fidelity model's (:func:`worker.fitting.fidelity.sample`)."""
    if levels(spec):
        return Sampled(labels, levels=fidelity.sample(spec, labels, previous))
    if output_names(spec):
        return Sampled(labels, fits=fit_outputs(spec, labels, previous, mode_draws))
    data = prepare(spec, labels)
    return Sampled(labels, data, posterior(spec, data, warm_start_of(spec, previous), mode_draws))


def rank(*args, **kwargs) -> tuple[dict, list]:
    """:func:`ranked` (the same arguments), every scoring done here."""
    return here(ranked(*args, **kwargs))


def ranked(
    spec: dict,
    sampled: Sampled,
    pool: GridPool | PointPool,
    exclude: set[int],
    pending: list[int],
    failures: list[dict],
    started: float,
    labeled: frozenset[int] = frozenset(),
    pending_x=(),
) -> Steps[tuple[dict, list]]:
    """The model and ranking of a :func:`sample`'s posterior over the candidates as they are
    now (:func:`~worker.fitting.ranking.ranked` with one output,
    :func:`~worker.fitting.outputs.multi_ranked` with several), with the failure model fitted
    here, on the sampled labels and the ``failures`` as they are now (the failed runs,
    ``[{x, ...}]``): a run that failed while the posterior was sampled counts at once.
    ``pending_x``: the points off the pool out for labeling (values), fantasies as the
    ``pending`` pool points are. Each
    scoring is a step (:class:`~worker.fitting.ranking.ToScore`) for the caller to drive
    (:func:`~worker.fitting.ranking.here`, or a refit job's parts on idle workers). With
    fidelities, the pool points ``labeled`` while the posterior was sampled (not among its
    labels) are runs whose variance the ranking counts as removed, as the runs out."""
    failure = failure_model(spec, sampled.labels, failures, sampled.seed)
    if sampled.levels is not None:
        seen = {label.get("index") for label in sampled.labels}
        runs = sorted(set(pending) | (set(labeled) - seen))
        return (
            yield from fidelity.ranked(
                spec, pool, sampled.labels, sampled.levels, exclude, runs, started, failure
            )
        )
    if sampled.fits is not None:
        return (
            yield from multi_ranked(
                spec, pool, sampled.fits, exclude, pending, started, failure, pending_x
            )
        )
    return (
        yield from single_ranked(
            spec, pool, sampled.data, sampled.post, exclude, pending, started, failure, pending_x
        )
    )


def fit(
    spec: dict,
    pool: GridPool | PointPool,
    labels: list[dict],
    exclude: set[int],
    pending: list[int] = (),
    previous: dict | None = None,
    failures: list[dict] = (),
) -> tuple[dict, list]:
    """Refit on ``labels`` (``[{x, y, ...}]``), all chains in this process, and rank: a refit
    job's :func:`sample` and :func:`rank`, with its candidates known beforehand."""
    started = time.perf_counter()
    return rank(
        spec, sample(spec, labels, previous), pool, exclude, pending, list(failures), started
    )
