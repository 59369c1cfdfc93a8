"""How far a posterior's chains have converged (:mod:`worker.convergence`): bulk R-hat against
its formula (Vehtari et al. 2021) and ArviZ, bulk ESS against ArviZ's, and the sampling target:
read from a campaign's settings, shared among chain groups, met, and the draws still to run."""

import math

import arviz as az
import numpy as np
import pytest
from scipy import stats

from fbgp_al.worker.convergence import Target, convergence


def _ar(chains: int, draws: int, phi: float, seed: int, offset=0.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.zeros((chains, draws, 2))
    for t in range(1, draws):
        x[:, t] = phi * x[:, t - 1] + rng.standard_normal((chains, 2))
    return x + np.asarray(offset).reshape(-1, 1, 1)


def _bulk_rhat(x: np.ndarray) -> float:
    """Split the chains, rank-normalize all draws, and compare the variances."""
    half = x.shape[1] // 2
    split = np.concatenate([x[:, :half], x[:, half : 2 * half]])
    z = stats.norm.ppf((stats.rankdata(split).reshape(split.shape) - 0.375) / (split.size + 0.25))
    n = z.shape[1]
    within = z.var(1, ddof=1).mean()
    between = n * z.mean(1).var(ddof=1)
    return math.sqrt(((n - 1) / n * within + between / n) / within)


@pytest.mark.parametrize(
    ("phi", "offset"), [(0.0, 0.0), (0.7, 0.0), (0.7, [0, 0, 0, 2.0]), (0.95, [0, 1, 0, 1])]
)
def test_bulk_rhat_and_ess_are_the_formula_s_and_arviz_s(phi, offset):
    theta = _ar(4, 400, phi, seed=1, offset=offset)
    rhat, ess = convergence(theta)
    assert list(rhat) == list(ess) == ["lengthscale_0", "noise"]
    for j, name in enumerate(rhat):
        x = theta[:, :, j]
        assert rhat[name] == pytest.approx(_bulk_rhat(x), abs=1e-5)
        reference = float(az.ess(x, method="bulk"))  # its estimator differs a little
        assert ess[name] == pytest.approx(reference, rel=0.05 if reference > 100 else 0.2)
    if offset != 0.0:
        assert max(rhat.values()) > 1.02


def test_too_few_or_equal_draws_have_no_estimate():
    for theta in (np.ones((2, 50, 2)), _ar(2, 3, 0.5, seed=0)):
        rhat, ess = convergence(theta)
        assert all(math.isnan(v) for v in (*rhat.values(), *ess.values()))


def test_the_target_a_campaign_asks_for():
    assert Target.of({"chains": 4}) is None
    assert Target.of({"draws": 200}) == Target(200, 1.01, 1000)
    assert Target.of({"draws": 50, "target_rhat": None, "max_samples": 300}) == Target(
        50, None, 300
    )
    target = Target(101)
    assert target.share(1, 4).draws == 26 and target.share(4, 4) == target
    assert target.met({"max_rhat": 1.005, "min_ess_bulk": 101})
    assert not target.met({"max_rhat": 1.02, "min_ess_bulk": 500})
    assert Target(101, rhat=None).met({"max_rhat": 1.5, "min_ess_bulk": 101})
    assert not target.met({"max_rhat": 1.0, "min_ess_bulk": 100})


def test_the_draws_still_to_run_are_projected_and_bounded():
    mixing = _ar(4, 200, 0.9, seed=2)
    ess = min(convergence(mixing)[1].values())
    # met (few draws wanted) or at the cap: none more
    assert Target(max(1, int(ess) - 1), rhat=None).more_of(mixing) == 0
    assert Target(10**6, max_samples=200).more_of(mixing) == 0
    # projected from the ESS per draw, 10% over, at least a quarter and at most as many again
    wanted = int(2 * ess)
    need = 200 * wanted / ess * 1.1
    assert Target(wanted, rhat=None).more_of(mixing) == int(min(max(need - 200, 50), 200))
    assert Target(10**6, rhat=None).more_of(mixing) == 200
    assert Target(10**6, rhat=None, max_samples=230).more_of(mixing) == 30
