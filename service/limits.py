"""Limits on one campaign's work (``Settings.limit_*``, env ``FBGP_LIMIT_*``): a campaign or a
request that would exceed one is a 422 that names the limit and its variable, so that no job
takes a worker (or the machine's memory) for longer than a stated amount of work."""

from __future__ import annotations

from fbgp_al.service.costs import mcmc_iterations, pool_size, scoring_draws
from fbgp_al.service.refusals import Unprocessable
from fbgp_al.service.settings import Settings
from fbgp_al.worker.vocabulary.space import Space


def _beyond(what: str, value: int, limit: int, name: str) -> Unprocessable:
    return Unprocessable(
        f"{what} = {value:,} exceeds the limit of {limit:,} ({name}, env FBGP_{name.upper()})"
    )


def check_campaign(body: dict, settings: Settings) -> None:
    """422 unless a campaign's settings (``POST /campaigns``'s body, as a dict) stay within the
    limits."""
    chains, warmup, most = mcmc_iterations(body["mcmc"])
    outputs = len(body.get("outputs") or ())  # several: each output's posterior and scores
    each = f" x {outputs} outputs" if outputs else ""
    iterations = chains * (warmup + most) * max(1, outputs)
    if iterations > settings.limit_mcmc_iterations:
        what = (
            f"the MCMC work of one refit, {chains} chains x ({warmup} warm-up + {most} draws){each}"
        )
        raise _beyond(what, iterations, settings.limit_mcmc_iterations, "limit_mcmc_iterations")
    if body["max_labels"] > settings.limit_labels:
        raise _beyond("max_labels", body["max_labels"], settings.limit_labels, "limit_labels")
    size = pool_size(body["pool"], body["inputs"])
    if body["pool"]["type"] == "grid" and size > settings.limit_grid_points:
        shape = Space.of(body["inputs"]).grid_shape(int(body["pool"]["points_per_dim"]))
        what = f"the grid pool's size, {shape}"
        raise _beyond(what, size, settings.limit_grid_points, "limit_grid_points")
    candidates = min(int(body["pool_subsample"]), size)
    draws = scoring_draws(body["mcmc"], body["acquisition"]) * max(1, outputs)
    if candidates * draws > settings.limit_scoring_work:
        what = (
            f"the work of one scoring, {candidates:,} candidates (pool_subsample) x {draws} "
            f"acquisition draws{' (all outputs)' if outputs else ''}"
        )
        raise _beyond(what, candidates * draws, settings.limit_scoring_work, "limit_scoring_work")
    fantasies = body["mode"] == "parallel" and body["acquisition"] != "random"
    if fantasies and body["max_pending"] > settings.limit_pending:
        what = "max_pending of a parallel campaign (each point out is a fantasy in every scoring)"
        raise _beyond(what, body["max_pending"], settings.limit_pending, "limit_pending")


def team_full(team: str, limit: int) -> Unprocessable:
    """The 422 of a team that holds ``limit`` campaigns already."""
    return _beyond(
        f"the campaigns of team {team!r} with this one", limit + 1, limit, "limit_team_campaigns"
    )


def check_import(stored: int, more: int, settings: Settings) -> None:
    """422 if ``more`` labels on top of ``stored`` would exceed the label limit."""
    if stored + more > settings.limit_labels:
        what = f"the labels after this import, {stored:,} stored + {more:,}"
        raise _beyond(what, stored + more, settings.limit_labels, "limit_labels")


def check_evaluate(points: int, settings: Settings) -> None:
    """422 if a test set is larger than ``/evaluate`` may factor."""
    if points > settings.limit_evaluate_points:
        what = "the test set's size (its joint NLML factors a covariance of this order)"
        raise _beyond(what, points, settings.limit_evaluate_points, "limit_evaluate_points")
