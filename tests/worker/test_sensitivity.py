"""Sobol indices of the GP's posterior mean through the stored model's path
(:mod:`worker.sensitivity`): on Ishigami against the analytic indices (and SALib on a sampled
model's mean), each output of a campaign of several with its own draws, and the Monte Carlo
method against the closed form. The indices' own tests are tests/worker/vocabulary/test_sobol.py."""

import math

import numpy as np
import pytest
import torch
from SALib.analyze import sobol as salib_sobol
from SALib.sample import sobol as salib_sample

from fbgp_al.worker import acquisition, gp, sensitivity
from fbgp_al.worker.vocabulary import sobol
from fbgp_al.worker.vocabulary.space import Space
from tests.worker.vocabulary.test_sobol import MIXED, _ishigami

PI = math.pi


def test_ishigami_indices_from_a_stored_model_are_within_005_of_the_analytic_ones():
    """300 Latin-hypercube-like labels of Ishigami, one draw at the lengthscales a maximum
    likelihood fit found for them (0.256, 0.187, 0.206, noise ~0; fixed here), through the
    stored model's path that the service will call."""
    space = Space.of([{"name": f"x{i}", "lower": -PI, "upper": PI} for i in (1, 2, 3)])
    rng = np.random.default_rng(0)
    v = (rng.permuted(np.tile(np.arange(300), (3, 1)), axis=1).T + rng.random((300, 3))) / 300
    y = _ishigami(v)
    x = space.pool_to_code(v)
    labels = [{"x": row.tolist(), "y": float(t)} for row, t in zip(x, y, strict=True)]
    draw = {"lengthscale": [[0.26, 0.19, 0.21]], "noise": [1e-6]}
    model = {
        "n_labeled": 300,
        "version": 1,
        "acquisition_samples": draw,
        "chains": 1,
        "mode": {"lengthscale": draw["lengthscale"][0], "noise": 1e-6},
        "transform": {
            "lower": [-PI] * 3,
            "upper": [PI] * 3,
            "y_mean": float(y.mean()),
            "y_std": float(y.std(ddof=1)),
        },
    }
    spec = {"inputs": [i.spec() for i in space.inputs]}
    got = sensitivity.sensitivity_outputs(spec, model, labels)
    assert got["inputs"] == ["x1", "x2", "x3"] and got["draws"] == 1
    assert np.allclose(got["first"]["mean"], [0.3139, 0.4424, 0.0], atol=0.05), got
    assert np.allclose(got["total"]["mean"], [0.5576, 0.4424, 0.2437], atol=0.05), got
    # Var of Ishigami: a^2/8 + b pi^4/5 + b^2 pi^8/18 + 1/2 = 13.845
    assert got["variance"]["mean"] == pytest.approx(13.845, rel=0.05)


def _two_output_campaign():
    space = MIXED
    rng = np.random.default_rng(8)
    v = sobol.sample_inputs(space, 24, rng)
    x = space.from_pool(v)
    ya = 3 * v[:, 0] + np.sin(6 * v[:, 1])
    yb = 100 + 40 * (v[:, 2] > 0.7) + v[:, 0]
    labels = [
        {"x": p, "y": {"s": float(a), "t": float(b)}} for p, a, b in zip(x, ya, yb, strict=True)
    ]

    def part(y, ls):
        draws = {"lengthscale": ls, "noise": [1e-3] * len(ls)}
        return {
            "acquisition_samples": draws,
            "chains": 1,
            "mode": {"lengthscale": ls[0], "noise": 1e-3},
            "transform": {"y_mean": float(np.mean(y)), "y_std": float(np.std(y, ddof=1))},
        }

    model = {
        "n_labeled": 24,
        "version": 24,
        "transform": space.transform(),
        "outputs": {
            "s": part(ya, [[0.4, 0.5, 1, 1, 1], [0.6, 0.3, 2, 2, 2]]),
            "t": part(yb, [[1.0, 2.0, 0.7, 0.7, 0.7]]),
        },
    }
    spec = {
        "inputs": [i.spec() for i in space.inputs],
        "seed": 1,
        "outputs": [{"name": "s"}, {"name": "t"}],
    }
    return spec, model, labels


def test_each_output_has_its_own_draws_and_indices():
    spec, model, labels = _two_output_campaign()
    got = sensitivity.sensitivity_outputs(spec, model, labels)["outputs"]
    assert got["s"]["draws"] == 2 and got["t"]["draws"] == 1
    assert got["s"]["inputs"] == got["t"]["inputs"] == ["a", "n", "alloy"]
    assert np.argmax(got["t"]["total"]["mean"]) == 2 and got["t"]["total"]["mean"][2] > 0.9
    assert got["s"]["total"]["mean"][2] < 0.05
    # in each output's units: t's labels span ~40, s's ~4
    assert got["t"]["variance"]["mean"] > 20 * got["s"]["variance"]["mean"]


def test_monte_carlo_method_agrees_with_the_closed_form_on_a_stored_model():
    spec, model, labels = _two_output_campaign()
    exact = sensitivity.sensitivity_outputs(spec, model, labels)["outputs"]["s"]
    mc = sensitivity.sensitivity_outputs(spec, model, labels, method="monte-carlo", samples=2**15)[
        "outputs"
    ]["s"]
    assert mc["method"] == "monte-carlo"
    for key in ("first", "total"):
        assert np.allclose(mc[key]["mean"], exact[key]["mean"], atol=0.03), (key, mc, exact)
    fewer = sensitivity.sensitivity_outputs(spec, model, labels, draws=1)["outputs"]
    assert fewer["s"]["draws"] == fewer["t"]["draws"] == 1
    assert fewer["t"] == sensitivity.sensitivity_outputs(spec, model, labels)["outputs"]["t"]
    with pytest.raises(ValueError, match="method"):
        sensitivity.sensitivity_outputs(spec, model, labels, method="fast")


@pytest.mark.slow
def test_ishigami_150_labels_and_nuts_give_the_analytic_indices_and_salib_agrees():
    """A fully Bayesian model of Ishigami on 150 Latin-hypercube labels, its lengthscales and
    noise sampled by the campaign's NUTS (its chains started from the grid, as by default; 2
    chains x (100 + 100), thinned to 50 draws), its
    indices through the stored model's path that ``GET .../sensitivity`` runs: every mean
    within 0.05 of the analytic value, each inside its interval, and the intervals reported.
    On the first draw's mean, SALib's Saltelli estimator (2^13 base points) agrees with the
    closed form within its 95% confidence interval."""
    from scipy.stats import qmc

    from fbgp_al.worker import fitting

    space = Space.of([{"name": f"x{i}", "lower": -PI, "upper": PI} for i in (1, 2, 3)])
    v = qmc.LatinHypercube(d=3, seed=11).random(150)
    y = _ishigami(v)
    labels = [
        {"x": row.tolist(), "y": float(t)} for row, t in zip(space.pool_to_code(v), y, strict=True)
    ]
    mcmc = {
        "chains": 2,
        "warmup": 100,
        "samples": 100,
        "thinning": 4,
        "init": "grid",
        "start_metric": True,
    }
    spec = {"inputs": [i.spec() for i in space.inputs], "seed": 3, "mcmc": mcmc}
    sampled = fitting.sample(spec, labels)
    data, post = sampled.data, sampled.post
    model = {
        "n_labeled": 150,
        "version": 150,
        **post.to_dict(),
        "acquisition_samples": post.for_scoring(mcmc).to_dict()["samples"],
        "transform": {
            **data.space.transform(),
            "y_mean": data.scale_y.mean,
            "y_std": data.scale_y.std,
        },
    }
    got = sensitivity.sensitivity_outputs(spec, model, labels)
    assert got["draws"] == 50 and got["level"] == 0.95
    for key, analytic in (("first", [0.3139, 0.4424, 0.0]), ("total", [0.5576, 0.4424, 0.2437])):
        mean, low, high = (np.array(got[key][b]) for b in ("mean", "low", "high"))
        assert np.all(np.abs(mean - analytic) <= 0.05), (key, got[key])
        assert np.all((low <= mean) & (mean <= high)), (key, got[key])
    assert np.all(np.array(got["total"]["high"]) > np.array(got["total"]["low"]))
    # SALib on one draw's GP mean, against the closed form of the same mean
    ls = post.for_scoring(mcmc).lengthscale[:1]
    alpha = sensitivity.draw_weights(data.u, data.z, ls, post.for_scoring(mcmc).noise[:1])
    u = data.u.numpy()
    exact = sobol.closed_form(space, u, alpha, ls.numpy())
    problem = {"num_vars": 3, "names": ["x1", "x2", "x3"], "bounds": [[0, 1]] * 3}
    points = salib_sample.sample(problem, 2**13, calc_second_order=False, seed=12)
    f = sobol.gp_mean(space, u, alpha, ls.numpy())(points)[0]
    salib = salib_sobol.analyze(problem, f, calc_second_order=False, seed=13)
    for key, ours in (("S1", "first"), ("ST", "total")):
        assert np.all(np.abs(salib[key] - exact[ours][0]) <= salib[f"{key}_conf"]), (key, salib)


def test_draw_weights_factor_each_distinct_draw_once_in_groups(monkeypatch):
    """Draws in groups of 2 (``FIT_ELEMENTS``) and a repeated draw: each draw's weights are
    those of its own GP solved alone, ``(K + s2 I)^-1 z`` by numpy."""
    rng = np.random.default_rng(8)
    u = torch.from_numpy(rng.random((25, 2)))
    z = torch.from_numpy(np.sin(4 * u[:, 0].numpy()) + u[:, 1].numpy())
    ls = torch.from_numpy(np.exp(rng.normal(-1.0, 0.3, (5, 2))))
    noise = torch.from_numpy(np.exp(rng.normal(-4.0, 0.5, 5)))
    ls[3], noise[3] = ls[0], noise[0]  # a repeated draw
    factored = []
    monkeypatch.setattr(acquisition, "FIT_ELEMENTS", 2 * 25 * 25)
    monkeypatch.setattr(
        sensitivity, "factorize", lambda *a: factored.append(len(a[2])) or gp.factorize(*a)
    )
    alpha = sensitivity.draw_weights(u, z, ls, noise)
    assert factored == [2, 2]  # 4 distinct draws, 2 at a time
    x = u.numpy()
    for b in range(5):
        d2 = (((x[:, None, :] - x[None, :, :]) / ls[b].numpy()) ** 2).sum(-1)
        K = np.exp(-0.5 * d2) + noise[b].item() * np.eye(25)
        np.testing.assert_allclose(alpha[b], np.linalg.solve(K, z.numpy()), rtol=1e-8)
