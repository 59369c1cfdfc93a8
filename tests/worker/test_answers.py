"""What a stored model answers (:mod:`worker.answers`) with known noise: predictions, the test NLML
and the mixture's NLPD against the formulas written out, and on Motorcycle a GP told each label's
noise variance predicts held-out points better than one that learns a single level."""

import numpy as np
import pytest
from scipy.stats import multivariate_normal, norm

from fbgp_al.clients.simulators import get_simulator
from fbgp_al.worker import answers, fitting
from fbgp_al.worker.vocabulary.design import GridPool
from tests.worker.known_noise import SPEC
from tests.worker.known_noise import labels as _labels


def _kernel(a, b, lengthscale):
    """The ARD RBF kernel written out in numpy."""
    diff = (a[:, None, :] - b[None, :, :]) / lengthscale
    return np.exp(-0.5 * (diff**2).sum(-1))


def test_metrics_and_predictions_with_known_noise_match_the_formula():
    """``answers`` on a hand-made model: /predict's variance is latent + s2 (original units), and
    /evaluate's NLML and mixture NLPD add the test points' own noise to it."""
    rng = np.random.default_rng(7)
    x, y, noise = rng.uniform(0, 10, 8), rng.normal(2.0, 3.0, 8), rng.uniform(0.1, 4.0, 8)
    xt, yt, nt = rng.uniform(0, 10, 5), rng.normal(2.0, 3.0, 5), rng.uniform(0.0, 4.0, 5)
    labels = _labels(x, y, noise)
    mean_y, std_y = float(np.mean(y)), float(np.std(y, ddof=1))
    draws = {"lengthscale": [[0.2], [0.35]], "noise": [0.05, 0.2]}
    model = {
        "n_labeled": 8,
        "version": 8,
        "samples": draws,
        "acquisition_samples": draws,
        "mode": {"lengthscale": [0.3], "noise": 0.1},
        "chains": 2,
        "transform": {"lower": [0.0], "upper": [10.0], "y_mean": mean_y, "y_std": std_y},
    }
    u, ut = x[:, None] / 10, xt[:, None] / 10
    z, zt = (y - mean_y) / std_y, (yt - mean_y) / std_y
    nz, ntz = noise / std_y**2, nt / std_y**2

    def gp(ls, s2):
        K = _kernel(u, u, np.array([ls])) + np.diag(nz) + s2 * np.eye(8)
        k = _kernel(u, ut, np.array([ls]))
        mean = k.T @ np.linalg.solve(K, z)
        cov = _kernel(ut, ut, np.array([ls])) - k.T @ np.linalg.solve(K, k) + s2 * np.eye(5)
        return mean, cov

    mean, cov = gp(0.3, 0.1)
    pred = answers.predict(SPEC, model, labels, xt[:, None].tolist())
    assert np.allclose(pred["mean"], mean_y + std_y * mean, atol=1e-9)
    assert np.allclose(pred["variance"], std_y**2 * np.diag(cov), rtol=1e-9)
    got = answers.metrics(SPEC, model, labels, xt[:, None].tolist(), yt.tolist(), nt.tolist())
    nlml = -multivariate_normal(mean, cov + np.diag(ntz)).logpdf(zt) / 5
    assert got["nlml"] == pytest.approx(nlml, rel=1e-9)
    dens = []
    for ls, s2 in ((0.2, 0.05), (0.35, 0.2)):
        m, c = gp(ls, s2)
        dens.append(norm(m, np.sqrt(np.diag(c) + ntz)).pdf(zt))
    assert got["nlpd_mixture"] == pytest.approx(-np.log(np.mean(dens, 0)).mean(), rel=1e-9)
    assert got["rmse"] == pytest.approx(np.sqrt(np.mean((mean_y + std_y * mean - yt) ** 2)))
    # without the test points' noise: the variances are latent + s2 alone
    bare = answers.metrics(SPEC, model, labels, xt[:, None].tolist(), yt.tolist())
    assert bare["nlml"] == pytest.approx(-multivariate_normal(mean, cov).logpdf(zt) / 5, rel=1e-9)


def test_known_noise_beats_one_learned_level_on_motorcycle():
    """Motorcycle's noise sd runs from 0.03 to 0.9: a GP told each label's noise variance
    (noise_std(x)^2) predicts held-out points, whose own noise is known, with a lower NLPD than
    one that learns a single level, through the service's refit (sampler, mode) and answers."""
    sim = get_simulator("motorcycle")
    rng = np.random.default_rng(0)
    pool = np.arange(101.0)
    train = np.sort(rng.choice(101, 40, replace=False))
    test = np.setdiff1d(np.arange(101), train)

    def observe(idx):
        x = pool[idx][:, None]
        sd = sim.noise_std(x)
        return x, sim.mean(x) + sd * rng.standard_normal(len(idx)), sd**2

    x, y, var = observe(train)
    xt, yt, vt = observe(test)
    spec = dict(
        SPEC,
        inputs=[{"name": "x", "lower": 0.0, "upper": 100.0}],
        pool={"type": "grid", "points_per_dim": 101},
        pool_subsample=20,
        seed=3,
        mcmc={"chains": 2, "warmup": 40, "samples": 40, "thinning": 4},
    )
    learned_spec = dict(spec, noise={"type": "learned"})
    grid = GridPool(dim=1, points_per_dim=101)
    nlpd = {}
    for name, s, labels, test_noise in (
        ("known", spec, _labels(x[:, 0], y, var), vt),
        ("learned", learned_spec, _labels(x[:, 0], y), None),
    ):
        model, _ = fitting.fit(s, grid, labels, exclude=set(train.tolist()))
        pred = answers.predict(s, model, labels, xt.tolist())
        sd = np.sqrt(np.array(pred["variance"]) + (0 if test_noise is None else test_noise))
        nlpd[name] = -norm(pred["mean"], sd).logpdf(yt).mean()
        metrics = answers.metrics(
            s,
            model,
            labels,
            xt.tolist(),
            yt.tolist(),
            None if test_noise is None else test_noise.tolist(),
        )
        nlpd[name + " nlml"] = metrics["nlml"]
        if name == "known":
            assert model["mode"]["noise"] < 0.05  # the nugget: little noise left to learn
    assert nlpd["known"] < nlpd["learned"] - 0.2, nlpd
    assert nlpd["known nlml"] < nlpd["learned nlml"] - 0.2, nlpd
