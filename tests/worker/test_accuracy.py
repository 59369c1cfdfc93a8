"""The accuracy estimates against independent computations: closed-form LOO against refitting
each draw's GP without each label, the mixture's moments and the integrated variances against
numpy on the same draws and points."""

import math

import numpy as np
import pytest
import torch
from scipy.stats import norm

from fbgp_al.worker import accuracy, acquisition
from fbgp_al.worker.gp import predict, rbf
from fbgp_al.worker.transforms import DTYPE, OutputStandardization


def _data(n=12, d=2, draws=7, seed=0):
    rng = np.random.default_rng(seed)
    u = torch.tensor(rng.uniform(size=(n, d)), dtype=DTYPE)
    z = torch.sin(4 * u[:, 0]) + u[:, 1] ** 2 + 0.1 * torch.tensor(rng.normal(size=n))
    lengthscale = torch.tensor(rng.uniform(0.2, 1.5, size=(draws, d)), dtype=DTYPE)
    noise = torch.tensor(rng.uniform(1e-3, 0.2, size=draws), dtype=DTYPE)
    points = torch.tensor(rng.uniform(size=(50, d)), dtype=DTYPE)
    return u, z, lengthscale, noise, points


def test_loo_equals_refitting_without_each_label():
    u, z, lengthscale, noise, _ = _data()
    means, variances = accuracy.loo(u, z, lengthscale, noise)
    for i in range(len(z)):
        keep = torch.arange(len(z)) != i
        mean, var = predict(u[keep], z[keep], lengthscale, noise, u[i : i + 1])
        torch.testing.assert_close(means[:, i], mean[:, 0], rtol=0, atol=1e-10)
        torch.testing.assert_close(variances[:, i], var[:, 0], rtol=0, atol=1e-10)


def test_loo_with_known_label_noise_equals_the_direct_formula():
    u, z, lengthscale, noise, _ = _data(n=9, draws=3, seed=1)
    label_noise = torch.linspace(0.0, 0.3, len(z), dtype=DTYPE)
    means, variances = accuracy.loo(u, z, lengthscale, noise, label_noise)
    for j in range(len(noise)):
        K = (rbf(u, u, lengthscale[j : j + 1])[0] + torch.diag(noise[j] + label_noise)).numpy()
        for i in range(len(z)):
            rest = np.arange(len(z)) != i
            k = K[rest, i]
            solved = np.linalg.solve(K[np.ix_(rest, rest)], np.column_stack([z.numpy()[rest], k]))
            assert abs(means[j, i] - k @ solved[:, 0]) < 1e-10
            assert abs(variances[j, i] - (K[i, i] - k @ solved[:, 1])) < 1e-10


def test_mixture_moments_density_and_cdf_against_numpy():
    rng = np.random.default_rng(2)
    means, variances = rng.normal(size=(5, 8)), rng.uniform(0.1, 2.0, size=(5, 8))
    z = rng.normal(size=8)
    mix = accuracy.mixture_loo(*(torch.tensor(a) for a in (z, means, variances)))
    np.testing.assert_allclose(mix["mean"], means.mean(0), rtol=1e-13)
    second = (variances + means**2).mean(0)
    np.testing.assert_allclose(mix["variance"], second - means.mean(0) ** 2, rtol=1e-12)
    density = norm.pdf(z, means, np.sqrt(variances)).mean(0)
    np.testing.assert_allclose(mix["nlpd"], -np.log(density), rtol=1e-12)
    np.testing.assert_allclose(
        mix["cdf"], norm.cdf(z, means, np.sqrt(variances)).mean(0), rtol=1e-12
    )


@pytest.mark.parametrize("fit_elements", [acquisition.FIT_ELEMENTS, 2 * 12 * 12])
def test_integrated_variances_against_direct_computation(monkeypatch, fit_elements):
    u, z, lengthscale, noise, points = _data()
    whole = accuracy.loo(u, z, lengthscale, noise)  # one group
    monkeypatch.setattr(acquisition, "FIT_ELEMENTS", fit_elements)  # 2 draws a group: 4 groups
    mean, var = (a.numpy() for a in predict(u, z, lengthscale, noise, points))
    pool = accuracy.pool_moments(u, z, lengthscale, noise, points)
    qbc = mean.var(0)
    np.testing.assert_allclose(pool["qbc"], qbc, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(pool["ipv"], var.mean(0) + qbc, rtol=1e-12)
    latent = var - noise.numpy()[:, None]
    np.testing.assert_allclose(pool["ipv_f"], latent.mean(0) + qbc, rtol=1e-12)
    for grouped, reference in zip(accuracy.loo(u, z, lengthscale, noise), whole, strict=True):
        torch.testing.assert_close(grouped, reference, rtol=0, atol=1e-13)


@pytest.mark.parametrize("fit_elements", [acquisition.FIT_ELEMENTS, 2 * 12 * 12])
def test_past_its_work_each_point_averages_the_variances_of_the_draws_whose_turn_it_is(
    monkeypatch, fit_elements
):
    """With a stride k of 3 (the work allowed a third of 7 draws x 50 points x 12^2): point i's
    variance is the mean over the draws j = i mod 3, against the full predictions; the draws'
    disagreement (qbc) is every draw's at every point, as without a stride; groups of draws
    (2 a group) take their turns by their place among all the draws."""
    u, z, lengthscale, noise, points = _data()
    monkeypatch.setattr(accuracy, "VARIANCE_WORK", 7 * 50 * 12 * 12 / 3)
    monkeypatch.setattr(acquisition, "FIT_ELEMENTS", fit_elements)
    assert accuracy.variance_stride(7, 50, 12) == 3
    mean, var = (a.numpy() for a in predict(u, z, lengthscale, noise, points))
    pool = accuracy.pool_moments(u, z, lengthscale, noise, points)
    qbc = mean.var(0)
    np.testing.assert_allclose(pool["qbc"], qbc, rtol=1e-9, atol=1e-15)
    turns = np.arange(7)[:, None] % 3 == np.arange(50)[None, :] % 3  # draw j at point i
    expected = (var * turns).sum(0) / turns.sum(0)
    np.testing.assert_allclose(pool["ipv"], expected + qbc, rtol=1e-12)
    latent = (var - noise.numpy()[:, None]) * turns
    np.testing.assert_allclose(pool["ipv_f"], latent.sum(0) / turns.sum(0) + qbc, rtol=1e-12)
    out = accuracy.summary(u, z, lengthscale, noise, points, 1.0)
    assert out["variance_stride"] == 3
    assert accuracy.variance_stride(7, 50, 10_000) == 7  # every point keeps a draw


def test_summary_in_original_and_relative_units():
    u, z, lengthscale, noise, points = _data()
    y_std = 3.0
    out = accuracy.summary(u, z, lengthscale, noise, points, y_std)
    means, variances = (a.numpy() for a in accuracy.loo(u, z, lengthscale, noise))
    rmse_z = math.sqrt(((z.numpy() - means.mean(0)) ** 2).mean())
    assert out["loo_rmse_relative"] == pytest.approx(rmse_z, rel=1e-12)
    assert out["loo_rmse"] == pytest.approx(y_std * rmse_z, rel=1e-12)
    density = norm.pdf(z.numpy(), means, np.sqrt(variances)).mean(0)
    assert out["loo_nlpd"] == pytest.approx(-np.log(density).mean(), rel=1e-12)
    cdf = norm.cdf(z.numpy(), means, np.sqrt(variances)).mean(0)
    assert out["loo_coverage_95"] == pytest.approx(((cdf >= 0.025) & (cdf <= 0.975)).mean())
    pool = accuracy.pool_moments(u, z, lengthscale, noise, points)
    for name in ("ipv", "ipv_f", "qbc"):
        assert out[f"{name}_relative"] == pytest.approx(float(pool[name].mean()), rel=1e-12)
        assert out[name] == pytest.approx(y_std**2 * float(pool[name].mean()), rel=1e-12)
    assert out["pool_points"] == 50 and out["draws"] == 7 and out["variance_stride"] == 1
    assert set(accuracy.TARGETS) <= set(out)


def test_one_draw_has_no_disagreement():
    u, z, lengthscale, noise, points = _data(draws=1)
    out = accuracy.summary(u, z, lengthscale, noise, points, 1.0)
    assert out["qbc"] == 0.0
    assert out["ipv"] == pytest.approx(out["ipv_f"] + float(noise[0]), rel=1e-12)


def test_every_model_of_a_campaign_integrates_over_the_same_pool_points(monkeypatch):
    from types import SimpleNamespace

    from fbgp_al.worker import fitting
    from fbgp_al.worker.vocabulary.design import GridPool
    from fbgp_al.worker.vocabulary.space import Space

    seen = []
    monkeypatch.setattr(
        accuracy, "summary", lambda u, z, l, s, points, y_std, **_: seen.append(points)
    )
    pool = GridPool(dim=2, points_per_dim=60)
    spec = {"seed": 3, "pool_subsample": 5000, "pool": {"type": "grid", "points_per_dim": 60}}
    ones = torch.ones(1, 2, dtype=DTYPE)
    thin = SimpleNamespace(lengthscale=ones, noise=ones[:, 0])
    space = Space.of([{"name": "a", "lower": 0, "upper": 1}, {"name": "b", "lower": 0, "upper": 1}])
    for n in (4, 9):
        data = fitting.Data(
            torch.zeros(n, 2, dtype=DTYPE),
            torch.zeros(n, dtype=DTYPE),
            space,
            OutputStandardization(0.0, 1.0),
            seed=n,
        )
        fitting.accuracy_of(spec, pool, data, thin)
    assert len(seen[0]) == accuracy.POOL_POINTS and torch.equal(seen[0], seen[1])
    fitting.accuracy_of(dict(spec, pool_subsample=100), pool, data, thin)
    assert len(seen[2]) == 100 and len(torch.unique(seen[2], dim=0)) == 100


def _repeated(seed: int, rows: list[int]):
    """30 labels in 3-D and draws that repeat: 4 distinct ones, draw j the ``rows[j]``-th (and
    the generator, to draw points from)."""
    g = torch.Generator().manual_seed(seed)
    u = torch.rand(30, 3, generator=g, dtype=DTYPE)
    z = torch.sin(5 * u).sum(1)
    z = (z - z.mean()) / z.std()
    distinct_ls = 0.2 + torch.rand(4, 3, generator=g, dtype=DTYPE)
    distinct_noise = 0.01 + 0.1 * torch.rand(4, generator=g, dtype=DTYPE)
    index = torch.tensor(rows)
    return g, u, z, distinct_ls[index], distinct_noise[index]


def test_repeated_draws_give_the_summary_of_each_draw_factored_alone(monkeypatch):
    """The accuracy estimates of draws that repeat (each distinct one factored once) are those
    computed with every draw factored on its own."""
    g, u, z, lengthscale, noise = _repeated(8, [0, 0, 0, 1, 2, 2, 3, 3, 3, 3])
    points = torch.rand(50, 3, generator=g, dtype=DTYPE)
    shared = accuracy.summary(u, z, lengthscale, noise, points, 2.0)
    monkeypatch.setattr(accuracy, "distinct", lambda *a: None)
    alone = accuracy.summary(u, z, lengthscale, noise, points, 2.0)
    for key, value in alone.items():
        if key != "seconds":
            assert shared[key] == pytest.approx(value, rel=1e-12, abs=1e-14), key


@pytest.mark.parametrize("stride", [False, True])
def test_each_distinct_draw_is_factored_once_wherever_its_copies_fall(monkeypatch, stride):
    """Draws that repeat across the groups of draws (3 a group; copies of one draw in two
    groups) are factored once each, and give the estimates and predictions of every draw
    factored on its own (with a stride of 3 over the pool points too)."""
    # in groups of 3: 0 0 1 | 1 1 2 | 3 3 3 | 3
    g, u, z, lengthscale, noise = _repeated(9, [0, 0, 1, 1, 1, 2, 3, 3, 3, 3])
    points, at = (torch.rand(m, 3, generator=g, dtype=DTYPE) for m in (50, 7))
    monkeypatch.setattr(acquisition, "FIT_ELEMENTS", 3 * 30 * 30)
    if stride:
        monkeypatch.setattr(accuracy, "VARIANCE_WORK", 10 * 50 * 30 * 30 / 3)
    factored = []
    counted = accuracy.cholesky
    monkeypatch.setattr(accuracy, "cholesky", lambda K: factored.append(len(K)) or counted(K))
    shared, mean, var = accuracy.summary_at(u, z, lengthscale, noise, points, 2.0, at)
    assert sum(factored) == 4 and shared["variance_stride"] == (3 if stride else 1)
    for j in range(len(noise)):  # each draw on its own
        want = predict(u, z, lengthscale[j : j + 1], noise[j : j + 1], at)
        torch.testing.assert_close(mean[j], want[0][0], rtol=0, atol=1e-12)
        torch.testing.assert_close(var[j], want[1][0], rtol=0, atol=1e-12)
    monkeypatch.setattr(accuracy, "distinct", lambda *a: None)
    monkeypatch.setattr(acquisition, "FIT_ELEMENTS", 30 * 30)  # one draw a group
    alone = accuracy.summary(u, z, lengthscale, noise, points, 2.0)
    assert sum(factored) == 4 + 10
    for key, value in alone.items():
        if key != "seconds":
            assert shared[key] == pytest.approx(value, rel=1e-12, abs=1e-14), key


@pytest.mark.parametrize("fit_elements", [acquisition.FIT_ELEMENTS, 2 * 12 * 12])
def test_the_predictions_on_the_accuracy_factors_equal_a_fit_of_their_own(
    monkeypatch, fit_elements
):
    """summary_at's draws' predictions at other points, from the factors of its estimates (in
    groups of 2 draws, 3 of 7 draws repeated), against each draw fitted apart; its estimates
    are summary's."""
    u, z, lengthscale, noise, points = _data()
    lengthscale[[1, 4]], noise[[1, 4]] = lengthscale[0].clone(), noise[0].clone()
    at = points[:13] + 0.01
    monkeypatch.setattr(acquisition, "FIT_ELEMENTS", fit_elements)
    estimates, mean, var = accuracy.summary_at(u, z, lengthscale, noise, points, 2.0, at)
    for j in range(len(noise)):
        want = predict(u, z, lengthscale[j : j + 1], noise[j : j + 1], at)
        torch.testing.assert_close(mean[j], want[0][0], rtol=0, atol=1e-10)
        torch.testing.assert_close(var[j], want[1][0], rtol=0, atol=1e-10)
    alone = accuracy.summary(u, z, lengthscale, noise, points, 2.0)
    assert {k: v for k, v in estimates.items() if k != "seconds"} == {
        k: v for k, v in alone.items() if k != "seconds"
    }
