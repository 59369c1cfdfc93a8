"""Warm starts (:mod:`worker.warm_start`): which previous posteriors a refit's chains may start
from (they fit these chains and parameters, are finite, and mixed, or were a Laplace mixture's),
the effective draws a warm start must show, and when its draws are redone cold."""

import numpy as np
import pytest

from fbgp_al.worker import nuts
from fbgp_al.worker.convergence import Target
from fbgp_al.worker.potential import GPPotential
from fbgp_al.worker.warm_start import (
    WARM_MAX_RHAT,
    WARM_MIN_ESS,
    judge_warm_start,
    usable,
    warm_min_ess,
)

rng = np.random.default_rng(0)
U = rng.random((10, 2))
POTENTIAL = GPPotential(U, np.sin(5 * U[:, 0]) + U[:, 1], noise_floor=1e-6)  # 3 parameters
WARM = {
    "last": np.zeros((4, 3)).tolist(),
    "step_size": [0.3] * 4,
    "inverse_mass": np.ones((4, 3)).tolist(),
    "max_rhat": 1.01,
}


@pytest.mark.parametrize(
    ("change", "ok"),
    [
        ({}, True),
        ({"inverse_mass": np.tile(np.eye(3), (4, 1, 1)).tolist()}, True),  # a dense metric
        ({"max_rhat": WARM_MAX_RHAT + 1e-3}, False),  # it did not mix
        ({"max_rhat": None}, False),
        ({"max_rhat": None, "source": "laplace"}, True),  # no chain drew it: no R-hat to judge
        ({"last": np.zeros((4, 2)).tolist()}, False),  # other parameters
        ({"last": np.zeros((2, 3)).tolist()}, False),  # fewer chains than these
        ({"step_size": [0.3] * 3}, False),
        ({"inverse_mass": np.ones((4, 2)).tolist()}, False),
        ({"last": [[0.0] * 3] * 3 + [[np.inf, 0.0, 0.0]]}, False),  # another chain's not finite
    ],
)
def test_a_warm_start_is_usable_when_it_fits_and_mixed(change, ok):
    warm = {**WARM, **change}
    if warm.get("max_rhat") is None:
        warm.pop("max_rhat")
    assert usable(warm, np.arange(4), POTENTIAL) is ok
    assert not usable(None, np.arange(4), POTENTIAL)
    assert not usable({"last": WARM["last"]}, np.arange(4), POTENTIAL)


def _draws(theta: np.ndarray, divergences: int = 0) -> nuts.Draws:
    c, s, _ = theta.shape
    diverging = np.zeros((c, s), dtype=bool)
    diverging.flat[:divergences] = True
    return nuts.Draws(
        theta=theta,
        accept_stat=np.full((c, s), 0.8),
        diverging=diverging,
        tree_depth=np.full((c, s), 3),
        n_leapfrog=np.full((c, s), 7),
        step_size=np.full(c, 0.3),
        inverse_mass=np.ones((c, 3)),
        warmup_divergences=np.zeros(c, dtype=int),
    )


def test_the_effective_draws_a_warm_start_must_show():
    assert warm_min_ess(_draws(np.zeros((4, 500, 3)))) == WARM_MIN_ESS  # the paper's 1,500+
    assert warm_min_ess(_draws(np.zeros((2, 50, 3)))) == pytest.approx(10.0)  # a tenth
    assert warm_min_ess(_draws(np.zeros((2, 50, 3))), Target(40)) == 40.0
    assert warm_min_ess(_draws(np.zeros((2, 50, 3))), Target(400)) == WARM_MIN_ESS


def test_warm_draws_that_did_not_mix_are_redone_cold():
    mixed = np.random.default_rng(1).standard_normal((4, 300, 3))
    assert judge_warm_start(_draws(mixed), "warm", WARM) == ("warm", False)
    what, redo = judge_warm_start(_draws(mixed, divergences=1), "warm", WARM)
    assert redo and what.startswith("redone cold") and "1 divergences" in what
    apart = mixed + np.array([0.0, 0.0, 0.0, 3.0])[:, None, None]  # a chain elsewhere
    assert judge_warm_start(_draws(apart), "warm", WARM)[1]
    # its own target asks for more effective draws than it shows
    assert judge_warm_start(_draws(mixed[:, :10]), "warm", WARM, Target(80))[1]  # ESS <= 64
    assert judge_warm_start(_draws(mixed), "cold", WARM) == (
        "cold (the previous posterior did not mix or does not fit)",
        False,
    )
    assert judge_warm_start(_draws(mixed), "cold", None) == ("cold", False)
