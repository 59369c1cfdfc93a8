"""What a job costs: a refit's iterations and scoring draws, a pool's size, a refit's work in
NUTS iterations, whether it is long (a lane of its own, :func:`service.queues.refit_queue`), and
the RQ timeouts of refits and short jobs. :mod:`service.limits` bounds some of them."""

from __future__ import annotations

import math

from fbgp_al.worker.vocabulary.defaults import MCMC_DEFAULTS
from fbgp_al.worker.vocabulary.space import Space

FEATURES_AT_UNIT_WORK = 6  # the model's features of the problems refit_work was set by


def mcmc_iterations(mcmc: dict) -> tuple[int, int, int]:
    """``(chains, warm-up, draws)`` of one refit at its most: the longer warm-up (a warm start's
    or a cold one's) and the most draws a chain may run (``max_samples`` when sampling to a
    target, else ``samples``)."""
    warmup = int(mcmc["warmup"])
    if mcmc.get("warm_start"):
        warmup = max(warmup, int(mcmc.get("warm_warmup", 0)))
    most = int(mcmc["max_samples"]) if mcmc.get("draws") else int(mcmc["samples"])
    return int(mcmc["chains"]), warmup, most


def scoring_draws(mcmc: dict, acquisition: str) -> int:
    """The posterior draws one scoring predicts with: the target's ``draws`` spread over the
    chains, or every ``thinning``-th draw; one for ``alm`` (the mode), none for ``random``."""
    if acquisition == "random":
        return 0
    if acquisition == "alm":
        return 1
    chains = int(mcmc["chains"])
    if mcmc.get("draws"):
        per = min(math.ceil(int(mcmc["draws"]) / chains), int(mcmc["max_samples"]))
        return chains * per
    return chains * (int(mcmc["samples"]) // int(mcmc["thinning"]))


def pool_size(pool: dict, inputs: list[dict]) -> int:
    """The pool's number of points; a grid's, from each input's number of levels; a continuous
    pool's, unbounded (2^62: a refit draws ``pool_subsample`` of them)."""
    if pool["type"] == "grid":
        return Space.of(inputs).grid_size(int(pool["points_per_dim"]))
    if pool["type"] == "continuous":  # the box: as many as a refit draws
        return 2**62
    return len(pool["points"]) if "points" in pool else int(pool["size"])


def refit_work(spec: dict, n: int) -> float:
    """A refit's work in NUTS iterations of a campaign of at most 100 labels and at most
    :data:`FEATURES_AT_UNIT_WORK` features: chains x (warm-up + the most samples a chain may
    draw), twice (a warm start that did not mix is redone cold), times ``1 + (n / 100)^3`` for
    ``n`` labels (a Cholesky factor per gradient), times the number of outputs (each has its
    posterior), times ``features / 6`` beyond 6 features (a float or int input is one, a choice
    input one per value): each feature adds a lengthscale to sample and a squared-distance
    matrix to every gradient. Measured (one BLAS thread, as a worker runs): a gradient at
    n = 200 took 0.70 ms with 2 features, 1.85 with 20, 9.1 with 100 and 12.9 with 300, and
    NUTS took 606, 1,489, 1,658 and 1,749 of them in 120 iterations at n = 60. Against 6
    features (interpolated) that is about 3.6x at 20 features and 19.6x at 100, where the
    factor gives 3.3 and 16.7, and 29x at 300, where it gives 50: a wide campaign's first
    refit goes to the long queue, and its timeout grows with it."""
    mcmc = dict(MCMC_DEFAULTS, **spec.get("mcmc", {}))
    most = mcmc["samples"]
    if mcmc.get("draws") is not None:  # sampling to a target: up to max_samples per chain
        most = max(most, mcmc["max_samples"])
    outputs = len(spec.get("outputs") or [None])
    wide = max(1.0, Space.of(spec["inputs"]).n_features / FEATURES_AT_UNIT_WORK)
    labels = 1.0 + (n / 100.0) ** 3
    return 2.0 * mcmc["chains"] * (mcmc["warmup"] + most) * labels * outputs * wide


def refit_timeout(spec: dict, n: int, settings) -> int:
    """The RQ timeout of a refit (and of its chain groups and merge) on ``n`` labels, seconds."""
    seconds = settings.job_timeout_seconds + settings.refit_iteration_seconds * refit_work(spec, n)
    return math.ceil(min(seconds, settings.job_timeout_max_seconds))


def refit_job(
    spec: dict, n: int, last_seconds: float | None, settings, last_n: int | None = None
) -> tuple[int, bool]:
    """A refit job's timeout (:func:`refit_timeout`) and whether it is long
    (:func:`long_refit`: its lane, :func:`service.queues.refit_queue`)."""
    return (refit_timeout(spec, n, settings), long_refit(spec, n, last_seconds, settings, last_n))


def scoring(spec: dict, n: int, settings, outputs: int = 1) -> tuple[float, int]:
    """A refit's scoring on ``n`` labels: its work per candidate (draws x n^2, for each of
    ``outputs``), and the timeout of the refit's job (:func:`refit_timeout`), which its parts
    share (:func:`service.jobs.share_scoring`)."""
    draws = scoring_draws(spec["mcmc"], spec["acquisition"])
    return outputs * draws * n * n, refit_timeout(spec, n, settings)


def short_timeout(points: int, n: int, wait_seconds: float, settings) -> int:
    """The RQ timeout of a short job asked about ``points`` points of a campaign with ``n``
    labels: never longer than the API waits for its answer."""
    work = points * (1.0 + (n / 100.0) ** 2)
    seconds = settings.job_timeout_seconds + settings.short_point_seconds * work
    return max(1, math.ceil(min(seconds, wait_seconds, settings.job_timeout_max_seconds)))


# a model call's seconds on a worker (one BLAS thread), measured on the 2-core VM against a
# campaign of 8 and of 200 labels in 2-D: /predict of 1,000 to 100,000 points 0.18 to 4.4 s
# (n = 8) and 0.40 to 22 s (n = 200), about CALL_POINT_SECONDS a point times 1 + (n / 100)^2;
# /evaluate of 500 to 4,000 points 0.13 to 2.7 s, its joint covariance's m^2 on top
CALL_POINT_SECONDS = 5e-5
EVALUATE_PAIR_SECONDS = 2e-7
# the Sobol indices of 150 draws at n = 200 labels in 6-D: 2.8 s; 24 s at n = 500 (about n^2)
SENSITIVITY_SECONDS_AT_200 = 3.0


# a log output's /predict also finds its mixture's median and 95% interval (a few Newton steps
# on the CDF of its 150 draws' mixture) and lognormal moments: about this many seconds more a
# point, whatever n (1.2 s more for 10,000 points at 25 labels, where the rest took 0.5 s)
LOG_POINT_SECONDS = 1.2e-4


def call_seconds(name: str, points: int, n: int, log_points: int = 0) -> float:
    """A model call's estimated seconds on a worker: ``points`` (each output's counted) at
    :data:`CALL_POINT_SECONDS` times ``1 + (n / 100)^2`` for ``n`` labels, and an
    ``evaluate``'s ``points^2`` pairs at :data:`EVALUATE_PAIR_SECONDS`, a ``predict``'s
    ``log_points`` (those of its outputs modeled on the log scale) at
    :data:`LOG_POINT_SECONDS` more; the ``sensitivity`` indices at
    :data:`SENSITIVITY_SECONDS_AT_200` times ``(n / 200)^2``."""
    if name == "sensitivity":
        return SENSITIVITY_SECONDS_AT_200 * (n / 200.0) ** 2
    seconds = CALL_POINT_SECONDS * points * (1.0 + (n / 100.0) ** 2)
    if name == "predict":
        seconds += LOG_POINT_SECONDS * log_points
    return seconds + (EVALUATE_PAIR_SECONDS * points * points if name == "evaluate" else 0.0)


def long_call(name: str, points: int, n: int, settings, log_points: int = 0) -> bool:
    """Whether a model call is long (:func:`call_seconds` over ``long_call_seconds``): it
    waits in a queue of its own, which light workers never take, so that a small campaign's
    refit never waits behind it there."""
    return call_seconds(name, points, n, log_points) > settings.long_call_seconds


def long_refit(
    spec: dict, n: int, last_seconds: float | None, settings, last_n: int | None = None
) -> bool:
    """Whether a campaign's refit on ``n`` labels is long. Once a refit's time is known
    (``last_seconds``, on ``last_n`` labels), by that time scaled to the work now
    (:func:`refit_work` on ``n`` over on ``last_n``: labels imported since count), against
    ``long_refit_seconds``; before, by its work or its scoring's against the ``long_refit_*``
    bounds."""
    if last_seconds is not None:
        scale = refit_work(spec, n) / refit_work(spec, last_n if last_n is not None else n)
        return last_seconds * max(1.0, scale) > settings.long_refit_seconds
    # (a spec stored by an older version may lack what has a default now)
    mcmc = dict(MCMC_DEFAULTS, **spec.get("mcmc", {}))
    subsample = int(spec.get("pool_subsample", 10_000))
    candidates = min(subsample, pool_size(spec["pool"], spec["inputs"]))
    scoring = candidates * scoring_draws(mcmc, spec.get("acquisition", "qb-mgp"))
    return (
        refit_work(spec, n) > settings.long_refit_work or scoring > settings.long_refit_scoring_work
    )
