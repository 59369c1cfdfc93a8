"""What a job costs (:mod:`service.costs`): a refit's work in NUTS iterations, its RQ timeout, a
short job's timeout, and whether a refit is long; on specs whose figures are worked out here."""

import math

import pytest

from fbgp_al.service.costs import (
    call_seconds,
    long_call,
    long_refit,
    refit_timeout,
    refit_work,
    scoring,
    short_timeout,
)
from fbgp_al.service.settings import Settings

X = {"name": "x", "lower": 0.0, "upper": 1.0}
# a count of draws (no target): 2 chains x (100 warm-up + 50 samples), thinned by 5
COUNTED = {
    "inputs": [X],
    "pool": {"type": "grid", "points_per_dim": 101},
    "acquisition": "qb-mgp",
    "mcmc": {"chains": 2, "warmup": 100, "samples": 50, "thinning": 5, "draws": None},
}


def test_a_refits_work_counts_chains_iterations_labels_outputs_and_features():
    assert refit_work(COUNTED, 0) == 2 * 2 * (100 + 50)  # twice: a warm start redone cold
    assert refit_work(COUNTED, 100) == 2 * refit_work(COUNTED, 0)  # 1 + (n / 100)^3
    two = dict(COUNTED, outputs=[{"name": "a"}, {"name": "b"}])
    assert refit_work(two, 0) == 2 * refit_work(COUNTED, 0)
    # sampling to a target: up to max_samples a chain
    target = dict(COUNTED, mcmc=dict(COUNTED["mcmc"], draws=20, max_samples=400))
    assert refit_work(target, 0) == 2 * 2 * (100 + 400)
    # 12 features: twice the work of 6 or fewer
    wide = dict(COUNTED, inputs=[dict(X, name=f"x{i}") for i in range(12)])
    assert refit_work(wide, 0) == 2 * refit_work(COUNTED, 0)
    assert refit_work(dict(wide, inputs=wide["inputs"][:6]), 0) == refit_work(COUNTED, 0)


def test_timeouts_grow_with_the_work_and_stay_within_their_bounds():
    settings = Settings()
    work = refit_work(COUNTED, 10)
    expected = math.ceil(settings.job_timeout_seconds + settings.refit_iteration_seconds * work)
    assert refit_timeout(COUNTED, 10, settings) == expected
    huge = dict(COUNTED, mcmc=dict(COUNTED["mcmc"], chains=64, samples=10**6))
    assert refit_timeout(huge, 10, settings) == settings.job_timeout_max_seconds
    # the scoring's work: its draws (2 chains x 50 / 5) x n^2, under the refit's timeout
    assert scoring(COUNTED, 10, settings) == (20 * 10 * 10, expected)
    assert scoring(COUNTED, 10, settings, outputs=3)[0] == 3 * 20 * 10 * 10
    # a short job never outlasts the API's wait for it, and takes a second at least
    assert short_timeout(10**9, 100, 30.0, settings) == 30
    assert short_timeout(0, 0, 0.1, settings) == 1
    assert short_timeout(100, 0, 600.0, settings) == math.ceil(
        settings.job_timeout_seconds + settings.short_point_seconds * 100
    )


def test_a_refit_is_long_by_its_last_time_or_else_by_its_estimate():
    settings = Settings()
    assert not long_refit(COUNTED, 3, None, settings)
    assert long_refit(COUNTED, 3, settings.long_refit_seconds + 1, settings)
    big = dict(COUNTED, mcmc=dict(COUNTED["mcmc"], chains=8, samples=4000))  # 2 x 8 x 4100
    assert refit_work(big, 3) > settings.long_refit_work
    assert long_refit(big, 3, None, settings)
    assert not long_refit(big, 3, 1.0, settings)  # once known, what it took decides


def test_a_model_call_is_long_by_its_points_its_labels_and_an_evaluations_pairs():
    """The estimate follows the measured times its constants came from (docs in
    :mod:`service.costs`): 100,000 points at 8 labels took 4.4 s, at 200 labels 22 s; a
    4,000-point evaluate 2.7 s, 500 points 0.13 s."""
    settings = Settings()
    assert call_seconds("predict", 100_000, 8) == pytest.approx(5.0, rel=0.05)
    assert call_seconds("predict", 100_000, 200) == pytest.approx(25.0, rel=0.05)
    assert call_seconds("evaluate", 4_000, 8) == pytest.approx(3.4, rel=0.05)
    assert call_seconds("evaluate", 500, 8) == pytest.approx(0.075, rel=0.05)
    assert long_call("predict", 100_000, 8, settings) and long_call("predict", 5_000, 200, settings)
    assert not long_call("predict", 10_000, 8, settings)
    assert not long_call("acquisition", 1_000, 200, settings)
    assert long_call("evaluate", 2_500, 8, settings) and not long_call(
        "predict", 2_500, 8, settings
    )


def test_a_log_outputs_predictions_cost_their_quantiles_more():
    """A log output's /predict finds its mixture's quantiles too: 1.2e-4 s a point more
    (measured at 25 labels, 10,000 points: 1.7 s against 0.5 s), whatever the labels; its
    other calls cost what a plain output's do."""
    settings = Settings()
    assert call_seconds("predict", 10_000, 8, log_points=10_000) == pytest.approx(1.7, rel=0.05)
    assert long_call("predict", 10_000, 8, settings, log_points=10_000)
    assert not long_call("predict", 10_000, 8, settings)
    assert call_seconds("acquisition", 1_000, 8, log_points=1_000) == call_seconds(
        "acquisition", 1_000, 8
    )
