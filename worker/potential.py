"""The NUTS target: minus the log posterior of the GP hyperparameters, with its analytic gradient.

Parameters live in log space, ``theta = (log l_1, ..., log l_d, log (s2 - s2_min))`` with
``s2_min`` a fixed floor of the noise variance (0 by default; see :class:`GPPotential`); the
priors ``l_i, s2 - s2_min ~ LogNormal(0, sqrt(3))`` are ``N(0, 3)`` on ``theta`` (no Jacobian
term needed). The gradient of the log marginal likelihood is
``0.5 tr((a a^T - K^-1) dK/dtheta)`` with ``a = K^-1 z``, ``dK/dlog l_i = Kf * D_i / l_i^2`` and
``dK/dtheta_noise = (s2 - s2_min) I``: one Cholesky and inverse per hyperparameter set, no
autograd.

Speed: the sampler calls this ~5,000 times per refit on a handful of ``n x n`` matrices. Fresh
``B x n x n`` arrays cost more than the arithmetic (each is page-faulted in anew: at n = 400 a
quarter of a call's time went there), and so does the traffic of going through torch's batched
Cholesky and inverse. So a call works in two buffers kept between calls, with LAPACK in place on
one triangle of each matrix (``dpotrf``, ``dpotrs``, ``dpotri``, then a rank-1 ``dsyr`` for
``a a^T - K^-1``); the other triangle's weight is folded into the derivatives, so that a row's
trace is one ``n^2`` by ``n^2 x (d + 1)`` product. Measured against the batched torch path it
replaced: 1.3x faster at n = 40, 1.7-1.9x at n = 200, 1.3x at n = 400 (where the inverse's
``2 n^3 / 3`` flops dominate); docs/benchmarks.md.

Every row is computed alone, with vector-matrix products, so that its bits do not depend on the
other rows of the batch: a chain's draws are then the same whether it runs alone, in a group or
with all the others (one ``B x n^2`` matrix product for the batch took 0.80 to 0.93 of the time
of the rows' products, and gave other rounding for other batches).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import blas, lapack

from fbgp_al.worker.gp import JITTERS, LOG_2PI

PRIOR_VARIANCE = 3.0  # of each log-hyperparameter
KEPT_BUFFERS = 4  # batch sizes whose work buffers a potential keeps
BUFFER_ELEMENTS = 1 << 21  # at most this many float64 per buffer: larger batches go in chunks
LEAN_FROM = 1000  # labels from which a potential's distances are built input by input


def distances(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``-dist / 2`` (``d x n^2``, the squared distances of ``u``'s points per input) and the
    ``n^2 x (d + 1)`` "distances" whose products with ``(a a^T - K^-1) * Kf`` give the gradient
    (the noise's is the identity, since ``Kf`` has a unit diagonal), weighted for one triangle:
    in a C-order ``n x n`` buffer, LAPACK's lower triangle (Fortran order) is the upper one
    (``i <= k``), whose off-diagonal entries count twice; the other triangle counts not at all.
    From ``LEAN_FROM`` labels the same numbers are filled in one input at a time, with one
    ``n x n`` temporary beyond them (at n = 5,000, d = 6, they are 2.6 GB; built at once, the
    process peaked at 5.8 GB and took 19 s, input by input at 3.2 GB in 1.8 s)."""
    n, d = u.shape
    if n < LEAN_FROM:
        dist = ((u.T[:, :, None] - u.T[:, None, :]) ** 2).reshape(d, -1)
        neg_half_dist = -0.5 * dist
        eye = np.eye(n)
        weight = (np.triu(np.full((n, n), 2.0), 1) + eye).reshape(-1, 1)
        derivatives = np.ascontiguousarray(np.concatenate([dist, eye.reshape(1, -1)]).T * weight)
        return neg_half_dist, derivatives
    neg_half_dist, derivatives = np.empty((d, n * n)), np.empty((n * n, d + 1))
    weight = np.triu(np.full((n, n), 2.0), 1)
    weight.reshape(-1)[:: n + 1] = 1.0
    weight = weight.reshape(-1)
    for j in range(d):
        dist = ((u[:, j, None] - u[None, :, j]) ** 2).reshape(-1)
        np.multiply(dist, -0.5, out=neg_half_dist[j])
        np.multiply(dist, weight, out=derivatives[:, j])
    derivatives[:, d] = 0.0
    derivatives[:: n + 1, d] = 1.0  # the diagonal's weight
    return neg_half_dist, derivatives


class GPPotential:
    """``U(theta) = -log p(z | theta) - log p(theta)`` for data ``u`` (``n x d``), ``z`` (``n``),
    and optionally the labels' known noise variances ``noise`` (``n``, the GP's units), a fixed
    diagonal added to ``K`` beside the learned ``s2`` (whose gradient is unchanged).

    Calling it on ``theta`` (numpy, ``B x (d + 1)``) returns ``U`` (``B``) and ``dU/dtheta``
    (``B x (d + 1)``), float64 numpy arrays. A covariance that does not factorize gets growing
    jitter (``worker.gp.JITTERS``); rows that are not finite, or whose covariance no jitter can
    factorize, get ``U = inf`` and a zero gradient, so a sampler sees them as divergent, never as
    NaN.

    ``noise_floor``: a variance ``s2_min`` below which the learned noise cannot go: the noise is
    ``s2 = s2_min + exp(theta_noise)``, the prior on ``exp(theta_noise)``. Without one, labels of a
    deterministic simulator pull ``s2`` towards 0 until ``K`` is singular to rounding (seen: ``log
    s2`` near -31 at 75 noise-free labels); there the potential is rounding noise, the step size
    collapses and NUTS runs every tree to its maximum depth. ``dK/dtheta_noise`` stays
    ``exp(theta_noise) I``.

    ``prior_mean``: the priors' means on ``theta`` (``d + 1``; default 0). A campaign whose inputs
    are scaled by its labels' range ``r`` (``input_scaling: labels``) keeps ``u`` in the unit cube
    and centres the lengthscales' priors on ``log r``: the same model as LogNormal(0, sqrt(3))
    lengthscales on the rescaled inputs, since ``k(u / r; l) = k(u; l r)``.
    """

    def __init__(self, u, z, noise=None, prior_mean=None, noise_floor=0.0):
        u = np.asarray(u, dtype=np.float64)
        self.u = u
        self.noise_floor = float(noise_floor)
        if not (math.isfinite(self.noise_floor) and self.noise_floor >= 0.0):
            raise ValueError("noise_floor must be a finite number >= 0")
        self.n, self.d = u.shape
        n = self.n
        self.prior_mean = np.zeros(self.d + 1)
        if prior_mean is not None:
            self.prior_mean = np.asarray(prior_mean, dtype=np.float64).reshape(-1)
            if self.prior_mean.shape != (self.d + 1,) or not np.isfinite(self.prior_mean).all():
                raise ValueError(f"prior_mean must be {self.d + 1} finite numbers")
        self.z = np.asarray(z, dtype=np.float64).reshape(-1)
        self.label_noise = None
        if noise is not None:
            self.label_noise = np.asarray(noise, dtype=np.float64).reshape(-1)
            if self.label_noise.shape != (n,):
                raise ValueError(f"noise must have one variance per label ({n})")
        self.neg_half_dist, self.derivatives = distances(u)
        self.exponents = np.array([-2.0] * self.d + [1.0])
        # the constant parts of -log N(z; 0, K) and -log prior
        self.constant = 0.5 * n * LOG_2PI + 0.5 * self.dim * math.log(2 * math.pi * PRIOR_VARIANCE)
        self.buffers: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def dim(self) -> int:
        return self.d + 1

    def subset(self, rows: np.ndarray) -> GPPotential:
        """The same potential (priors, noise floor, known noises) on the labels ``rows``."""
        noise = None if self.label_noise is None else self.label_noise[rows]
        return GPPotential(self.u[rows], self.z[rows], noise, self.prior_mean, self.noise_floor)

    def __call__(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        theta = np.asarray(theta, dtype=np.float64)
        step = max(1, BUFFER_ELEMENTS // (self.n * self.n))
        if len(theta) > step:  # a large batch (the start grid) in chunks of bounded memory
            parts = [self(theta[i : i + step]) for i in range(0, len(theta), step)]
            return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        with np.errstate(all="ignore"):  # non-finite rows are caught below
            value, grad, ok = self._evaluate(theta)
        if ok.all():
            return value, grad
        return np.where(ok, value, np.inf), np.where(ok[:, None], grad, 0.0)

    def values(self, theta: np.ndarray) -> np.ndarray:
        """``U`` alone (``B``) at ``theta`` (``B x (d + 1)``): one Cholesky per row, a third of
        a gradient's work (no inverse); ``inf`` where the call's would be."""
        theta = np.atleast_2d(np.asarray(theta, dtype=np.float64))
        e = np.exp(theta * self.exponents)
        kf, g = self._buffers(1)
        value, ok = np.empty(len(theta)), np.ones(len(theta), dtype=bool)
        with np.errstate(all="ignore"):
            for b in range(len(theta)):
                value[b], _, ok[b] = self._data_term(e[b], kf[0], g[0].T)
            value += self._prior_term(theta)[1]
        return np.where(ok & np.isfinite(value), value, np.inf)

    def _buffers(self, batch: int) -> tuple[np.ndarray, np.ndarray]:
        """Two ``batch x n x n`` work arrays, kept for the next call of this batch size (the
        chains' batch, one chain's, a chunk of the start grid)."""
        if batch not in self.buffers:
            if len(self.buffers) >= KEPT_BUFFERS:
                self.buffers.pop(next(iter(self.buffers)))
            shape = (batch, self.n, self.n)
            self.buffers[batch] = (np.empty(shape), np.empty(shape))
        return self.buffers[batch]

    def _evaluate(self, theta):
        """``kf`` holds the kernel; ``g`` the Cholesky factor, then ``K^-1``, then
        ``(a a^T - K^-1) * Kf``, each in one triangle."""
        d, batch = self.d, len(theta)
        # (1/l_1^2, ..., 1/l_d^2, s2): the factors of dK/dtheta_j = (Kf * D_j) e_j
        e = np.exp(theta * self.exponents)  # B x (d + 1)
        kf, g = self._buffers(batch)
        value = np.empty(batch)
        ok = np.ones(batch, dtype=bool)
        products = np.empty((batch, d + 1))
        for b in range(batch):
            # row by row (vector-matrix products): a row's bits do not depend on the batch it
            # came in, so a chain's draws are the same in any group of chains
            gb = g[b].T  # Fortran order: LAPACK works on it in place
            value[b], alpha, ok[b] = self._data_term(e[b], kf[b], gb)
            if not ok[b]:
                gb[:] = 0.0
                value[b] = np.inf
                products[b] = 0.0
                continue
            lapack.dpotri(gb, lower=1, overwrite_c=1)
            gb *= -1.0
            blas.dsyr(1.0, alpha, lower=1, a=gb, overwrite_a=1)  # a a^T - K^-1
            np.multiply(g[b], kf[b], out=g[b])
            np.matmul(g[b].reshape(-1), self.derivatives, out=products[b])
        centred, prior = self._prior_term(theta)
        grad = centred / PRIOR_VARIANCE - 0.5 * products * e
        value += prior
        ok &= np.isfinite(value) & np.isfinite(grad).all(-1)
        return value, grad, ok

    def _data_term(self, e, kf, gb):
        """For one row's factors ``e`` (``exp(theta * exponents)``): its kernel into ``kf``, the
        Cholesky factor of ``K`` into ``gb`` (:meth:`_factor`), and ``(-log N(z; 0, K)`` less its
        constant, ``K^-1 z``, ok)."""
        np.matmul(e[: self.d], self.neg_half_dist, out=kf.reshape(-1))
        np.exp(kf, out=kf)
        half_log_det, alpha, ok = self._factor(kf, self.noise_floor + e[self.d], gb)
        return 0.5 * (alpha @ self.z) + half_log_det, alpha, ok

    def _prior_term(self, theta):
        """``theta`` less the priors' means, and ``-log p(theta)`` plus the likelihood's
        constant (``B``)."""
        centred = theta - self.prior_mean
        return centred, (centred * centred).sum(-1) / (2 * PRIOR_VARIANCE) + self.constant

    def _factor(self, kf, noise, gb):
        """Cholesky of ``kf + diag(label_noise) + noise I`` into ``gb`` (lower, Fortran order),
        with growing jitter when it fails: ``(log det / 2, K^-1 z, ok)``."""
        diagonal = gb.T.reshape(-1)[:: self.n + 1]  # gb.T is C order: a view
        for jitter in (0.0, *JITTERS):
            gb[:] = kf.T
            diagonal += noise + jitter
            if self.label_noise is not None:
                diagonal += self.label_noise
            if not np.isfinite(noise):
                break
            _, info = lapack.dpotrf(gb, lower=1, clean=0, overwrite_a=1)
            if info == 0:
                alpha, _ = lapack.dpotrs(gb, self.z, lower=1)
                return float(np.log(np.diagonal(gb)).sum()), alpha, True
        return 0.0, np.zeros(self.n), False
