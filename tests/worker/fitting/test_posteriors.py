"""A refit's posterior inputs (:mod:`worker.fitting.posteriors`): the labels in the GP's units
(standardized, ``log y`` for a log output, known noise variances scaled alike), the seed of a
refit, the priors' centres for inputs scaled by the labels' range, and the campaign's MCMC
options, specs made before them included."""

import numpy as np
import pytest

from fbgp_al.worker.fitting.posteriors import (
    input_scale_prior,
    noise_floor,
    prepare,
    scoring_draws,
    uses_laplace,
    warm_start_of,
)
from fbgp_al.worker.vocabulary.space import Space

INPUTS = [
    {"name": "a", "lower": 0.0, "upper": 10.0},
    {"name": "k", "type": "choice", "values": ["p", "q"]},
]
LABELS = [
    {"x": [2.0, "p"], "y": 1.0, "noise": 0.01},
    {"x": [5.0, "q"], "y": 4.0, "noise": 0.04},
    {"x": [9.0, "p"], "y": 16.0, "noise": 0.25},
]
SPEC = {"inputs": INPUTS, "seed": 7, "mcmc": {"chains": 2, "samples": 60, "thinning": 4}}


@pytest.mark.parametrize("transform", ["none", "log"])
def test_the_labels_in_the_gp_s_units(transform):
    spec = {**SPEC, "transform": transform, "noise": {"type": "known"}}
    data = prepare(spec, LABELS)
    y = np.array([1.0, 4.0, 16.0])
    modeled = np.log(y) if transform == "log" else y
    mean, std = modeled.mean(), modeled.std(ddof=1)
    np.testing.assert_allclose(data.z.numpy(), (modeled - mean) / std, rtol=1e-14)
    np.testing.assert_allclose(data.u.numpy(), Space.of(INPUTS).to_gp([lb["x"] for lb in LABELS]))
    noise = np.array([0.01, 0.04, 0.25])
    # a variance of y in z's units: / std^2, and for log y (delta method) / y^2 as well
    expected = noise / y**2 / std**2 if transform == "log" else noise / std**2
    np.testing.assert_allclose(data.noise.numpy(), expected, rtol=1e-12)
    assert prepare({**spec, "noise": None}, LABELS).noise is None


def test_each_refit_has_its_seed():
    seeds = {prepare(SPEC, LABELS[:n]).seed for n in (1, 2, 3)}
    assert len(seeds) == 3 and prepare(SPEC, LABELS).seed == prepare(SPEC, LABELS).seed
    assert prepare({**SPEC, "seed": 8}, LABELS).seed not in seeds


def test_inputs_scaled_by_the_labels_range_centre_the_priors_on_it():
    u = prepare(SPEC, LABELS).u
    assert input_scale_prior(SPEC, u) is None  # the box
    centres = input_scale_prior({**SPEC, "input_scaling": "labels"}, u)
    span = u.numpy().max(0) - u.numpy().min(0)
    np.testing.assert_allclose(centres[:-1], np.log(np.where(span > 1e-9, span, 1.0)))
    assert centres[-1] == 0.0  # the noise's prior is not scaled
    one = prepare(SPEC, LABELS[:1]).u  # a feature whose labels do not vary keeps the box
    assert (input_scale_prior({**SPEC, "input_scaling": "labels"}, one) == 0.0).all()


def test_the_campaign_s_mcmc_options_and_those_of_older_specs():
    assert scoring_draws(SPEC["mcmc"]) == 2 * (60 // 4)
    assert scoring_draws({**SPEC["mcmc"], "draws": 40}) == 40
    assert not uses_laplace(SPEC, 10**6)  # made before laplace_from: never
    laplace = {**SPEC, "mcmc": {**SPEC["mcmc"], "laplace_from": 100}}
    assert not uses_laplace(laplace, 99) and uses_laplace(laplace, 100)
    assert noise_floor(SPEC) == 1e-6 and noise_floor({"mcmc": {"noise_floor": 0.0}}) == 0.0
    previous = {"adaptation": {"last": [[0.0]]}}
    assert warm_start_of(SPEC, previous) is None  # warm starts not asked for
    warm = {**SPEC, "mcmc": {**SPEC["mcmc"], "warm_start": True}}
    assert warm_start_of(warm, previous) == previous["adaptation"]
    assert warm_start_of(warm, None) is None
