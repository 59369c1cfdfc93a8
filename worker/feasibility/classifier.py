"""A fitted failure model (:class:`Classifier`, or :class:`Constant` without any success), stored
as JSON, and :func:`fit`, which makes one from runs' inputs and outcomes."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import linalg, special

from fbgp_al.worker.feasibility.evidence import EVIDENCE, RESTARTS, hyperparameters, log_marginal
from fbgp_al.worker.feasibility.likelihoods import (
    CHUNK_ELEMENTS,
    INFERENCE,
    LIKELIHOOD,
    _array,
    _cholesky,
    kernel,
    likelihood_terms,
    predictive_probability,
)


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
            self.alpha = self.nu - self.sW * linalg.cho_solve(
                (self.L, True), self.sW * (K @ self.nu)
            )
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
        body = {
            "kind": "classifier",
            "likelihood": self.likelihood,
            "inference": self.inference,
            "u": self.u.tolist(),
            "success": self.success.tolist(),
            "lengthscale": self.lengthscale.tolist(),
            "variance": float(self.variance),
            "bias": float(self.bias),
            "log_marginal": float(self.log_marginal),
        }
        if self.inference == "ep":
            return {**body, "tau": self.tau.tolist(), "nu": self.nu.tolist()}
        return {**body, "f_hat": self.f_hat.tolist()}

    @classmethod
    def from_dict(cls, body: dict) -> Classifier:
        u = _array(body["u"], 2).reshape(len(body["success"]), len(body["lengthscale"]))
        return cls(
            u=u,
            success=body["success"],
            lengthscale=body["lengthscale"],
            variance=float(body["variance"]),
            bias=float(body["bias"]),
            likelihood=body["likelihood"],
            inference=body.get("inference", "laplace"),
            f_hat=body.get("f_hat"),
            tau=body.get("tau"),
            nu=body.get("nu"),
            log_marginal=float(body.get("log_marginal", math.nan)),
        )


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
        return {
            "kind": "constant",
            "p": self.p,
            "successes": self.successes,
            "failures": self.failures,
        }

    @classmethod
    def from_dict(cls, body: dict) -> Constant:
        return cls(
            p=float(body["p"]), successes=int(body["successes"]), failures=int(body["failures"])
        )


def from_dict(body: dict) -> Classifier | Constant:
    """A stored failure model (either kind) from its :meth:`to_dict`."""
    return (Constant if body.get("kind") == "constant" else Classifier).from_dict(body)


def condition(
    u,
    success,
    lengthscale,
    variance: float,
    bias: float = 0.0,
    likelihood: str = LIKELIHOOD,
    inference: str = INFERENCE,
) -> Classifier:
    """The approximation at fixed hyperparameters (no fitting of them)."""
    u = _array(u, 2)
    success = np.asarray(success, dtype=np.float64)
    lengthscale = np.broadcast_to(np.asarray(lengthscale, dtype=np.float64), (u.shape[1],))
    value, _, approx = log_marginal(
        u, success, lengthscale, variance, bias, likelihood, inference=inference
    )
    sites = {"tau": approx.tau, "nu": approx.nu} if inference == "ep" else {"f_hat": approx.f}
    return Classifier(
        u=u,
        success=success,
        lengthscale=lengthscale.copy(),
        variance=variance,
        bias=bias,
        likelihood=likelihood,
        inference=inference,
        log_marginal=value,
        **sites,
    )


def fit(
    u,
    success,
    seed: int = 0,
    likelihood: str = LIKELIHOOD,
    restarts: int = RESTARTS,
    inference: str = INFERENCE,
    evidence: str = EVIDENCE,
    choice=None,
) -> Classifier | Constant | None:
    """The failure model of runs at ``u`` (``n x d``, the unit cube) with outcomes ``success``
    (``n``, true/1: the run answered; false/0: it failed). None without any failure; a
    :class:`Constant` without any success; else the GP classifier: its hyperparameters at the
    maximum of ``evidence``'s approximate marginal likelihood (:func:`hyperparameters`, ``seed``
    for the restarts; ``choice``: the features that are a choice input's one-hot columns, whose
    lengthscales have a prior of their own), its posterior by ``inference`` at them."""
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
    theta = hyperparameters(u, success, seed, likelihood, restarts, evidence, choice)
    return condition(
        u,
        success,
        np.exp(theta[:-2]),
        math.exp(theta[-2]),
        math.exp(theta[-1]),
        likelihood,
        inference,
    )
