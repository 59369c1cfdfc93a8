"""How a model's hyperparameters were drawn, in one line (:mod:`worker.vocabulary.sampler`)."""

from fbgp_al.worker.vocabulary.sampler import sampler_line


def test_a_nuts_refit_s_line():
    d = {"max_rhat": 1.01234, "min_ess_bulk": 186.6, "divergences": 2}
    assert sampler_line(d) == "NUTS: R-hat 1.012, bulk ESS 187, 2 divergences"
    assert sampler_line({}) == "NUTS: 0 divergences"  # no estimate (too few draws)
    tried = {**d, "laplace": {"khat": 0.812, "khat_limit": 0.54}}
    assert sampler_line(tried).endswith("(the Laplace mixture's Pareto k 0.81 was above 0.54)")


def test_a_laplace_mixture_s_line():
    d = {"method": "laplace", "khat": 0.3149, "khat_limit": 0.54, "importance_ess": 95.4}
    assert sampler_line(d) == (
        "Laplace mixture: Pareto k 0.31 (at most 0.54), importance ESS 95, 1 mode"
    )
    assert sampler_line({**d, "modes": 3}).endswith("3 modes")
