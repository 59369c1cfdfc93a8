"""The failure model: a GP classifier of a run's success (1) against its failure (0) over the
unit-cube inputs ``u`` that the regression GP sees, in plain numpy/scipy, float64.

    f ~ GP(0, k),    k(u, u') = s2 exp(-sum_j (u_j - u'_j)^2 / (2 l_j^2)) + b2,
    P(success | f) = Phi(f)   (probit; logistic: 1 / (1 + exp(-f)))

``b2`` is the variance of a constant mean ``c ~ N(0, b2)`` integrated out: far from every run the
latent reverts to the campaign's rate of success, where a zero mean would revert to P = 1/2 and
halve the weight of every unexplored point (on the measured problems the constant mean also
had the lower held-out log loss, docs/benchmarks.md, "Failure model: Laplace against a fully
Bayesian classifier"). It stays a kernel, so scikit-learn's ``ConstantKernel * RBF +
ConstantKernel`` is the same model.

The posterior of the latents is expectation propagation's (GPML Algorithm 3.5, sequential
sweeps, the probit site moments in closed form; predictions by Algorithm 3.6); the
hyperparameters ``(log l, log s2, log b2)`` maximize Laplace's approximate log marginal
likelihood (Newton for the mode in the stable form ``B = I + W^1/2 K W^1/2``, Algorithm 3.1, the
step halved while the objective does not rise; gradient by Algorithm 5.1) plus Normal
log-priors, which keep them finite when the classes are separable (the likelihood alone then
pushes ``s2`` to infinity) and say what a simulator's failures are: a function of its inputs
(the latent's sd centred on 10 against the probit's unit noise, so that one failure makes
another run at its point unlikely to succeed) over a region (lengthscales LogNormal(log 0.3,
0.75) in the unit cube, so that a failure speaks for its neighbourhood; :mod:`.evidence`). Why this
mix, measured (docs/benchmarks.md, "Failure model: Laplace
against a fully Bayesian classifier", :mod:`clients.reproduction.feasibility_bench`): a
simulator's failures are deterministic, so its classes are separable, where Laplace's Gaussian at
the mode is far too cautious (held-out log loss 1.7x EP's, 1.45x a fully Bayesian classifier's),
while EP matched or beat the fully Bayesian one at a hundredth of its time; EP's own evidence
picked hyperparameters no better than Laplace's, and one evaluation of it with its gradient
costs 25x Laplace's (n = 400: 2.0 s against 0.08 s), so Laplace fits them and EP conditions
once. Both approximations are available (``inference``,
``evidence``). The likelihood is probit: its predictive probability is exact in closed form,
``Phi(m / sqrt(1 + v))``, and EP's site moments are closed-form; logistic (scikit-learn's, for
the independent check, Laplace only) integrates the predictive by the trapezoid rule.

A fitted :class:`Classifier` keeps the training inputs and classes, the hyperparameters and the
mode (Laplace) or the sites (EP); ``sqrt(W)``, ``alpha`` and the Cholesky factor of ``B`` follow
from them and are recomputed (the same arithmetic, so the same bits) when a stored model is
loaded. With no failure
:func:`fit` returns None (a campaign without failures pays nothing); with failures only, a
:class:`Constant` probability of success, the Beta(1, 1) posterior mean ``1 / (n + 2)``: no run
has shown where the simulator answers, so no place is preferred.

The package, by concern: :mod:`.likelihoods` (the kernel, the likelihoods and the predictive
probability), :mod:`.laplace` (the mode), :mod:`.ep` (the sites), :mod:`.evidence` (the
hyperparameters), :mod:`.classifier` (the fitted model, stored as JSON, and :func:`fit`) and
:mod:`.campaign` (a campaign's failure model: its runs, the bound on its cost, the weights of
the acquisition). This face names what the rest of the product uses.
"""

from fbgp_al.worker.feasibility.classifier import Classifier, Constant, condition, fit, from_dict
from fbgp_al.worker.feasibility.ep import (
    EP_MAX_TAU,
    EP_SWEEPS,
    EP_TOL,
    Sites,
    expectation_propagation,
)
from fbgp_al.worker.feasibility.evidence import (
    EVIDENCE,
    RESTARTS,
    _prior,
    hyperparameters,
    log_marginal,
    log_prior,
)
from fbgp_al.worker.feasibility.laplace import Mode, posterior_mode
from fbgp_al.worker.feasibility.likelihoods import (
    INFERENCE,
    INFERENCES,
    JITTERS,
    LIKELIHOOD,
    LIKELIHOODS,
    kernel,
    likelihood_terms,
    predictive_probability,
)

__all__ = [
    "EP_MAX_TAU",
    "EP_SWEEPS",
    "EP_TOL",
    "EVIDENCE",
    "INFERENCE",
    "INFERENCES",
    "JITTERS",
    "LIKELIHOOD",
    "LIKELIHOODS",
    "RESTARTS",
    "Classifier",
    "Constant",
    "Mode",
    "Sites",
    "_prior",
    "condition",
    "expectation_propagation",
    "fit",
    "from_dict",
    "hyperparameters",
    "kernel",
    "likelihood_terms",
    "log_marginal",
    "log_prior",
    "posterior_mode",
    "predictive_probability",
]
