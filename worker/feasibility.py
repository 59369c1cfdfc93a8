"""The failure model: a GP classifier of a run's success (1) against its failure (0) over the
unit-cube inputs ``u`` that the regression GP sees (issue 38), in plain numpy/scipy, float64.

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
step halved while the objective does not rise; gradient by Algorithm 5.1) plus weak Normal
log-priors, which keep them finite when the classes are separable (the likelihood alone then
pushes ``s2`` to infinity). Why this mix, measured (docs/benchmarks.md, "Failure model: Laplace
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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import linalg, optimize, special

LIKELIHOODS = ("probit", "logistic")
LIKELIHOOD = "probit"
INFERENCES = ("laplace", "ep")
INFERENCE = "ep"  # the posterior that predicts
EVIDENCE = "laplace"  # the approximate marginal likelihood that the hyperparameters maximize
# Jitter added to B's diagonal when its Cholesky fails, as worker.gp.JITTERS (B >= I, so only a
# non-finite kernel can need it).
JITTERS = (1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2)
# Newton for the mode: stop when the objective rises by less than this (as scikit-learn)
NEWTON_TOL = 1e-10
NEWTON_MAX = 100
HALVINGS = 30
# EP: stop when log Z_EP moves by less than this after a sweep; sites' precisions capped
EP_TOL = 1e-10
EP_SWEEPS = 100
EP_MAX_TAU = 1e10
# Log-priors and bounds of the hyperparameters (natural logs; inputs in the unit cube). The
# lengthscales' prior is the regression GP's, LogNormal(0, sqrt 3); the signal and the constant
# mean's variances are centred on a latent sd of 2 (probit: P from 0.02 to 0.98 within one sd),
# scaled by 1.702^2 for the logistic link, whose latent is ~1.7x as wide.
LOG_LENGTHSCALE_PRIOR = (0.0, math.sqrt(3.0))
LOG_VARIANCE_PRIOR = (math.log(4.0), 1.5)
LOG_BIAS_PRIOR = (math.log(4.0), 1.5)
LOGISTIC_SCALE = 2 * math.log(1.702)
LOG_LENGTHSCALE_BOUNDS = (math.log(1e-2), math.log(1e2))
LOG_VARIANCE_BOUNDS = (math.log(1e-3), math.log(1e4))
RESTARTS = 3  # L-BFGS-B starts: the prior's centre, then draws from the prior (seeded)
# Candidates predicted at once: the n x chunk cross-kernel and its solve stay ~32 MB
CHUNK_ELEMENTS = 1 << 22
LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _array(values, ndim: int) -> np.ndarray:
    out = np.array(values, dtype=np.float64)
    return out.reshape(len(out), -1) if ndim == 2 and out.ndim == 1 else out


def kernel(u1: np.ndarray, u2: np.ndarray, lengthscale, variance: float, bias: float = 0.0
           ) -> np.ndarray:  # fmt: skip
    """``s2 exp(-|(u1 - u2) / l|^2 / 2) + b2`` between ``u1`` (``n x d``) and ``u2`` (``m x d``):
    ``n x m``; squared distances clamped at zero against rounding."""
    a, b = u1 / lengthscale, u2 / lengthscale
    sq = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * (a @ b.T)
    return variance * np.exp(-0.5 * np.maximum(sq, 0.0)) + bias


def likelihood_terms(f: np.ndarray, y: np.ndarray, likelihood: str = LIKELIHOOD):
    """For classes ``y`` in {-1, +1} (+1: success) at latents ``f``: ``log p(y | f)`` summed, and
    per point its first derivative, ``W = -`` its second and its third (GPML 3.4, 5.5.1)."""
    if likelihood == "probit":
        z = y * f
        log_cdf = special.log_ndtr(z)
        r = np.exp(-0.5 * z * z - LOG_SQRT_2PI - log_cdf)  # N(z) / Phi(z), stable for z << 0
        grad = y * r
        W = np.maximum(r * (r + z), 0.0)
        third = y * r * ((z + r) * (2.0 * r + z) - 1.0)
        return float(log_cdf.sum()), grad, W, third
    if likelihood == "logistic":
        pi = special.expit(f)
        log_p = -np.logaddexp(0.0, -y * f)
        W = pi * (1.0 - pi)
        return float(log_p.sum()), 0.5 * (y + 1.0) - pi, W, -W * (1.0 - 2.0 * pi)
    raise ValueError(f"likelihood must be one of {LIKELIHOODS}, not {likelihood!r}")


def _cholesky(B: np.ndarray) -> np.ndarray:
    """Lower Cholesky factor of ``B``, retrying with growing jitter (``JITTERS``); a ``B`` that no
    jitter makes positive definite (non-finite entries) is a ValueError, never a NaN model."""
    for jitter in (0.0, *JITTERS):
        try:
            return linalg.cholesky(B + jitter * np.eye(len(B)), lower=True, check_finite=True)
        except (linalg.LinAlgError, ValueError):
            continue
    raise ValueError("the failure model's B = I + W^1/2 K W^1/2 has no Cholesky factor")


@dataclass
class Mode:
    """The Laplace approximation at fixed hyperparameters: the mode ``f_hat = K a``, the
    likelihood's terms there, ``sqrt(W)``, ``L = chol(B)`` and the approximate log marginal
    likelihood ``log q(y | X)`` (GPML eq. 3.32)."""

    f: np.ndarray
    a: np.ndarray
    log_lik: float
    grad: np.ndarray
    W: np.ndarray
    third: np.ndarray
    sW: np.ndarray
    L: np.ndarray
    log_marginal: float
    iterations: int


def _at(K: np.ndarray, y: np.ndarray, f: np.ndarray, a: np.ndarray, likelihood: str,
        iterations: int = 0) -> Mode:  # fmt: skip
    log_lik, grad, W, third = likelihood_terms(f, y, likelihood)
    sW = np.sqrt(W)
    L = _cholesky(np.eye(len(f)) + sW[:, None] * K * sW[None, :])
    log_q = -0.5 * float(a @ f) + log_lik - float(np.log(np.diag(L)).sum())
    return Mode(f=f, a=a, log_lik=log_lik, grad=grad, W=W, third=third, sW=sW, L=L,
                log_marginal=log_q, iterations=iterations)  # fmt: skip


def posterior_mode(K: np.ndarray, y: np.ndarray, likelihood: str = LIKELIHOOD,
                   a0: np.ndarray | None = None) -> Mode:  # fmt: skip
    """GPML Algorithm 3.1: Newton's method on ``Psi(f) = log p(y | f) - f' K^-1 f / 2`` in the
    variable ``a = K^-1 f`` (no inverse of ``K``, which duplicates make singular), each step
    halved while ``Psi`` does not rise. ``a0``: a start (a previous mode's ``a``, when the
    hyperparameters moved a little); ``Psi`` is concave, so any start reaches the same mode."""
    n = len(y)
    a = np.zeros(n) if a0 is None else np.array(a0, dtype=np.float64)
    f = K @ a
    psi = -0.5 * float(a @ f) + likelihood_terms(f, y, likelihood)[0]
    if a0 is not None and not psi > likelihood_terms(np.zeros(n), y, likelihood)[0]:
        a, f = np.zeros(n), np.zeros(n)
        psi = likelihood_terms(f, y, likelihood)[0]
    iterations = 0
    for iterations in range(1, NEWTON_MAX + 1):  # noqa: B007
        _, grad, W, _ = likelihood_terms(f, y, likelihood)
        sW = np.sqrt(W)
        L = _cholesky(np.eye(n) + sW[:, None] * K * sW[None, :])
        b = W * f + grad
        c = linalg.cho_solve((L, True), sW * (K @ b))
        step = b - sW * c - a
        for _ in range(HALVINGS):
            a_new = a + step
            f_new = K @ a_new
            psi_new = -0.5 * float(a_new @ f_new) + likelihood_terms(f_new, y, likelihood)[0]
            if psi_new >= psi:
                break
            step = 0.5 * step
        else:
            break  # no step raises Psi any more: at the mode to rounding
        rise = psi_new - psi
        a, f, psi = a_new, f_new, psi_new
        if rise < NEWTON_TOL:
            break
    return _at(K, y, f, a, likelihood, iterations)


@dataclass
class Sites:
    """Expectation propagation's Gaussian sites ``N(f_i; nu_i / tau_i, 1 / tau_i)`` at their fixed
    point, with ``sqrt(tau)``, ``L = chol(I + S^1/2 K S^1/2)``, ``alpha`` (the latent mean is
    ``k*' alpha``) and EP's log marginal likelihood ``log Z_EP`` (GPML eq. 3.65)."""

    tau: np.ndarray
    nu: np.ndarray
    sW: np.ndarray
    L: np.ndarray
    alpha: np.ndarray
    log_marginal: float
    sweeps: int


def _ep_state(K: np.ndarray, tau: np.ndarray, nu: np.ndarray):
    """The posterior ``N(mu, Sigma)`` of the latents under the sites, from scratch (GPML
    Algorithm 3.5, lines 10-12): ``Sigma = K - V' V`` with ``V = L^-1 S^1/2 K``."""
    sW = np.sqrt(tau)
    L = _cholesky(np.eye(len(tau)) + sW[:, None] * K * sW[None, :])
    V = linalg.solve_triangular(L, sW[:, None] * K, lower=True)
    Sigma = K - V.T @ V
    return sW, L, Sigma, Sigma @ nu


def _ep_log_marginal(y, tau, nu, L, Sigma, mu) -> float:
    """``log Z_EP`` (GPML eq. 3.65) in the form that stays finite as sites vanish (``tau_i ->
    0``), as the GPML toolbox's ``infEP`` writes it: the cavities' normalizers, the Gaussian
    terms of the sites against the cavities, and ``-log|B| / 2``."""
    v = np.diag(Sigma)
    tau_c = 1.0 / v - tau
    nu_c = mu / v - nu
    z = y * (nu_c / tau_c) / np.sqrt(1.0 + 1.0 / tau_c)
    value = (special.log_ndtr(z).sum() + 0.5 * nu @ Sigma @ nu - 0.5 * (v * nu) @ nu
             + 0.5 * nu_c @ ((tau / tau_c * nu_c - 2.0 * nu) * v)
             + 0.5 * np.log1p(tau / tau_c).sum() - np.log(np.diag(L)).sum())  # fmt: skip
    return float(value)


def expectation_propagation(K: np.ndarray, y: np.ndarray, tau0=None, nu0=None) -> Sites:
    """GPML Algorithm 3.5 for the probit likelihood: sequential sweeps over the sites, each
    matching the mean and variance of ``cavity x Phi(y_i f_i)`` in closed form (GPML eq. 3.58)
    and updating ``Sigma`` by rank one, ``Sigma`` refactorized after each sweep; until ``log
    Z_EP`` moves by less than ``EP_TOL``. ``tau0, nu0``: sites to start from (the previous
    hyperparameters' fixed point)."""
    n = len(y)
    tau = np.zeros(n) if tau0 is None else np.array(tau0, dtype=np.float64)
    nu = np.zeros(n) if nu0 is None else np.array(nu0, dtype=np.float64)
    sW, L, Sigma, mu = _ep_state(K, tau, nu)
    value, sweeps = -math.inf, 0
    for sweeps in range(1, EP_SWEEPS + 1):  # noqa: B007
        for i in range(n):
            s_ii = Sigma[i, i]
            tau_c = 1.0 / s_ii - tau[i]
            if not tau_c > 0.0:
                continue
            var_c = 1.0 / tau_c
            m_c = (mu[i] / s_ii - nu[i]) * var_c
            root = math.sqrt(1.0 + var_c)
            z = y[i] * m_c / root
            r = math.exp(-0.5 * z * z - LOG_SQRT_2PI - float(special.log_ndtr(z)))
            mu_hat = m_c + y[i] * var_c * r / root
            var_hat = max(var_c - var_c * var_c * r * (z + r) / (1.0 + var_c), var_c * 1e-12)
            tau_new = min(max(1.0 / var_hat - tau_c, 0.0), EP_MAX_TAU)
            delta = tau_new - tau[i]
            tau[i] = tau_new
            nu[i] = mu_hat / var_hat - m_c * tau_c
            s = Sigma[:, i].copy()
            Sigma -= (delta / (1.0 + delta * s_ii)) * np.outer(s, s)
            mu = Sigma @ nu
        sW, L, Sigma, mu = _ep_state(K, tau, nu)
        new = _ep_log_marginal(y, tau, nu, L, Sigma, mu)
        done = abs(new - value) < EP_TOL
        value = new
        if done:
            break
    alpha = nu - sW * linalg.cho_solve((L, True), sW * (K @ nu))
    return Sites(tau=tau, nu=nu, sW=sW, L=L, alpha=alpha, log_marginal=value, sweeps=sweeps)


def _dkernels(u: np.ndarray, lengthscale: np.ndarray, variance: float, bias: float):
    """``K`` and its derivatives with respect to ``(log l_1..d, log s2, log b2)``."""
    se = kernel(u, u, lengthscale, variance)
    derivs = [se * ((u[:, j, None] - u[None, :, j]) / lengthscale[j]) ** 2
              for j in range(u.shape[1])]  # fmt: skip
    derivs += [se, np.full_like(se, bias)]
    return se + bias, derivs


def log_marginal(u, success, lengthscale, variance: float, bias: float = 0.0,
                 likelihood: str = LIKELIHOOD, gradient: bool = False, start=None,
                 inference: str = "laplace"):  # fmt: skip
    """The approximate log marginal likelihood at fixed hyperparameters, and with ``gradient``
    its gradient with respect to ``(log l_1..d, log s2, log b2)``. Returns ``(value, gradient or
    None, approximation)``: a :class:`Mode` or :class:`Sites`. ``start``: the previous
    approximation (its ``a``, or its sites), to start from.

    Laplace: ``log q(y | X, theta)`` (GPML eq. 3.32), its gradient by GPML Algorithm 5.1 (the
    explicit term and the one through the mode's dependence on ``theta``). EP (probit only):
    ``log Z_EP``, its gradient by GPML eq. 5.27 (the sites at their fixed point, the implicit
    terms vanish)."""
    u, y = _array(u, 2), 2.0 * np.asarray(success, dtype=np.float64) - 1.0
    lengthscale = np.broadcast_to(np.asarray(lengthscale, dtype=np.float64), (u.shape[1],))
    if inference not in INFERENCES:
        raise ValueError(f"inference must be one of {INFERENCES}, not {inference!r}")
    if inference == "ep" and likelihood != "probit":
        raise ValueError("expectation propagation is implemented for the probit likelihood")
    K, derivs = _dkernels(u, lengthscale, variance, bias)
    if inference == "ep":
        approx = expectation_propagation(K, y, *(start if start is not None else (None, None)))
        alpha = approx.alpha
    else:
        approx = posterior_mode(K, y, likelihood, start)
        alpha = approx.a
    if not gradient:
        return approx.log_marginal, None, approx
    sW, L = approx.sW, approx.L
    R = sW[:, None] * linalg.cho_solve((L, True), np.diag(sW))  # S^1/2 B^-1 S^1/2
    out = np.array([0.5 * float(alpha @ dK @ alpha) - 0.5 * float((R * dK).sum())
                    for dK in derivs])  # fmt: skip
    if inference == "laplace":
        C = linalg.solve_triangular(L, sW[:, None] * K, lower=True)
        # d(-log|B| / 2) / df_i = [(K^-1 + W)^-1]_ii (third derivative of log p) / 2, as dW / df
        # is minus the third derivative (GPML eq. 5.23 and line 7 of Algorithm 5.1 write the
        # sign for the derivative of -log p; scikit-learn's code agrees with this one)
        s2 = 0.5 * (np.diag(K) - (C * C).sum(0)) * approx.third
        for j, dK in enumerate(derivs):
            b = dK @ approx.grad
            out[j] += float(s2 @ (b - K @ (R @ b)))
    return approx.log_marginal, out, approx


def _prior(likelihood: str, d: int):
    """Centres, scales and bounds of the log-hyperparameters ``(log l_1..d, log s2, log b2)``."""
    shift = LOGISTIC_SCALE if likelihood == "logistic" else 0.0
    centre = np.array([LOG_LENGTHSCALE_PRIOR[0]] * d
                      + [LOG_VARIANCE_PRIOR[0] + shift, LOG_BIAS_PRIOR[0] + shift])  # fmt: skip
    scale = np.array([LOG_LENGTHSCALE_PRIOR[1]] * d + [LOG_VARIANCE_PRIOR[1], LOG_BIAS_PRIOR[1]])
    bounds = [LOG_LENGTHSCALE_BOUNDS] * d + [LOG_VARIANCE_BOUNDS] * 2
    return centre, scale, bounds


def log_prior(theta: np.ndarray, likelihood: str = LIKELIHOOD) -> float:
    """The weak Normal log-prior density of ``(log l_1..d, log s2, log b2)``."""
    centre, scale, _ = _prior(likelihood, len(theta) - 2)
    z = (theta - centre) / scale
    return float(-0.5 * (z * z).sum() - np.log(scale).sum() - len(z) * LOG_SQRT_2PI)


def hyperparameters(u, success, seed: int = 0, likelihood: str = LIKELIHOOD,
                    restarts: int = RESTARTS, inference: str = EVIDENCE) -> np.ndarray:  # fmt: skip
    """The log-hyperparameters ``(log l_1..d, log s2, log b2)`` at the maximum of the
    approximate ``log p(y | X, theta) + log p(theta)`` of ``inference``: L-BFGS-B within the
    bounds, from the prior's centre and ``restarts - 1`` seeded draws from the prior; the best
    end wins. Each evaluation starts from the previous one's approximation."""
    u = _array(u, 2)
    centre, scale, bounds = _prior(likelihood, u.shape[1])
    lo, hi = np.array(bounds).T
    rng = np.random.default_rng(seed)
    starts = [centre] + [np.clip(centre + scale * rng.standard_normal(len(centre)), lo, hi)
                         for _ in range(max(restarts, 1) - 1)]  # fmt: skip
    warm = {"start": None}

    def objective(theta):
        ell = np.exp(theta[:-2])
        try:
            value, grad, approx = log_marginal(u, success, ell, math.exp(theta[-2]),
                                               math.exp(theta[-1]), likelihood, True,
                                               warm["start"], inference)  # fmt: skip
        except ValueError:
            return 1e300, np.zeros_like(theta)
        if not (np.isfinite(value) and np.isfinite(grad).all()):
            return 1e300, np.zeros_like(theta)
        warm["start"] = approx.a if inference == "laplace" else (approx.tau, approx.nu)
        z = (theta - centre) / scale
        return -(value - 0.5 * float(z @ z)), -(grad - z / scale)

    best, best_value = centre, math.inf
    for start in starts:
        warm["start"] = None
        result = optimize.minimize(objective, start, jac=True, method="L-BFGS-B", bounds=bounds,
                                   options={"maxiter": 200})  # fmt: skip
        if np.isfinite(result.fun) and result.fun < best_value:
            best, best_value = np.asarray(result.x, dtype=np.float64), float(result.fun)
    return best


def predictive_probability(mean, var, likelihood: str = LIKELIHOOD) -> np.ndarray:
    """``P(success) = E[sigmoid(f)]`` for ``f ~ N(mean, var)``: probit in closed form,
    ``Phi(m / sqrt(1 + v))``; logistic by the trapezoid rule over ``f = m + sd x``, ``x`` in
    [-9, 9], with a step of ``min(0.2, 0.5 / sd)``: the sigmoid's poles lie ``pi / sd`` off the
    real axis in ``x``, so the rule's error is below ``exp(-4 pi^2)`` at any variance."""
    mean, var = np.asarray(mean, dtype=np.float64), np.maximum(np.asarray(var, np.float64), 0.0)
    if likelihood == "probit":
        return special.ndtr(mean / np.sqrt(1.0 + var))
    if likelihood != "logistic":
        raise ValueError(f"likelihood must be one of {LIKELIHOODS}, not {likelihood!r}")
    shape, mean, sd = mean.shape, mean.reshape(-1), np.sqrt(var).reshape(-1)
    step = min(0.2, 0.5 / max(float(sd.max(initial=0.0)), 1e-300))
    x = step * np.arange(-math.ceil(9.0 / step), math.ceil(9.0 / step) + 1)
    weights = np.exp(-0.5 * x * x)
    weights /= weights.sum()
    out = np.empty(len(mean))
    chunk = max(1, CHUNK_ELEMENTS // len(x))
    for i in range(0, len(mean), chunk):
        part = slice(i, i + chunk)
        out[part] = special.expit(mean[part, None] + sd[part, None] * x) @ weights
    return out.reshape(shape)


@dataclass
class Classifier:
    """A fitted failure model: what prediction needs. ``u`` (``n x d``), ``success`` (``n``, 0 or
    1), ``lengthscale`` (``d``), ``variance`` (``s2``), ``bias`` (``b2``), and the approximation:
    Laplace's mode ``f_hat``, or EP's sites ``tau``, ``nu``. ``alpha`` (the latent mean is
    ``k*' alpha``), ``sW`` (``W^1/2`` or ``S^1/2``) and ``L`` (``chol(I + sW K sW)``) are derived
    from them, so a stored model needs only these."""

    u: np.ndarray
    success: np.ndarray
    lengthscale: np.ndarray
    variance: float
    bias: float
    likelihood: str = LIKELIHOOD
    inference: str = INFERENCE
    f_hat: np.ndarray | None = None
    tau: np.ndarray | None = None
    nu: np.ndarray | None = None
    log_marginal: float = math.nan
    alpha: np.ndarray = field(default=None, repr=False)
    sW: np.ndarray = field(default=None, repr=False)
    L: np.ndarray = field(default=None, repr=False)

    def __post_init__(self):
        self.u = _array(self.u, 2)
        self.success = np.asarray(self.success, dtype=np.float64)
        self.lengthscale = np.asarray(self.lengthscale, dtype=np.float64)
        K = kernel(self.u, self.u, self.lengthscale, self.variance, self.bias)
        if self.inference == "ep":
            self.tau = np.asarray(self.tau, dtype=np.float64)
            self.nu = np.asarray(self.nu, dtype=np.float64)
            self.sW = np.sqrt(self.tau)
            self.L = _cholesky(np.eye(len(self.u)) + self.sW[:, None] * K * self.sW[None, :])
            self.alpha = self.nu - self.sW * linalg.cho_solve((self.L, True),
                                                              self.sW * (K @ self.nu))  # fmt: skip
        else:
            self.f_hat = np.asarray(self.f_hat, dtype=np.float64)
            y = 2.0 * self.success - 1.0
            _, self.alpha, W, _ = likelihood_terms(self.f_hat, y, self.likelihood)
            self.sW = np.sqrt(W)
            self.L = _cholesky(np.eye(len(y)) + self.sW[:, None] * K * self.sW[None, :])

    def chunk_size(self) -> int:
        return max(1, CHUNK_ELEMENTS // max(1, len(self.u)))

    def latent(self, u_star) -> tuple[np.ndarray, np.ndarray]:
        """The approximate posterior's mean ``k*' alpha`` and variance ``k** - |L^-1 sW k*|^2``
        of the latent at ``u_star`` (``m x d``; GPML Algorithms 3.2 and 3.6), in chunks of
        ``chunk_size()`` candidates."""
        u_star = _array(u_star, 2)
        mean, var = np.empty(len(u_star)), np.empty(len(u_star))
        step = self.chunk_size()
        for i in range(0, len(u_star), step):
            part = u_star[i : i + step]
            k_star = kernel(self.u, part, self.lengthscale, self.variance, self.bias)
            mean[i : i + step] = self.alpha @ k_star
            v = linalg.solve_triangular(self.L, self.sW[:, None] * k_star, lower=True)
            var[i : i + step] = self.variance + self.bias - (v * v).sum(0)
        return mean, np.maximum(var, 0.0)

    def p_success(self, u_star) -> np.ndarray:
        """The predictive probability of success at ``u_star`` (``m x d``): the likelihood
        integrated over the latent's approximate posterior (:func:`predictive_probability`)."""
        return predictive_probability(*self.latent(u_star), self.likelihood)

    def to_dict(self) -> dict:
        """JSON-ready: lists of floats (Python's float repr reads back to the same bits)."""
        body = {"kind": "classifier", "likelihood": self.likelihood, "inference": self.inference,
                "u": self.u.tolist(), "success": self.success.tolist(),
                "lengthscale": self.lengthscale.tolist(), "variance": float(self.variance),
                "bias": float(self.bias), "log_marginal": float(self.log_marginal)}  # fmt: skip
        if self.inference == "ep":
            return {**body, "tau": self.tau.tolist(), "nu": self.nu.tolist()}
        return {**body, "f_hat": self.f_hat.tolist()}

    @classmethod
    def from_dict(cls, body: dict) -> Classifier:
        u = _array(body["u"], 2).reshape(len(body["success"]), len(body["lengthscale"]))
        return cls(u=u, success=body["success"], lengthscale=body["lengthscale"],
                   variance=float(body["variance"]), bias=float(body["bias"]),
                   likelihood=body["likelihood"], inference=body.get("inference", "laplace"),
                   f_hat=body.get("f_hat"), tau=body.get("tau"), nu=body.get("nu"),
                   log_marginal=float(body.get("log_marginal", math.nan)))  # fmt: skip


@dataclass
class Constant:
    """One probability of success everywhere: with failures only, the Beta(1, 1) posterior mean
    ``(successes + 1) / (n + 2)`` of the rate. Its latent is the probit of that probability,
    with no variance."""

    p: float
    successes: int
    failures: int

    def latent(self, u_star) -> tuple[np.ndarray, np.ndarray]:
        m = len(_array(u_star, 2))
        return np.full(m, float(special.ndtri(self.p))), np.zeros(m)

    def p_success(self, u_star) -> np.ndarray:
        return np.full(len(_array(u_star, 2)), self.p)

    def to_dict(self) -> dict:
        return {"kind": "constant", "p": self.p, "successes": self.successes,
                "failures": self.failures}  # fmt: skip

    @classmethod
    def from_dict(cls, body: dict) -> Constant:
        return cls(p=float(body["p"]), successes=int(body["successes"]),
                   failures=int(body["failures"]))  # fmt: skip


def from_dict(body: dict) -> Classifier | Constant:
    """A stored failure model (either kind) from its :meth:`to_dict`."""
    return (Constant if body.get("kind") == "constant" else Classifier).from_dict(body)


def condition(u, success, lengthscale, variance: float, bias: float = 0.0,
              likelihood: str = LIKELIHOOD, inference: str = INFERENCE) -> Classifier:  # fmt: skip
    """The approximation at fixed hyperparameters (no fitting of them)."""
    u = _array(u, 2)
    success = np.asarray(success, dtype=np.float64)
    lengthscale = np.broadcast_to(np.asarray(lengthscale, dtype=np.float64), (u.shape[1],))
    value, _, approx = log_marginal(u, success, lengthscale, variance, bias, likelihood,
                                    inference=inference)  # fmt: skip
    sites = {"tau": approx.tau, "nu": approx.nu} if inference == "ep" else {"f_hat": approx.f}
    return Classifier(u=u, success=success, lengthscale=lengthscale.copy(), variance=variance,
                      bias=bias, likelihood=likelihood, inference=inference, log_marginal=value,
                      **sites)  # fmt: skip


def fit(u, success, seed: int = 0, likelihood: str = LIKELIHOOD, restarts: int = RESTARTS,
        inference: str = INFERENCE, evidence: str = EVIDENCE
        ) -> Classifier | Constant | None:  # fmt: skip
    """The failure model of runs at ``u`` (``n x d``, the unit cube) with outcomes ``success``
    (``n``, true/1: the run answered; false/0: it failed). None without any failure; a
    :class:`Constant` without any success; else the GP classifier: its hyperparameters at the
    maximum of ``evidence``'s approximate marginal likelihood (:func:`hyperparameters`, ``seed``
    for the restarts), its posterior by ``inference`` at them."""
    u = _array(u, 2)
    success = np.asarray(success).astype(bool).astype(np.float64).reshape(-1)
    if len(success) != len(u):
        raise ValueError(f"{len(u)} inputs but {len(success)} outcomes")
    if not np.isfinite(u).all():
        raise ValueError("the failure model's inputs must be finite")
    failures = int((success == 0).sum())
    successes = len(success) - failures
    if failures == 0:
        return None
    if successes == 0:
        return Constant(p=1.0 / (len(success) + 2), successes=0, failures=failures)
    theta = hyperparameters(u, success, seed, likelihood, restarts, evidence)
    return condition(u, success, np.exp(theta[:-2]), math.exp(theta[-2]), math.exp(theta[-1]),
                     likelihood, inference)  # fmt: skip
