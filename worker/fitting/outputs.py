"""A refit of a campaign with several outputs: each output's posterior on its own labels, one
ranking of the candidates by the outputs' combined scores."""

from __future__ import annotations

import time
from dataclasses import dataclass

from fbgp_al.worker.feasibility.campaign import FailureModel
from fbgp_al.worker.fitting import search
from fbgp_al.worker.fitting.posteriors import Data, posterior, prepare
from fbgp_al.worker.fitting.ranking import (
    Steps,
    accuracy_of,
    best_of,
    candidates_of,
    greedy_batch,
    here,
    ranking_of,
    scored,
    scores_of,
    weighed,
)
from fbgp_al.worker.mcmc import MODE_DRAWS, Posterior
from fbgp_al.worker.scoring import Output, Scoring
from fbgp_al.worker.vocabulary.defaults import (
    MAX_BATCH,
    STOP_TARGETS,
    output_labels,
    output_names,
    output_spec,
    output_weights,
)
from fbgp_al.worker.vocabulary.design import GridPool, PointPool


@dataclass(frozen=True)
class OutputFit:
    """One output of a multi-output campaign: its name, weight in the acquisition, its
    single-output campaign (:func:`worker.vocabulary.defaults.output_spec`), labels in its GP's
    units and posterior."""

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


def fit_outputs(
    spec: dict, labels: list[dict], previous: dict | None = None, mode_draws: int = MODE_DRAWS
) -> list[OutputFit]:
    """Every output's posterior, one after the other in this process: each the posterior its
    single-output campaign would sample on the same labels (the same draws)."""
    fits = []
    for name, weight, single, data in prepare_outputs(spec, labels):
        warm = output_warm_start(spec, previous, name)
        post = posterior(single, data, warm, mode_draws)
        fits.append(OutputFit(name, weight, single, data, post))
    return fits


def multi_model_and_ranking(*args, **kwargs) -> tuple[dict, list]:
    """:func:`multi_ranked` (the same arguments), every scoring done here."""
    return here(multi_ranked(*args, **kwargs))


def multi_ranked(
    spec: dict,
    pool: GridPool | PointPool,
    fits: list[OutputFit],
    exclude: set[int],
    pending: list[int],
    started: float,
    failure: FailureModel | None = None,
    pending_x=(),
) -> Steps[tuple[dict, list]]:
    """:func:`~worker.fitting.ranking.ranked` for several outputs: the same candidates (drawn
    from the campaign's seed), ranked by :func:`worker.scoring.combined_scores` (in parallel mode a
    greedy batch, :func:`worker.acquisition.greedy_batch_outputs`); the model holds each
    output's draws, mode, output transform, diagnostics and accuracy under ``outputs``."""
    first = fits[0].data
    n = first.n
    thins = [f.post.for_scoring(spec["mcmc"]) for f in fits]
    pool, exclude, pending, pending_x = search.box_candidates(
        spec, pool, first.space, n, exclude, pending, pending_x
    )
    candidates, cand_u, pending_u, weights = candidates_of(
        spec, pool, first.space, n, exclude, pending, failure, pending_x
    )
    ranking, searched = [], None
    parts = [
        (f.weight, t, f.data.u, f.data.z, f.data.noise) for f, t in zip(fits, thins, strict=True)
    ]
    if len(candidates) and spec.get("mode") == "parallel" and search.polishes(spec):
        outputs = tuple(Output(*p, first.seed) for p in parts)
        fn = Scoring(spec["acquisition"], outputs, "batch", pending_u)
        scores = yield from scored(spec["acquisition"], fn, cand_u, weights)
        objective = search.objective_of(spec, first.space, parts, pending_u, failure)
        ranking, searched = search.batch(
            spec, objective, pool.points(candidates), weighed(scores, weights), n, first.u
        )
    elif len(candidates):
        if spec.get("mode") == "parallel":  # a greedy batch, each pick a fantasy of every output
            size = min(int(spec["max_pending"]), MAX_BATCH)
            best, best_scores = yield from greedy_batch(
                spec["acquisition"], parts, cand_u, size, pending_u, first.seed, weights
            )
        else:
            outputs = tuple(
                Output(f.weight, t, f.data.u, f.data.z, f.data.noise, f.data.seed)
                for f, t in zip(fits, thins, strict=True)
            )
            fn = Scoring(spec["acquisition"], outputs, "combined")
            scores = yield from scores_of(spec["acquisition"], fn, cand_u, weights)
            best, best_scores = best_of(weighed(scores, weights))
        ranking = ranking_of(first.space, pool, candidates, best, best_scores)
        if spec.get("mode") != "parallel" and search.polishes(spec):
            objective = search.objective_of(spec, first.space, parts, pending_u, failure)
            starts = pool.points(candidates[best])
            polished, searched = search.polished(spec, objective, starts, n, first.u)
            ranking = polished + ranking
    outputs = {}
    for f, thin in zip(fits, thins, strict=True):
        body = f.post.to_dict()
        body["diagnostics"] = dict(body["diagnostics"], seed=f.data.seed)
        outputs[f.name] = {
            **body,
            "acquisition_samples": thin.to_dict()["samples"],
            "transform": f.data.scale_y.to_dict(),
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
    if searched is not None:
        model["diagnostics"]["search"] = searched
    if first.space.typed:
        model["features"] = first.space.feature_names
    if first.input_scale is not None:  # the same inputs for every output
        model["input_scale"] = first.input_scale
    if failure is not None:  # one failure model: a run fails or answers for every output
        model["failures"] = failure.to_dict()
    return model, search.off_pool(spec, ranking, n)


def summary_diagnostics(outputs: dict, seconds: float, seed: int) -> dict:
    """A multi-output refit's diagnostics over its outputs: the largest R-hat, the smallest
    ESS, all divergences, each output's warm start."""
    d = [o["diagnostics"] for o in outputs.values()]
    return {
        "refit_seconds": seconds,
        "seed": seed,
        "max_rhat": max((x["max_rhat"] for x in d if x.get("max_rhat") is not None), default=None),
        "min_ess_bulk": min(
            (x["min_ess_bulk"] for x in d if x.get("min_ess_bulk") is not None), default=None
        ),
        "divergences": sum(int(x["divergences"]) for x in d),
        "warm_start": "; ".join(sorted({str(x.get("warm_start")) for x in d})),
        "chain_groups": 1,
    }


def worst_accuracy(estimates: list[dict]) -> dict:
    """The outputs' accuracy estimates that a stopping rule may name, each the worst (largest)
    over the outputs, so that a target is met when every output meets it."""
    return {
        key: max(e[key] for e in estimates)
        for key in STOP_TARGETS
        if all(e.get(key) is not None for e in estimates)
    }
