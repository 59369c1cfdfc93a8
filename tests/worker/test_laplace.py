"""Large campaigns' hyperparameters from a Laplace mixture (:mod:`worker.laplace`): the
Pareto-smoothed importance weights and their ``k`` are ArviZ's; the Student-t mixture's draws
have its closed-form moments; on a posterior that has concentrated, the resampled draws match a
grid quadrature of the exact posterior; a warm start finds the same mode as a cold search for a
fraction of the gradients; and a refit past ``laplace_from`` uses the mixture, or, where its
``k`` is above the limit, NUTS started from its draws."""

import math

import arviz as az
import numpy as np
import pytest
import torch
from scipy.stats import genpareto

from fbgp_al.worker import fitting, laplace
from fbgp_al.worker.fitting import posteriors
from fbgp_al.worker.laplace import (
    khat_limit,
    laplace_posterior,
    mixture_draws,
    mixture_log_density,
    proposal_count,
    psis,
)
from fbgp_al.worker.potential import GPPotential
from fbgp_al.worker.vocabulary.defaults import MCMC_DEFAULTS, MCMC_PRESETS
from fbgp_al.worker.vocabulary.design import GridPool
from fbgp_al.worker.vocabulary.sampler import sampler_line
from fbgp_al.worker.warm_start import usable
from tests.worker.test_mcmc import _assert_matches, _data, _quadrature


@pytest.mark.parametrize("shape", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("size", [150, 1000])
def test_psis_weights_and_k_are_arviz_s(shape, size):
    rng = np.random.default_rng(int(10 * shape) + size)
    log_ratios = np.log(genpareto(c=shape).rvs(size=size, random_state=rng)) + rng.normal()
    weights, k = psis(log_ratios)
    log_weights, khat = az.psislw(log_ratios.copy())
    assert k == pytest.approx(float(khat), abs=1e-9)
    np.testing.assert_allclose(weights, np.exp(log_weights), rtol=1e-9, atol=1e-15)


def test_psis_k_grows_with_the_tail_and_is_infinite_for_a_ratio_that_is_not():
    rng = np.random.default_rng(0)
    ks = [
        np.mean(
            [psis(np.log(genpareto(c=c).rvs(size=3000, random_state=rng)))[1] for _ in range(5)]
        )
        for c in (0.2, 0.5, 0.9)
    ]
    assert ks[0] < ks[1] < ks[2] and all(
        abs(k - c) < 0.12 for k, c in zip(ks, (0.2, 0.5, 0.9), strict=True)
    )
    weights, k = psis(np.array([0.0, 1.0, np.nan, -2.0] * 10))
    assert k == math.inf and weights[2] == 0 and weights.sum() == pytest.approx(1.0)


def test_khat_limit_and_proposal_count():
    assert khat_limit(150) == pytest.approx(1 - 1 / math.log10(150))
    assert khat_limit(100_000) == 0.7
    assert proposal_count(150, 200) == 300 and proposal_count(150, 999) == 150
    assert proposal_count(20, 200) == 300 and proposal_count(20, 999) == 150
    assert 150 <= proposal_count(150, 700) < 300
    assert proposal_count(150, 1000) == proposal_count(300, 5000) == laplace.PROPOSALS_FEW == 100


@pytest.mark.parametrize("df", [None, 5.0])
def test_the_mixture_s_draws_have_its_moments_and_its_density_integrates_them(df):
    modes = np.array([[0.0, 1.0], [3.0, -1.0]])
    scales = np.array([[[1.0, 0.0], [0.5, 0.5]], [[0.3, 0.0], [0.0, 2.0]]])
    weights = np.array([0.3, 0.7])
    draws = mixture_draws(200_000, modes, weights, scales, df, np.random.default_rng(1))
    widen = 1.0 if df is None else df / (df - 2)  # a Student-t's covariance: df / (df - 2) S
    mean = weights @ modes
    second = sum(
        w * (widen * s @ s.T + np.outer(m, m))
        for w, m, s in zip(weights, modes, scales, strict=True)
    )
    np.testing.assert_allclose(draws.mean(0), mean, atol=0.02)
    np.testing.assert_allclose(np.cov(draws.T), second - np.outer(mean, mean), atol=0.05)
    # the density on a grid sums to 1 (the t's tails beyond the box hold a little)
    g = np.linspace(-12, 14, 401)
    a, b = np.meshgrid(g, g, indexing="ij")
    density = np.exp(
        mixture_log_density(np.column_stack([a.ravel(), b.ravel()]), modes, weights, scales, df)
    )
    assert density.sum() * (g[1] - g[0]) ** 2 == pytest.approx(1.0, abs=0.01)


@pytest.fixture(scope="module")
def concentrated():
    """60 points of a sine with little noise: a posterior with one well-identified mode."""
    u, z = _data(60, 0.1, 11)
    return u, z, _quadrature(u, z, size=150, noise_floor=MCMC_DEFAULTS["noise_floor"])


def test_the_resampled_draws_match_a_quadrature_of_a_concentrated_posterior(concentrated):
    u, z, exact = concentrated
    post = laplace_posterior(u, z, draws=2000, seed=3)
    d = post.diagnostics
    assert d["method"] == "laplace" and d["khat"] <= d["khat_limit"], d
    logs = np.column_stack(
        [post.lengthscale[:, 0].log().numpy(), (post.noise - d["noise_floor"]).log().numpy()]
    )
    _assert_matches(logs, exact, tol_mean=0.1, tol_q=0.15)
    # the model's mode (the heaviest mode) lies within a posterior sd of the median
    mode = (post.mode_lengthscale[0].log().item(), math.log(post.mode_noise - d["noise_floor"]))
    for value, name in zip(mode, ("log_l", "log_s2"), strict=True):
        assert abs(value - exact[name]["quantiles"][1]) < exact[name]["sd"], name


def test_fewer_densities_weighed_are_resampled_to_the_draws_and_match_the_quadrature(
    concentrated, monkeypatch
):
    """From FEW_FROM labels (here 60) 100 draws of the mixture are weighed and 150 resampled
    from them: their limit is 0.5, and they match the quadrature within the noise of 100
    weighed draws (about three standard errors of a mean and of a 5% quantile at an
    importance ESS of 80: 0.3 and 0.7 posterior sds)."""
    u, z, exact = concentrated
    monkeypatch.setattr(laplace, "FEW_FROM", 60)
    post = laplace_posterior(u, z, draws=150, seed=3)
    d = post.diagnostics
    assert len(post.noise) == 150 and d["distinct_draws"] <= 100
    assert d["khat_limit"] == pytest.approx(0.5) and d["khat"] <= d["khat_limit"], d
    logs = np.column_stack(
        [post.lengthscale[:, 0].log().numpy(), (post.noise - d["noise_floor"]).log().numpy()]
    )
    _assert_matches(logs, exact, tol_mean=0.3, tol_q=0.7)


def test_a_mixture_too_narrow_tries_once_more_widened_and_matches_the_quadrature(
    concentrated, monkeypatch
):
    """Narrowed to 0.3 of its width, the mixture fails its check; widened by ``WIDEN`` its
    fresh draws pass theirs and match the quadrature (within the noise of an importance ESS of
    about 75, as below). A mixture that passes at first is not widened: the same draws as with
    ``widen=None``."""
    u, z, exact = concentrated
    first = laplace_posterior(u, z, draws=150, seed=3, widen=None)
    again = laplace_posterior(u, z, draws=150, seed=3)
    assert first.diagnostics["widened"] == again.diagnostics["widened"] == 1.0
    assert torch.equal(first.noise, again.noise)
    assert torch.equal(first.lengthscale, again.lengthscale)

    _narrowed(monkeypatch, 0.3)
    failed = laplace_posterior(u, z, draws=150, seed=3, widen=None).diagnostics
    assert failed["khat"] > failed["khat_limit"] and failed["widened"] == 1.0
    post = laplace_posterior(u, z, draws=150, seed=3)
    d = post.diagnostics
    assert d["widened"] == laplace.WIDEN and d["khat"] <= d["khat_limit"], d
    logs = np.column_stack(
        [post.lengthscale[:, 0].log().numpy(), (post.noise - d["noise_floor"]).log().numpy()]
    )
    _assert_matches(logs, exact, tol_mean=0.3, tol_q=0.7)


def _narrowed(monkeypatch, factor: float) -> None:
    """Every mode's Gaussian ``factor`` times as wide."""
    laplace_gaussian = laplace.mode_gaussian

    def narrow(potential, x):
        h, scale, half_log_det = laplace_gaussian(potential, x)
        return h / factor**2, scale * factor, half_log_det - math.log(factor) * len(x)

    monkeypatch.setattr(laplace, "mode_gaussian", narrow)
    monkeypatch.setattr("fbgp_al.worker.cold_start.mode_gaussian", narrow)


def test_the_check_has_teeth_a_mixture_too_narrow_fails_it(concentrated, monkeypatch):
    """Shrunk to a fifth of its width, the mixture no longer covers the posterior, nor does it
    widened: its ``k`` is above the limit."""
    u, z, _ = concentrated
    _narrowed(monkeypatch, 1 / 5)
    d = laplace_posterior(u, z, seed=3).diagnostics
    assert d["khat"] > d["khat_limit"] and d["widened"] == laplace.WIDEN, d


def test_a_warm_start_finds_the_cold_search_s_mode_for_a_fraction_of_its_gradients():
    rng = np.random.default_rng(4)
    u = rng.random((120, 3))
    y = np.sin(6 * u[:, 0]) + u[:, 1] ** 2 + 0.05 * rng.standard_normal(120)
    z = (y - y.mean()) / y.std()
    before = laplace_posterior(u[:-1], z[:-1], seed=1)
    cold = laplace_posterior(u, z, seed=2)
    warm = laplace_posterior(u, z, seed=2, previous=before.adaptation)
    assert (before.diagnostics["warm_start"], warm.diagnostics["warm_start"]) == ("cold", "warm")
    heaviest = [
        np.array(p.adaptation["modes"])[np.argmax(p.diagnostics["mode_weights"])]
        for p in (cold, warm)
    ]
    np.testing.assert_allclose(heaviest[0], heaviest[1], atol=0.02)
    assert warm.diagnostics["gradient_evaluations"] * 10 < cold.diagnostics["gradient_evaluations"]
    # from a NUTS posterior's adaptation (its chains' last draws) too
    nuts_like = {"last": (heaviest[0] + 0.05 * rng.standard_normal((5, 4))).tolist()}
    again = laplace_posterior(u, z, seed=2, previous=nuts_like)
    assert again.diagnostics["warm_start"] == "warm"
    np.testing.assert_allclose(np.array(again.adaptation["modes"])[0], heaviest[0], atol=0.02)


def test_a_cold_search_beside_the_warm_starts_once_the_labels_have_doubled():
    # a trend with a fast wiggle: a short lengthscale with little noise is the posterior's mode,
    # a long one that calls the wiggle noise a local mode (U higher by about 18) that L-BFGS
    # does not leave
    rng = np.random.default_rng(2)
    u = np.sort(rng.random((60, 1)), 0)
    y = u[:, 0] + 0.25 * np.sin(30 * u[:, 0]) + 0.1 * rng.standard_normal(60)
    z = (y - y.mean()) / y.std()
    stuck = [[-0.71, -1.2]]  # the local mode: a previous posterior that knew only it
    kept = laplace_posterior(
        u, z, seed=3, previous={"source": "laplace", "modes": stuck, "searched_at": 31}
    )
    again = laplace_posterior(
        u, z, seed=3, previous={"source": "laplace", "modes": stuck, "searched_at": 30}
    )
    assert kept.diagnostics["warm_start"] == "warm" and kept.adaptation["searched_at"] == 31
    assert again.diagnostics["warm_start"] == "warm+cold" and again.adaptation["searched_at"] == 60
    assert float(kept.mode_lengthscale.log()) == pytest.approx(-0.71, abs=0.05)
    assert float(again.mode_lengthscale.log()) == pytest.approx(-2.69, abs=0.05)
    assert float(again.mode_noise) < 0.5 * float(kept.mode_noise)
    # the better mode holds the mass, and the stuck one is kept beside it
    assert again.diagnostics["modes"] == 2 and max(again.diagnostics["mode_weights"]) > 0.999
    # the rule: a search without a previous posterior, none while the labels have not doubled;
    # NUTS chains with no record (a campaign below laplace_from) count as a search at the switch
    assert laplace.search_due(None, 60) and not laplace.search_due({"source": "laplace"}, 60)
    assert not laplace.search_due({"source": "laplace", "searched_at": 31}, 61)
    assert laplace.search_due({"source": "laplace", "searched_at": 31}, 62)
    assert not laplace.search_due({"last": stuck}, 500)
    assert laplace.searched_at({"last": stuck}, 500) == 500


def test_a_laplace_adaptation_starts_nuts_chains_warm(concentrated):
    u, z, _ = concentrated
    post = laplace_posterior(u, z, seed=3, chains=4)
    a = post.adaptation
    assert a["source"] == "laplace" and "max_rhat" not in a and len(a["last"]) == 4
    assert usable(a, np.arange(4), GPPotential(u.numpy(), z.numpy(), noise_floor=1e-6))


SPEC = {
    "inputs": [{"name": "x", "lower": 0.0, "upper": 1.0}],
    "pool": {"type": "grid", "points_per_dim": 41},
    "pool_subsample": 41,
    "acquisition": "qb-mgp",
    "mcmc": {**MCMC_DEFAULTS, "chains": 2, "warmup": 40, "laplace_from": 50},
    "seed": 2,
}


def _labels(u, z):
    return [
        {"x": [float(a)], "y": float(b), "index": None, "ticket": None}
        for a, b in zip(u[:, 0].tolist(), z.tolist(), strict=True)
    ]


def test_a_refit_past_laplace_from_uses_the_mixture_and_below_it_nuts(concentrated):
    u, z, _ = concentrated
    data = posteriors.prepare(SPEC, _labels(u, z))
    assert posteriors.uses_laplace(SPEC, 60) and not posteriors.uses_laplace(SPEC, 49)
    assert not posteriors.uses_laplace({"mcmc": {}}, 10_000)  # specs made before the option
    post = posteriors.posterior(SPEC, data, None)
    assert post.diagnostics["method"] == "laplace" and post.size == MCMC_DEFAULTS["draws"]
    assert sampler_line(post.diagnostics).startswith("Laplace mixture: Pareto k ")
    below = posteriors.posterior({**SPEC, "mcmc": {**SPEC["mcmc"], "laplace_from": 61}}, data, None)
    assert below.diagnostics["method"] == "nuts" and "laplace" not in below.diagnostics
    # the proposals weighed, where a caller names them: the limit on k is that many draws'
    more = posteriors.posterior(SPEC, data, None, proposals=1000)
    assert more.diagnostics["khat_limit"] == pytest.approx(laplace.khat_limit(1000))
    assert post.diagnostics["khat_limit"] != more.diagnostics["khat_limit"]


def test_a_mixture_that_fails_its_check_hands_over_to_nuts_started_from_it(
    concentrated, monkeypatch
):
    u, z, _ = concentrated
    monkeypatch.setattr(laplace, "khat_limit", lambda draws: -math.inf)  # no k passes
    data = posteriors.prepare(SPEC, _labels(u, z))
    post = posteriors.posterior(SPEC, data, None)
    d = post.diagnostics
    assert d["method"] == "nuts" and d["warm_start"] == "warm", d
    assert d["laplace"]["khat_limit"] == -math.inf and d["laplace"]["widened"] == laplace.WIDEN
    assert "Laplace mixture's Pareto k" in sampler_line(d)
    assert post.size == SPEC["mcmc"]["chains"] * d["samples_per_chain"]
    # the mixture's cold search is remembered: the next mixture does not search again at once
    assert post.adaptation["searched_at"] == data.n
    assert not laplace.search_due(post.adaptation, data.n + 1)


def test_the_model_of_a_large_campaign_and_its_next_refit(concentrated):
    """Through :func:`worker.fitting.fit`, as a refit job runs it: the model body holds the
    mixture's draws and diagnostics, and the next refit starts warm from its modes."""
    u, z, _ = concentrated
    labels = _labels(u, z)
    pool = GridPool(dim=1, points_per_dim=41)
    model, ranking = fitting.fit(SPEC, pool, labels[:-1], exclude=set())
    assert model["diagnostics"]["method"] == "laplace" and ranking
    assert model["adaptation"]["source"] == "laplace"
    again, _ = fitting.fit(SPEC, pool, labels, exclude=set(), previous=model)
    d = again["diagnostics"]
    assert d["method"] == "laplace" and d["warm_start"] == "warm"
    assert d["gradient_evaluations"] * 5 < model["diagnostics"]["gradient_evaluations"]
    assert len(again["samples"]["noise"]) == MCMC_DEFAULTS["draws"]
    assert torch.isfinite(torch.tensor(again["samples"]["lengthscale"])).all()


def test_the_paper_presets_sample_by_nuts_at_every_size():
    for name in ("paper", "paper-code", "paper-grid", "fixed"):
        assert MCMC_PRESETS[name]["laplace_from"] is None, name
    assert MCMC_PRESETS["target"]["laplace_from"] == MCMC_DEFAULTS["laplace_from"]


def test_a_warm_refit_keeps_the_hessians_until_the_labels_have_grown_by_a_twentieth(monkeypatch):
    """A warm mixture finds its modes by Newton steps with the previous mixture's Hessians
    (scaled by the labels' growth) and keeps them as its Gaussians: the same modes as L-BFGS
    and fresh Hessians find, to a hundredth of a posterior sd, and draws whose means lie within
    a tenth of a sd of theirs, for fewer gradients; past ``HESSIAN_KEPT`` times the labels at
    which they were computed, they are computed again."""
    rng = np.random.default_rng(4)
    u = rng.random((120, 3))
    y = np.sin(6 * u[:, 0]) + u[:, 1] ** 2 + 0.05 * rng.standard_normal(120)
    z = (y - y.mean()) / y.std()
    before = laplace_posterior(u[:-1], z[:-1], seed=1).adaptation
    assert before["hessians_at"] == before["scales_at"] == 119
    scale = np.array(before["scales"][0])
    kept = laplace.kept_hessians(before, 124)  # 124 <= 1.05 x 119
    np.testing.assert_allclose(kept[0], np.linalg.inv(scale @ scale.T) * 124 / 119, rtol=1e-12)
    assert laplace.kept_hessians(before, 125) is None and laplace.kept_hessians({}, 120) is None
    warm = laplace_posterior(u, z, seed=2, previous=before)
    monkeypatch.setattr(laplace, "HESSIAN_KEPT", 0.0)
    fresh = laplace_posterior(u, z, seed=2, previous=before)
    assert warm.adaptation["hessians_at"] == 119 and fresh.adaptation["hessians_at"] == 120
    for post in (warm, fresh):
        assert post.diagnostics["khat"] <= post.diagnostics["khat_limit"]
    sd = np.sqrt(np.diag(scale @ scale.T))
    apart = np.array(warm.adaptation["modes"][0]) - np.array(fresh.adaptation["modes"][0])
    assert (np.abs(apart) / sd).max() < 0.01
    draws = [np.c_[p.lengthscale.log().numpy(), p.noise.log().numpy()] for p in (warm, fresh)]
    assert (np.abs(draws[0].mean(0) - draws[1].mean(0)) / draws[1].std(0)).max() < 0.1
    saved = fresh.diagnostics["gradient_evaluations"] - warm.diagnostics["gradient_evaluations"]
    assert saved >= 2 * 4  # the Hessian's 2 x (3 + 1) gradients at least
