"""The failure model (worker.feasibility): its Laplace approximation against scikit-learn's
GaussianProcessClassifier with the same kernel and hyperparameters, against the exact posterior
by quadrature in 1-D, its predictive integral against quadrature, and its behaviour on a failure
corner and on degenerate data."""

import json
import math

import numpy as np
import pytest
from scipy import integrate, linalg, special
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fbgp_al.worker import feasibility as fe
from fbgp_al.worker.feasibility import classifier


def _corner(n: int, seed: int):
    """``n`` uniform runs in the unit square that fail where ``u1 > 0.8`` and ``u2 < 0.3``."""
    u = np.random.default_rng(seed).random((n, 2))
    return u, ~((u[:, 0] > 0.8) & (u[:, 1] < 0.3))


def _sklearn(u, success, lengthscale, variance, bias, fixed=True):
    bounds = "fixed" if fixed else (1e-5, 1e5)
    kernel = C(variance, bounds) * RBF(lengthscale, bounds)
    if bias:
        kernel = kernel + C(bias, bounds)
    return GaussianProcessClassifier(kernel, optimizer=None).fit(u, success.astype(int))


@pytest.mark.parametrize("d, bias", [(1, 0.0), (2, 1.5), (3, 0.7)])
def test_laplace_matches_sklearn_at_fixed_hyperparameters(d, bias):
    """Logistic likelihood, the same kernel and hyperparameters: the mode, the latent mean and
    variance at new points and the approximate log marginal likelihood agree to ~1e-9."""
    rng = np.random.default_rng(d)
    u = rng.random((30, d))
    success = (u.sum(1) + 0.3 * rng.standard_normal(30)) < 0.6 * d
    lengthscale, variance = np.linspace(0.3, 0.6, d), 2.5
    ref = _sklearn(u, success, lengthscale, variance, bias)
    ours = fe.condition(u, success, lengthscale, variance, bias, "logistic", "laplace")
    np.testing.assert_allclose(ours.f_hat, ref.base_estimator_.f_cached, atol=1e-7)
    test = rng.random((200, d))
    mean, var = ours.latent(test)
    ref_mean, ref_var = ref.latent_mean_and_variance(test)
    np.testing.assert_allclose(mean, ref_mean, atol=1e-7)
    np.testing.assert_allclose(var, ref_var, atol=1e-7)
    assert ours.log_marginal == pytest.approx(ref.log_marginal_likelihood_value_, abs=1e-8)
    # scikit-learn's probability approximates the logistic-Gaussian integral (Williams & Barber's
    # five probits), ours is Gauss-Hermite: close, not equal
    np.testing.assert_allclose(ours.p_success(test), ref.predict_proba(test)[:, 1], atol=1e-3)


@pytest.mark.parametrize("bias", [0.0, 1.5])
def test_log_marginal_gradient_matches_sklearn(bias):
    """GPML Algorithm 5.1 against scikit-learn's gradient of the same quantity with respect to
    the same log-hyperparameters (its order: log s2, log l_1..d, log b2)."""
    rng = np.random.default_rng(7)
    u = rng.random((25, 2))
    success = ~((u[:, 0] > 0.6) & (u[:, 1] < 0.5))
    lengthscale, variance = np.array([0.3, 0.5]), 2.0
    ref = _sklearn(u, success, lengthscale, variance, bias, fixed=False).base_estimator_
    value, grad = ref.log_marginal_likelihood(ref.kernel_.theta, eval_gradient=True)
    ours, our_grad, _ = fe.log_marginal(u, success, lengthscale, variance, bias, "logistic", True)
    assert ours == pytest.approx(value, abs=1e-8)
    reordered = np.r_[grad[1:3], grad[0], grad[3] if bias else 0.0]
    np.testing.assert_allclose(our_grad, reordered, atol=1e-7)


@pytest.mark.parametrize(
    "likelihood, inference", [("probit", "laplace"), ("logistic", "laplace"), ("probit", "ep")]
)
def test_log_marginal_gradient_against_finite_differences(likelihood, inference):
    """Laplace's gradient (GPML Algorithm 5.1) and EP's (GPML eq. 5.27) against central
    differences of the values they belong to."""
    rng = np.random.default_rng(3)
    u = rng.random((20, 2))
    success = u[:, 0] + 0.2 * rng.standard_normal(20) < 0.6
    theta = np.log([0.4, 0.25, 3.0, 1.2])

    def value(t):
        return fe.log_marginal(
            u,
            success,
            np.exp(t[:2]),
            math.exp(t[2]),
            math.exp(t[3]),
            likelihood,
            inference=inference,
        )[0]

    _, grad, _ = fe.log_marginal(
        u, success, np.exp(theta[:2]), 3.0, 1.2, likelihood, True, inference=inference
    )
    step = 1e-5
    numeric = [(value(theta + e) - value(theta - e)) / (2 * step) for e in step * np.eye(4)]
    # the approximations are converged to 1e-10 in their objectives: differences carry ~1e-5
    np.testing.assert_allclose(grad, numeric, atol=1e-4)


def test_ep_evidence_is_exact_for_one_run():
    """With one run EP matches the single site exactly, so ``Z_EP`` is ``P(y) = Phi(0) = 1/2``
    (a zero-mean latent), whatever the kernel; Laplace's is not."""
    for outcome in (0.0, 1.0):
        for variance, bias in ((0.5, 0.0), (30.0, 4.0)):
            ep = fe.log_marginal([[0.3]], [outcome], 0.2, variance, bias, inference="ep")[0]
            assert ep == pytest.approx(math.log(0.5), abs=1e-12)
    laplace = fe.log_marginal([[0.3]], [1.0], 0.2, 30.0, 4.0, inference="laplace")[0]
    assert abs(laplace - math.log(0.5)) > 0.1


@pytest.mark.parametrize("likelihood", fe.LIKELIHOODS)
def test_likelihood_derivatives(likelihood):
    """The first derivative of log p(y | f), ``W`` (minus the second) and the third against
    central differences, at latents from -30 (the probit's inverse Mills ratio is computed in
    logs there) to 30: finite everywhere, differences where they keep their digits."""
    f = np.r_[np.linspace(-30, 30, 61), np.random.default_rng(0).standard_normal(20)]
    y = np.where(np.arange(len(f)) % 2 == 0, 1.0, -1.0)
    h = 1e-5

    def log_p(x):
        return np.array(
            [
                fe.likelihood_terms(np.array([a]), np.array([b]), likelihood)[0]
                for a, b in zip(x, y, strict=True)
            ]
        )

    _, grad, W, third = fe.likelihood_terms(f, y, likelihood)
    plus, minus = (
        fe.likelihood_terms(f + h, y, likelihood),
        fe.likelihood_terms(f - h, y, likelihood),
    )
    assert np.isfinite(grad).all() and np.isfinite(W).all() and np.isfinite(third).all()
    assert (W >= 0).all()
    assert (np.abs(grad - (log_p(f + h) - log_p(f - h)) / (2 * h)) <= 1e-5 * (1 + np.abs(f))).all()
    # past |f| = 10 the differences of W lose their digits (W = r (r + z) with r + z ~ -1/z):
    # at -30 the central difference is 8% off the closed form's 2/|z|^3
    near = np.abs(f) <= 10
    np.testing.assert_allclose(-W[near], ((plus[1] - minus[1]) / (2 * h))[near], atol=1e-6)
    np.testing.assert_allclose(third[near], (-(plus[2] - minus[2]) / (2 * h))[near], atol=1e-6)


def _exact(u, success, lengthscale, variance, bias, test, half=7.0, nodes=61):
    """The exact probit classifier by brute force: the latents' posterior on a grid of their
    whitened values ``z`` (``f = chol(K) z``, prior N(0, I)), and the predictive probability
    ``E[Phi(k*' K^-1 f / sqrt(1 + v*))]`` under it. Returns it and ``log p(y | X)``."""
    y = 2.0 * success - 1.0
    Lk = linalg.cholesky(fe.kernel(u, u, lengthscale, variance, bias), lower=True)
    grid = np.linspace(-half, half, nodes)
    z = np.stack(np.meshgrid(*[grid] * len(u), indexing="ij"), -1).reshape(-1, len(u))
    log_w = special.log_ndtr(y * (z @ Lk.T)).sum(1) - 0.5 * (z * z).sum(1)
    top = log_w.max()
    w = np.exp(log_w - top)
    cell = (grid[1] - grid[0]) / math.sqrt(2 * math.pi)
    log_evidence = math.log(w.sum()) + top + len(u) * math.log(cell)
    v = linalg.solve_triangular(Lk, fe.kernel(u, test, lengthscale, variance, bias), lower=True)
    var = variance + bias - (v * v).sum(0)
    p = (w / w.sum()) @ special.ndtr((z @ v) / np.sqrt(1.0 + var))
    return p, log_evidence


@pytest.mark.parametrize(
    "u, success, variance, bias, laplace_error, ep_error",
    [
        # measured, Laplace and EP: 0.0080 and 0.0013 at s2 = 1; 0.0315 and 0.0053 at s2 = 4;
        # 0.0951 and 0.0150 at s2 = 25; two runs with a constant mean: 0.0088 and 0.0023
        ([0.2, 0.5, 0.8], [1, 0, 1], 1.0, 0.0, 0.0080, 0.0013),
        ([0.2, 0.5, 0.8], [1, 0, 1], 4.0, 0.0, 0.0315, 0.0053),
        ([0.2, 0.5, 0.8], [1, 0, 1], 25.0, 0.0, 0.0951, 0.0150),
        ([0.3, 0.6], [1, 0], 1.0, 1.0, 0.0088, 0.0023),
    ],
)
def test_against_exact_posterior_in_1d(u, success, variance, bias, laplace_error, ep_error):
    """With 2 or 3 runs the exact posterior is a grid integral. Laplace's probabilities are
    within about 0.01 of it where the latent's prior sd is 1 (a near-Gaussian posterior) and
    drift as it grows (its mode-centred Gaussian is too cautious for the skewed posteriors of
    GPML 3.9); EP's stay 4 to 7 times closer, and its evidence within 0.002 nats of the exact
    one. The errors are the measured ones to 10%."""
    u, success = np.array(u)[:, None], np.array(success, dtype=float)
    test = np.linspace(0, 1, 21)[:, None]
    exact, log_evidence = _exact(u, success, 0.3, variance, bias, test)
    for inference, expected in (("laplace", laplace_error), ("ep", ep_error)):
        model = fe.condition(u, success, 0.3, variance, bias, inference=inference)
        assert np.abs(model.p_success(test) - exact).max() == pytest.approx(expected, rel=0.1)
        if inference == "ep":
            assert model.log_marginal == pytest.approx(log_evidence, abs=2e-3)


def test_laplace_error_grows_with_the_signal():
    u, success = np.array([[0.2], [0.5], [0.8]]), np.array([1.0, 0.0, 1.0])
    test = np.linspace(0, 1, 11)[:, None]
    errors = [
        np.abs(
            fe.condition(u, success, 0.3, s2, 0.0, inference="laplace").p_success(test)
            - _exact(u, success, 0.3, s2, 0.0, test, nodes=41)[0]
        ).max()
        for s2 in (1.0, 4.0, 25.0)
    ]
    assert errors[0] < errors[1] < errors[2]


@pytest.mark.parametrize(
    "mean, var", [(0.0, 0.0), (1.3, 0.5), (-2.0, 4.0), (4.0, 60.0), (-9.0, 1e-4), (0.5, 400.0)]
)
def test_predictive_probability_integral(mean, var):
    """Probit: the closed form against adaptive quadrature of Phi(f) N(f; m, v); logistic: the
    Gauss-Hermite rule against the same quadrature of the sigmoid."""
    sd = math.sqrt(var)
    for likelihood, link in (("probit", special.ndtr), ("logistic", special.expit)):
        ours = float(fe.predictive_probability(np.array([mean]), np.array([var]), likelihood)[0])
        if var == 0.0:
            assert ours == pytest.approx(float(link(mean)), abs=1e-15)
            continue
        exact = integrate.quad(
            lambda x: link(mean + sd * x) * math.exp(-0.5 * x * x),  # noqa: B023
            -40,
            40,
            epsabs=1e-14,
            epsrel=1e-13,
            limit=500,
        )[0]
        assert ours == pytest.approx(exact / math.sqrt(2 * math.pi), abs=1e-10)


def test_failure_corner():
    u, success = _corner(60, 0)
    model = fe.fit(u, success, seed=0)
    assert (~success).sum() == 5  # all five with u2 < 0.07
    p = model.p_success(np.array([[0.9, 0.04], [0.86, 0.05], [0.2, 0.8], [0.1, 0.1], [0.5, 0.9]]))
    assert (p[:2] < 0.2).all(), p
    assert (p[2:] > 0.9).all(), p
    assert np.isfinite(model.lengthscale).all() and model.lengthscale.max() < 100


def test_separable_data_keep_finite_hyperparameters():
    """All successes on one side: the likelihood alone would send s2 to infinity; the priors
    hold the optimum inside the bounds."""
    u = np.linspace(0, 1, 30)[:, None]
    model = fe.fit(u, u[:, 0] < 0.5)
    theta = np.log(np.r_[model.lengthscale, model.variance, model.bias])
    _, _, bounds = fe._prior("probit", 1)
    for value, (lo, hi) in zip(theta, bounds, strict=True):
        assert lo + 0.1 < value < hi - 0.1
    p = model.p_success(np.array([[0.1], [0.9]]))
    assert p[0] > 0.95 and p[1] < 0.05


def test_no_failure_is_no_model_and_failures_only_a_constant():
    u = np.random.default_rng(0).random((10, 2))
    assert fe.fit(u, np.ones(10)) is None
    assert fe.fit(np.empty((0, 2)), np.empty(0)) is None
    model = fe.fit(u, np.zeros(10))
    assert isinstance(model, fe.Constant)
    assert model.p_success(u).tolist() == [1 / 12] * 10
    assert model.p_success(np.empty((0, 2))).shape == (0,)
    assert fe.from_dict(json.loads(json.dumps(model.to_dict()))) == model


@pytest.mark.parametrize(
    "u, success",
    [
        ([[0.5, 0.5]], [0]),  # one failed run
        ([[0.5, 0.5], [0.5, 0.5]], [1, 0]),  # one point, both outcomes
        ([[0.1, 0.1], [0.9, 0.9]], [1, 0]),
        ([[0.3, 0.3]] * 5 + [[0.3, 0.3]] * 3 + [[0.6, 0.1]], [1] * 5 + [0] * 3 + [1]),  # duplicates
        (np.random.default_rng(4).random((40, 3)).tolist(), [1] * 39 + [0]),
        (np.random.default_rng(5).random((40, 1)).tolist(), [0] * 39 + [1]),
    ],
)
def test_degenerate_data_give_numbers(u, success):
    model = fe.fit(np.array(u), np.array(success))
    test = np.random.default_rng(0).random((50, len(u[0])))
    p = model.p_success(test)
    mean, var = model.latent(test)
    assert np.isfinite(p).all() and np.isfinite(mean).all() and np.isfinite(var).all()
    assert ((p > 0) & (p < 1)).all() and (var >= 0).all()


@pytest.mark.parametrize("inference", fe.INFERENCES)
def test_round_trip_and_determinism(monkeypatch, inference):
    u, success = _corner(60, 1)
    model = fe.fit(u, success, seed=3, inference=inference)
    again = fe.fit(u, success, seed=3, inference=inference)
    stored = json.loads(json.dumps(model.to_dict()))
    loaded = fe.from_dict(stored)
    candidates = np.random.default_rng(2).random((12_345, 2))
    p = model.p_success(candidates)
    assert np.array_equal(loaded.p_success(candidates), p)
    assert np.array_equal(again.p_success(candidates), p)
    assert np.array_equal(loaded.L, model.L) and np.array_equal(loaded.alpha, model.alpha)
    # chunks of 7 candidates give what one chunk gives
    monkeypatch.setattr(classifier, "CHUNK_ELEMENTS", 7 * len(u))
    np.testing.assert_allclose(model.p_success(candidates[:500]), p[:500], rtol=0, atol=1e-13)


def test_bad_input_is_a_value_error():
    with pytest.raises(ValueError, match="finite"):
        fe.fit(np.array([[0.1], [np.nan]]), np.array([1, 0]))
    with pytest.raises(ValueError, match="outcomes"):
        fe.fit(np.array([[0.1], [0.2]]), np.array([1]))
    with pytest.raises(ValueError, match="likelihood"):
        fe.predictive_probability(np.zeros(1), np.zeros(1), "cauchit")


def _one_failure(d: int, n: int, seed: int):
    """``n`` uniform successes outside the corner ``u > 0.8`` of the unit cube, and one run
    failed at ``0.95`` in every input."""
    u = np.random.default_rng(seed).random((n, d))
    u = u[~np.all(u > 0.8, axis=1)]
    return np.r_[u, np.full((1, d), 0.95)], np.r_[np.ones(len(u)), 0.0]


def test_one_failure_speaks_for_its_neighbourhood():
    """A simulator's outcome is a function of its inputs: at the point where a run failed, the
    model expects another run there to fail (P(success) 0.16 to 0.21 in these four cases), and
    a point 0.05 away in every input (one step of a 21-point grid) is about an even chance or
    less (0.29 to 0.52, 0.40 on average). With the latent's prior sd at 2 and the regression's wide
    lengthscale prior the model read a lone failure as chance: 0.47 to 0.59 at the failed point
    itself, 0.59 to 0.73 next to it (0.64 on average)."""
    at, next_to = [], []
    for d, n, seed in [(2, 20, 0), (2, 40, 1), (4, 20, 2), (4, 40, 3)]:
        u, success = _one_failure(d, n, seed)
        model = fe.fit(u, success, seed=0)
        p = model.p_success(np.array([np.full(d, 0.95), np.full(d, 0.9), np.full(d, 0.3)]))
        at.append(p[0])
        next_to.append(p[1])
        assert p[2] > 0.95, p  # far from the failure, among the successes: unchanged
    assert max(at) < 0.3, at
    assert max(next_to) < 0.58 and np.mean(next_to) < 0.5, next_to


def _one_failure_of_a_choice(seed: int, others_at_the_failure: bool):
    """A float in the unit interval and a choice of three values (one-hot): 8 uniform successes
    in ``[0, 0.7]`` per value, one run failed at ``(0.95, first value)``, and with
    ``others_at_the_failure`` three successes at the second value by it (0.85, 0.95, 1)."""
    rng = np.random.default_rng(seed)
    rows = [[a, *np.eye(3)[v]] for v in range(3) for a in rng.random(8) * 0.7]
    if others_at_the_failure:
        rows += [[a, 0.0, 1.0, 0.0] for a in (0.85, 0.95, 1.0)]
    rows.append([0.95, 1.0, 0.0, 0.0])
    return np.array(rows), np.r_[np.ones(len(rows) - 1), 0.0]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_failure_at_one_value_of_a_choice_speaks_for_the_others(seed):
    """A choice's one-hot lengthscales have a prior of their own (LogNormal(log 4, 0.5)): a
    run failed at one value makes the same point at the other values doubtful (P(success) 0.27
    to 0.31 in these cases; 0.87 to 0.92 with the numeric inputs' prior), until runs at another
    value say otherwise (0.95 there with three successes by the failure), and the successes far
    from the failure are untouched."""
    one_hot = np.array([False, True, True, True])
    at = np.array([[0.95, 1, 0, 0], [0.95, 0, 1, 0], [0.95, 0, 0, 1], [0.3, 0, 1, 0]])
    u, success = _one_failure_of_a_choice(seed, others_at_the_failure=False)
    numeric = fe.fit(u, success, seed=0).p_success(at)
    p = fe.fit(u, success, seed=0, choice=one_hot).p_success(at)
    assert p[0] < 0.2 and p[3] > 0.99, p
    assert max(p[1:3]) < 0.4 < 0.7 < min(numeric[1:3]), (p, numeric)
    u, success = _one_failure_of_a_choice(seed, others_at_the_failure=True)
    p = fe.fit(u, success, seed=0, choice=one_hot).p_success(at)
    assert p[0] < 0.3 and p[1] > 0.9 and p[3] > 0.99, p
