"""A refit's posterior inputs (:mod:`worker.fitting.posteriors`): the labels in the GP's units
(standardized, ``log y`` for a log output, known noise variances scaled alike), the seed of a
refit, the priors' centres for inputs scaled by the labels' range, and the campaign's MCMC
options, specs made before them included; a chain group's sampling as steps that its driver
answers, which give one process's draws when answered with every group's draws."""

import numpy as np
import pytest

from fbgp_al.worker.fitting.posteriors import (
    Check,
    chains,
    grouped,
    input_scale_prior,
    noise_floor,
    prepare,
    scoring_draws,
    uses_laplace,
    warm_start_of,
)
from fbgp_al.worker.nuts import Draws
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


TARGETED = {
    "inputs": [{"name": "x", "lower": 0.0, "upper": 1.0}],
    "seed": 5,
    "mcmc": {"chains": 3, "warmup": 30, "samples": 10, "draws": 60, "max_samples": 200},
}


def _targeted_data():
    x = np.linspace(0.05, 0.95, 12)
    y = np.sin(6.0 * x) + 0.1 * np.cos(40.0 * x)
    return prepare(TARGETED, [{"x": [float(a)], "y": float(b)} for a, b in zip(x, y, strict=True)])


def _lockstep(spec, data, groups):
    """The groups' steps driven side by side in this process, each check answered with every
    group's draws in chain order, as their jobs answer them from the others' notes; the groups'
    results and each check's draws per chain."""
    steps = [grouped(spec, data, ids) for ids in groups]
    checks = [next(s) for s in steps]
    seen = []
    while not all(c.stopped for c in checks):
        assert all(isinstance(c, Check) and not c.stopped for c in checks)
        together = np.concatenate([c.theta for c in checks])
        seen.append(together.shape[1])
        checks = [s.send(together) for s in steps]
    results = []
    for s in steps:
        with pytest.raises(StopIteration) as done:
            s.send(None)
        results.append(done.value.value)
    return results, seen


def test_chain_groups_answered_with_all_the_draws_give_one_process_draws():
    """Two groups' steps, each check answered with both groups' draws, stop together at the
    check a process running every chain stops at, with its draws to the bit; a group answered
    with None judges its share alone (:func:`chains`'s)."""
    data = _targeted_data()
    whole, how = chains(TARGETED, data)
    results, seen = _lockstep(TARGETED, data, [[0, 1], [2]])
    assert [r[1] for r in results] == [how, how]
    merged = Draws.concatenate([r[0] for r in results])
    for name in Draws.ARRAYS:
        assert getattr(merged, name).tobytes() == getattr(whole, name).tobytes(), name
    assert seen[0] == TARGETED["mcmc"]["samples"] and seen[-1] == whole.theta.shape[1]
    assert len(seen) > 1  # judged more than once: the answers decided when to stop
    alone, _ = chains(TARGETED, data, [2])
    assert alone.theta.shape[1] != whole.theta.shape[1]  # its share, judged on its own draws


def test_a_chain_group_without_a_target_yields_no_check():
    data = _targeted_data()
    fixed = {**TARGETED, "mcmc": {"chains": 3, "warmup": 30, "samples": 10}}
    with pytest.raises(StopIteration) as done:
        next(grouped(fixed, data, [1]))
    draws, how = done.value.value
    assert how == "cold" and draws.theta.shape == (1, 10, 2)
