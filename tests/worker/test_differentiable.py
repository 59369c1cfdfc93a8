"""The differentiable acquisitions against a pool's scoring (the same values at the same points,
alone, with points pending, with several outputs and known noise), their gradients against
finite differences, and BALD against BoTorch's ``qBayesianActiveLearningByDisagreement`` on the
same draws (GPyTorch's predictions, BoTorch's Monte Carlo entropies).

B-QBC, QB-MGP, B-ALM and ALM against botorch_community's ``qBayesianQueryByComittee`` and
``qBayesianVarianceReduction`` on the same draws, one point at a time (``q = 1``), to rounding:
B-QBC is the former (the population variance of the draws' means), QB-MGP the latter (the
mixture's variance of y, noise included), B-ALM the latter less the former, ALM the latter on the
mode alone. They do not coincide with points pending (theirs the determinant of the batch's joint
covariance, ours each point's variance with the pending ones as fantasies), and bald-code (the
paper's code's shortcut) has no counterpart there."""

import pytest
import torch

from fbgp_al.worker import acquisition
from fbgp_al.worker.acquisition import batch_scores, evaluate
from fbgp_al.worker.differentiable import DIFFERENTIABLE, Acquisition, mixture_entropy
from fbgp_al.worker.mcmc import Posterior
from fbgp_al.worker.scoring import Output, combined_scores

D = torch.float64
NAMES = sorted(DIFFERENTIABLE - {"bald-std"})  # bald-std is bald-code's other name


def _posterior(g, draws=24, dim=3, repeat=True):
    lengthscale = torch.exp(torch.randn(draws, dim, generator=g, dtype=D) * 0.4 - 1.0)
    noise = torch.exp(torch.randn(draws, generator=g, dtype=D) - 4.0)
    if repeat:  # a Laplace mixture's draws repeat: each distinct one is factored once
        lengthscale[1::3], noise[1::3] = lengthscale[0::3], noise[0::3]
    return Posterior(
        lengthscale=lengthscale,
        noise=noise,
        chains=4,
        mode_lengthscale=torch.tensor([0.3, 0.4, 0.5], dtype=D),
        mode_noise=0.02,
    )


@pytest.fixture(scope="module")
def setting():
    g = torch.Generator().manual_seed(0)
    u = torch.rand(20, 3, generator=g, dtype=D)
    z = torch.sin(4 * u).sum(1) + u[:, 0] * u[:, 1]
    z = (z - z.mean()) / z.std()
    candidates = torch.rand(300, 3, generator=g, dtype=D)
    return _posterior(g), u, z, candidates


@pytest.mark.parametrize("name", NAMES)
def test_the_values_are_the_pool_scorings_at_pool_points(setting, name):
    post, u, z, cand = setting
    ours = Acquisition(name, [(1.0, post, u, z, None)])(cand)
    theirs = evaluate(name, post, u, z, cand)
    torch.testing.assert_close(ours, theirs, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_pending_points_are_fantasies_as_in_a_batchs_scoring(setting, name):
    post, u, z, cand = setting
    pending = cand[:4]
    parts = [(1.0, post, u, z, None)]
    ours = Acquisition(name, parts, pending)(cand)
    torch.testing.assert_close(ours, batch_scores(name, parts, cand, pending), rtol=1e-10, atol=0)
    alone = evaluate(name, post, u, z, cand)
    if name in ("alm", "b-alm", "qb-mgp"):  # fantasies lower the variances near them
        assert (ours[:4] < alone[:4] - 1e-6).all()
    # one more pending point, as a batch's next pick: the same as pending from the start
    more = Acquisition(name, parts, pending[:2]).with_pending(pending[2:])
    torch.testing.assert_close(more(cand), ours, rtol=1e-12, atol=0)


@pytest.mark.parametrize("name", ["qb-mgp", "bald", "alm"])
def test_several_outputs_with_known_noise_are_the_combined_scores(setting, name):
    post, u, z, cand = setting
    g = torch.Generator().manual_seed(5)
    other = _posterior(g, draws=18, repeat=False)
    known = 0.01 + 0.05 * torch.rand(len(z), generator=g, dtype=D)
    outputs = [Output(2.0, post, u, z, known, 0), Output(0.5, other, u, -(z**2), None, 1)]
    ours = Acquisition(name, [(o.weight, o.post, o.u, o.z, o.noise) for o in outputs])(cand)
    theirs = combined_scores(name, [(o.weight, o.post, o) for o in outputs], cand)
    torch.testing.assert_close(ours, theirs, rtol=1e-10, atol=0)


@pytest.mark.parametrize("name", NAMES)
def test_gradients_are_finite_differences(setting, name):
    post, u, z, _ = setting
    g = torch.Generator().manual_seed(3)
    x = torch.rand(6, 3, generator=g, dtype=D).requires_grad_(True)
    acquisition = Acquisition(name, [(1.0, post, u, z, None)], u[:1] + 0.01)
    assert torch.autograd.gradcheck(acquisition, (x,), eps=1e-6, atol=1e-6, rtol=1e-4)
    values, grad = acquisition.value_and_grad(x)
    torch.testing.assert_close(values, acquisition(x).detach())
    assert grad.shape == x.shape and grad.abs().max() > 0


def test_the_mixture_entropy_is_the_pool_rule_and_climbs_with_spread():
    g = torch.Generator().manual_seed(4)
    mean = torch.randn(10, 50, generator=g, dtype=D)
    var = torch.exp(torch.randn(10, 50, generator=g, dtype=D))
    from fbgp_al.worker.acquisition import mixture_entropy as pool_rule

    torch.testing.assert_close(mixture_entropy(mean, var), pool_rule(mean, var), rtol=1e-12, atol=0)
    spread = mean.clone().requires_grad_(True)
    # pulling the components apart raises the mixture's entropy
    (grad,) = torch.autograd.grad(mixture_entropy(spread * 1.0, var).sum(), spread)
    assert ((grad * (mean - mean.mean(0))).sum(0) > 0).all()


def test_random_has_no_gradient(setting):
    post, u, z, _ = setting
    with pytest.raises(ValueError, match="no gradient"):
        Acquisition("random", [(1.0, post, u, z, None)])


def _ensemble(post, u, z):
    """BoTorch's view of the draws: an ensemble (a fully Bayesian model) of GPyTorch's exact GPs
    with the draws' hyperparameters, its posterior a Gaussian mixture as a SAAS model's is, of y
    (each draw's own noise added) when ``observation_noise``, of f without. One point a t-batch
    (``q = 1``): the covariance across a batch's points is not formed."""
    import gpytorch
    from botorch.models.model import Model
    from botorch.posteriors.fully_bayesian import GaussianMixturePosterior
    from gpytorch.distributions import MultivariateNormal

    from tests.worker.test_gp import _gpytorch

    gps = [_gpytorch(u, z, ls, s2) for ls, s2 in zip(post.lengthscale, post.noise, strict=True)]

    class Ensemble(Model):
        _is_fully_bayesian = True
        _is_ensemble = True

        @property
        def num_outputs(self):
            return 1

        @property
        def batch_shape(self):
            return torch.Size([len(gps)])

        def posterior(self, X, output_indices=None, observation_noise=False, **kwargs):
            assert X.shape[-2] == 1 and isinstance(observation_noise, bool)
            flat = X.reshape(-1, X.shape[-1])
            mean, var = [], []
            for model, likelihood in gps:
                with (
                    torch.no_grad(),
                    gpytorch.settings.fast_pred_var(False),
                    gpytorch.settings.skip_posterior_variances(False),
                ):
                    f = model(flat)
                    pred = likelihood(f) if observation_noise else f
                mean.append(pred.mean)
                var.append(pred.variance)
            shape = (*X.shape[:-2], len(gps), 1)  # b x M x q
            mean, var = torch.stack(mean).T.reshape(shape), torch.stack(var).T.reshape(shape)
            return GaussianMixturePosterior(MultivariateNormal(mean, torch.diag_embed(var)))

    return Ensemble()


def test_bald_is_botorchs_on_the_same_draws(setting):
    """BoTorch's qBALD (a Monte Carlo estimate of the mixture's entropy, 8,192 quasi-random
    samples) on an ensemble of GPyTorch's exact GPs with the same draws. BoTorch is a test
    dependency only (skipped where it is not installed)."""
    pytest.importorskip("botorch")
    from botorch.acquisition.bayesian_active_learning import (
        qBayesianActiveLearningByDisagreement,
    )
    from botorch.sampling.normal import SobolQMCNormalSampler

    post, u, z, cand = setting
    post = post.spread(8)
    cand = cand[:12]
    sampler = SobolQMCNormalSampler(sample_shape=torch.Size([8192]), seed=0)
    bald = qBayesianActiveLearningByDisagreement(_ensemble(post, u, z), sampler=sampler)
    theirs = bald(cand[:, None, :])
    ours = Acquisition("bald", [(1.0, post, u, z, None)])(cand).detach()
    torch.testing.assert_close(ours, theirs.detach(), rtol=0, atol=5e-4)  # 4e-5 here
    # and they rank the candidates alike
    assert int(torch.argmax(ours)) == int(torch.argmax(theirs))


@pytest.mark.parametrize("name", ["b-qbc", "qb-mgp", "b-alm", "alm"])
def test_the_variances_are_botorch_communitys_on_the_same_draws(setting, name):
    """botorch_community's qBayesianQueryByComittee (the mean over the draws of each mean's
    squared distance to the mixture's mean: B-QBC, a population variance) and
    qBayesianVarianceReduction (the mixture's covariance of y, noise included, its determinant:
    for one point its variance, QB-MGP) on the same 24 draws at 300 candidates; B-ALM is their
    difference (the law of total variance), ALM the variance reduction of the mode alone. Both
    are exact (no Monte Carlo): the values agree to rounding (2e-13 relative here), and the
    candidates' whole order is the same."""
    pytest.importorskip("botorch_community")
    from botorch_community.acquisition.bayesian_active_learning import (
        qBayesianQueryByComittee,
        qBayesianVarianceReduction,
    )

    post, u, z, cand = setting
    ensemble = _ensemble(post.mode() if name == "alm" else post, u, z)
    qbc = qBayesianQueryByComittee(ensemble)(cand[:, None, :]).detach()
    vr = qBayesianVarianceReduction(ensemble)(cand[:, None, :]).detach()
    theirs = {"b-qbc": qbc, "qb-mgp": vr, "b-alm": vr - qbc, "alm": vr}[name]
    ours = Acquisition(name, [(1.0, post, u, z, None)])(cand).detach()
    torch.testing.assert_close(ours, theirs, rtol=1e-10, atol=0)
    assert torch.equal(ours.argsort(), theirs.argsort())


@pytest.mark.parametrize("name", ["qb-mgp", "bald"])
def test_the_accuracy_estimates_factors_give_the_acquisition_its_own_factors_give(
    setting, monkeypatch, name
):
    """The Cholesky factors a refit's accuracy estimates keep (in groups of 4 distinct draws,
    the draws repeating) climbed on: the values and gradients of the acquisition that factors
    the draws itself, and the estimates of a summary that keeps none."""
    from fbgp_al.worker import accuracy

    post, u, z, cand = setting
    monkeypatch.setattr(acquisition, "FIT_ELEMENTS", 4 * len(z) ** 2)
    points = cand[:50]
    kept: list = []
    estimates = accuracy.summary(u, z, post.lengthscale, post.noise, points, 1.0, keep=kept)
    assert len(kept) == 4  # 16 distinct draws in groups of 4
    factors = [tuple(torch.cat(f) for f in zip(*kept, strict=True))]
    shared = Acquisition(name, [(1.0, post, u, z, None)], factors=factors)
    own = Acquisition(name, [(1.0, post, u, z, None)])
    for a, b in zip(shared.value_and_grad(cand[:40]), own.value_and_grad(cand[:40]), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)
    alone = accuracy.summary(u, z, post.lengthscale, post.noise, points, 1.0)
    assert {k: v for k, v in estimates.items() if k != "seconds"} == {
        k: v for k, v in alone.items() if k != "seconds"
    }
    with pytest.raises(ValueError, match="one per distinct draw"):
        Acquisition(name, [(1.0, post, u, z, None)], factors=[kept[0]])


def test_draws_factored_in_groups_are_the_draws_factored_at_once(setting, monkeypatch):
    """Past ``FIT_ELEMENTS`` the draws are factored a group at a time (here 3 a group, the
    16 distinct draws in 6 groups): the same factors, bit for bit, and the same predictions."""
    from fbgp_al.worker import differentiable

    post, u, z, cand = setting
    at_once = differentiable.Draws(u, z, post.lengthscale, post.noise)
    monkeypatch.setattr(acquisition, "FIT_ELEMENTS", 3 * len(z) ** 2)
    grouped = differentiable.Draws(u, z, post.lengthscale, post.noise)
    assert torch.equal(grouped.chol, at_once.chol) and torch.equal(grouped.alpha, at_once.alpha)
    for a, b in zip(grouped.predict(cand[:9]), at_once.predict(cand[:9]), strict=True):
        assert torch.equal(a, b)
