"""The GP of the paper in plain torch, float64: zero mean, ARD RBF kernel with unit output scale,
Gaussian noise.

    k(u, u') = exp(-sum_i (u_i - u'_i)^2 / (2 l_i^2)),    y = f(u) + e,  e ~ N(0, s2)

Hyperparameter sets are a leading batch dimension ``B``: ``lengthscale`` is ``B x d`` and
``noise`` (the variance ``s2``) is ``B``. Labels may carry known noise variances of their own
(``label_noise``, ``n``, in the GP's units): the covariance of the labels is then
``K = Kf + diag(label_noise) + s2 I``, with ``s2`` a learned nugget on top; predictions at new
points stay latent + ``s2``. Candidates are processed in chunks so that memory stays
bounded whatever their number.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
from scipy.linalg import blas, lapack
from threadpoolctl import ThreadpoolController

from fbgp_al.worker.transforms import DTYPE

LOG_2PI = math.log(2 * math.pi)

# Jitter added to the diagonal, in units of the (unit) prior variance, when a Cholesky fails.
JITTERS = (1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2)

# Elements (``B x n x chunk``) of the two work buffers of a prediction chunk: 2^22 float64 values
# are 32 MB each, allocated once per call and reused for every chunk (fresh ones per chunk cost
# ~500,000 page faults per 10,000 candidates, a third of the time, in profiles here).
CHUNK_ELEMENTS = 1 << 22
# Candidates are scored in chunks of a power of two, at most SCORE_ALIGN of them, and a share of
# the candidates scored elsewhere (service.jobs.share_scoring) starts at a multiple of it:
# every chunk then holds the same candidates however the scoring is shared, and each score has
# the same bits (a matrix product's rounding can depend on the other columns of its chunk).
SCORE_ALIGN = 1024
# From this many labels a prediction's variance takes L^-1 k by a triangular product (dtrmm, half
# the flops of the dense product below it; 0.43 s against 0.86 s for 1,024 candidates at
# n = 2,000, one thread): the screen's predictions at 10,000 candidates are most of a large
# refit's scoring (docs/benchmarks.md, issue 53).
TRIANGULAR_FROM = 1000
# Elements of a joint prediction's L^-1 k (``draws x n x points``, :meth:`Conditioned.joint`),
# which takes its draws in parts of at most this
PRODUCT_ELEMENTS = 1 << 24


def aligned(count: int) -> int:
    """The largest power of two at most ``count`` and ``SCORE_ALIGN`` (at least 1)."""
    return 1 << (max(1, min(int(count), SCORE_ALIGN)).bit_length() - 1)


def rbf(
    u1: torch.Tensor, u2: torch.Tensor, lengthscale: torch.Tensor, out: torch.Tensor | None = None
) -> torch.Tensor:
    """ARD RBF kernel: ``u1`` ``n x d``, ``u2`` ``m x d``, ``lengthscale`` ``B x d``
    -> ``B x n x m``.

    With ``a = u1 / l`` and ``b = u2 / l``,
    ``-|a - b|^2 / 2 = [a, -|a|^2/2, 1] . [b, 1, -|b|^2/2]``: one batched matrix product and an
    in-place ``exp`` make the whole kernel, with no ``B x n x m`` temporaries (they dominated the
    cost of scoring). Clamped at zero distance against rounding. ``out``: an optional
    ``B x n x m`` buffer to write into.
    """
    a = u1[None] / lengthscale[:, None, :]  # B x n x d
    b = u2[None] / lengthscale[:, None, :]  # B x m x d
    one_a, one_b = torch.ones_like(a[..., :1]), torch.ones_like(b[..., :1])
    a = torch.cat([a, -0.5 * (a * a).sum(-1, keepdim=True), one_a], -1)  # B x n x (d + 2)
    b = torch.cat([b, one_b, -0.5 * (b * b).sum(-1, keepdim=True)], -1)  # B x m x (d + 2)
    return torch.matmul(a, b.transpose(-1, -2), out=out).clamp_max_(0.0).exp_()


@dataclass
class Factor:
    """Cholesky factor of ``K = Kf + diag(label_noise) + s2 I`` for a batch of hyperparameter sets.

    ``ok[b]`` is False only when no jitter made ``K[b]`` positive definite (non-finite input); its
    factor is then the identity and callers treat that set as having zero likelihood.
    """

    chol: torch.Tensor  # B x n x n, lower triangular
    jitter: torch.Tensor  # B, what was added to the diagonal
    ok: torch.Tensor  # B, bool


def cholesky(K: torch.Tensor) -> Factor:
    """Batched Cholesky of ``K`` (``B x n x n``), retrying failed members with growing jitter.

    Out of place (autograd can differentiate through it); the retries refactorize the batch,
    which only happens when some member failed."""
    chol, info = torch.linalg.cholesky_ex(K)
    jitter = torch.zeros(K.shape[0], dtype=K.dtype)
    failed = info > 0
    if not failed.any():
        return Factor(chol=chol, jitter=jitter, ok=~failed)
    eye = torch.eye(K.shape[-1], dtype=K.dtype)
    for level in JITTERS:
        jitter = torch.where(failed, level, jitter)
        retry, info = torch.linalg.cholesky_ex(K + jitter[:, None, None] * eye)
        chol = torch.where(failed[:, None, None], retry, chol)
        failed = failed & (info > 0)
        if not failed.any():
            break
    chol = torch.where(failed[:, None, None], eye, chol)
    return Factor(chol=chol, jitter=jitter, ok=~failed)


@functools.cache
def _blas() -> ThreadpoolController:
    return ThreadpoolController()


def inverse_factor(chol: torch.Tensor) -> torch.Tensor:
    """``L^-1`` for each lower-triangular ``L`` of a batch (``B x n x n``): LAPACK's triangular
    inverse (``dtrtri``, ``n^3 / 3`` flops), which took half the time of a triangular solve
    against the identity at n = 1,000 (0.29 s against 0.60 s for 15 factors, one thread). On
    one BLAS thread whatever the process has: its bits depend on the threads, and a scoring's
    parts on other workers must give the bits of one process."""
    out = torch.empty_like(chol)
    with _blas().limit(limits=1, user_api="blas"):
        for b in range(len(chol)):
            # a C-order lower factor is a Fortran-order upper one: inverted in place of a copy
            inverse, _ = lapack.dtrtri(chol[b].numpy().T, lower=0)
            out[b] = torch.from_numpy(inverse.T)
    return out


def triangular_product(chol_inv: torch.Tensor, k_star: torch.Tensor) -> torch.Tensor:
    """``L^-1 k`` for each of a batch (``chol_inv`` ``B x n x n`` lower triangular, ``k_star``
    ``B x n x c``), in place of ``k_star``: BLAS's triangular product (``dtrmm``, ``n^2 c``
    flops, half a dense product's), on one BLAS thread as :func:`inverse_factor`."""
    with _blas().limit(limits=1, user_api="blas"):
        for b in range(len(chol_inv)):
            # C-order lower L^-1 is a Fortran-order upper (L^-1)^T; k^T (L^-1)^T = (L^-1 k)^T
            blas.dtrmm(
                1.0, chol_inv[b].numpy().T, k_star[b].numpy().T, side=1, lower=0, overwrite_b=1
            )
    return k_star


def factorize(
    u: torch.Tensor,
    lengthscale: torch.Tensor,
    noise: torch.Tensor,
    label_noise: torch.Tensor | None = None,
) -> Factor:
    """Cholesky factors of ``K(u, u) + diag(label_noise) + s2 I`` for each hyperparameter set
    (``label_noise``: the labels' known noise variances, ``n``; None: none)."""
    eye = torch.eye(len(u), dtype=u.dtype)
    K = rbf(u, u, lengthscale) + noise[:, None, None] * eye
    if label_noise is not None:
        K = K + torch.diag_embed(torch.as_tensor(label_noise, dtype=u.dtype))
    return cholesky(K)


def log_marginal_likelihood(
    u: torch.Tensor,
    z: torch.Tensor,
    lengthscale: torch.Tensor,
    noise: torch.Tensor,
    label_noise: torch.Tensor | None = None,
) -> torch.Tensor:
    """``log N(z; 0, K + diag(label_noise) + s2 I)`` for each of ``B`` sets: ``u`` ``n x d``,
    ``z`` ``n`` -> ``B``.

    A set whose covariance cannot be factorized gets ``-inf``.
    """
    factor = factorize(u, lengthscale, noise, label_noise)
    alpha = torch.cholesky_solve(z.expand(len(noise), -1)[..., None], factor.chol)[..., 0]
    logdet = 2 * factor.chol.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    value = -0.5 * ((z * alpha).sum(-1) + logdet + len(z) * LOG_2PI)
    return torch.where(factor.ok, value, -torch.inf)


def distinct(lengthscale: torch.Tensor, noise: torch.Tensor):
    """The distinct draws among a batch's (rows of ``lengthscale``, ``B x d``, and ``noise``,
    ``B``): their lengthscales and noises, and each draw's row among them (``B``); None when no
    two draws are the same. A Laplace mixture's draws, resampled by their weights, repeat as
    the labels grow (:mod:`worker.laplace`): a factor is then computed once per distinct draw
    and shared by its copies, which is the same for each copy as its own would be."""
    rows = torch.cat([lengthscale, noise[:, None]], 1)
    unique, index = torch.unique(rows, dim=0, return_inverse=True)
    if len(unique) == len(rows):
        return None
    return unique[:, :-1].contiguous(), unique[:, -1].contiguous(), index


@dataclass
class Out:
    """Fantasy runs at points out for labeling, for a :class:`Conditioned`'s variances."""

    points: torch.Tensor  # P x d
    v: torch.Tensor  # B x n x P, L^-1 k(X, P)
    chol: torch.Tensor  # B x P x P, the Cholesky factor of C_PP + s2 I


@dataclass
class Conditioned:
    """A batch of GPs conditioned on ``(u, z)``, ready to predict at many candidates."""

    u: torch.Tensor  # n x d
    lengthscale: torch.Tensor  # B x d
    noise: torch.Tensor  # B
    alpha: torch.Tensor  # B x n, (K + diag(label_noise) + s2 I)^-1 z
    chol_inv: torch.Tensor  # B x n x n, L^-1 (so that variances are one matrix product)

    @classmethod
    def fit(cls, u, z, lengthscale, noise, label_noise=None) -> Conditioned:
        """``label_noise``: the labels' known noise variances (``n``), or None. Each distinct
        draw is factored once (:func:`distinct`)."""
        repeated = distinct(lengthscale, noise)
        if repeated is not None:
            once = cls.fit(u, z, repeated[0], repeated[1], label_noise)
            index = repeated[2]
            return cls(
                u=u,
                lengthscale=lengthscale,
                noise=noise,
                alpha=once.alpha[index],
                chol_inv=once.chol_inv[index],
            )
        factor = factorize(u, lengthscale, noise, label_noise)
        alpha = torch.cholesky_solve(z.expand(len(noise), -1)[..., None], factor.chol)[..., 0]
        chol_inv = inverse_factor(factor.chol)
        return cls(u=u, lengthscale=lengthscale, noise=noise, alpha=alpha, chol_inv=chol_inv)

    def joint(self, points: torch.Tensor, out=None) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean of ``y`` (``B x S``) and the latent covariance of ``f`` (``B x S x S``,
        ``k(S, S) - (L^-1 k(X, S))^T (L^-1 k(X, S))``) at ``points`` (``S x d``), written into
        ``out`` (two such tensors) if given, in parts of draws that keep ``L^-1 k`` and a
        part's ``k(S, S)`` within ``PRODUCT_ELEMENTS``."""
        draws, n, size = len(self.noise), len(self.u), len(points)
        if out is None:
            out = (
                torch.empty(draws, size, dtype=DTYPE),
                torch.empty(draws, size, size, dtype=DTYPE),
            )
        mean, covariance = out
        per = max(1, PRODUCT_ELEMENTS // max(1, max(n, size) * size))
        for start in range(0, draws, per):
            part = slice(start, min(start + per, draws))
            ls = self.lengthscale[part]
            k = rbf(self.u, points, ls)  # b x n x S
            mean[part] = (self.alpha[part, None, :] @ k)[:, 0, :]
            v = self.chol_inv[part] @ k
            within = covariance[part]
            torch.matmul(v.transpose(-1, -2), v, out=within)
            within.neg_().add_(rbf(points, points, ls))
        return mean, covariance

    def chunk_size(self) -> int:
        batch, n = self.chol_inv.shape[:2]
        return aligned(CHUNK_ELEMENTS // (batch * max(n, 1)))

    def out(self, points: torch.Tensor) -> Out:
        """Fantasy runs at ``points`` (``P x d``, points out for labeling) for the variances
        of :meth:`predict`: ``L^-1 k(X, P)`` and the Cholesky factor of the points' latent
        covariance plus ``s2`` (with jitter where it fails), per draw."""
        v = self.chol_inv @ rbf(self.u, points, self.lengthscale)  # B x n x P
        block = rbf(points, points, self.lengthscale) - v.transpose(-1, -2) @ v
        block.diagonal(dim1=-2, dim2=-1).add_(self.noise[:, None])
        return Out(points, v, cholesky(block).chol)

    def predict_chunk(
        self, candidates: torch.Tensor, buffers=None, variance: bool = True, out: Out | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Mean and variance of ``y`` (``s2`` included, no known noise) at ``candidates``
        (``c x d``): ``B x c`` each, with no chunking (see :meth:`predict`); the variance
        ``None`` unless ``variance``; with fantasy runs at the points ``out`` (:meth:`out`):
        less ``C_cP (C_PP + s2 I)^-1 C_Pc``, ``C`` the latent covariance given the labels
        (the means stay). ``buffers``: two ``B x n x c`` tensors to work in (see
        ``CHUNK_ELEMENTS``)."""
        k_buf, v_buf = buffers if buffers is not None else (None, None)
        k_star = rbf(self.u, candidates, self.lengthscale, out=k_buf)  # B x n x c
        mean = (self.alpha[:, None, :] @ k_star)[:, 0, :]
        if not variance:
            return mean, None
        # ||L^-1 k||^2 by a product with L^-1: faster here than a triangular solve with L, which
        # has half its flops (docs/benchmarks.md); from TRIANGULAR_FROM labels a triangular
        # product, in place of k (its mean is taken)
        if len(self.u) >= TRIANGULAR_FROM:
            v = triangular_product(self.chol_inv, k_star)
        else:
            v = torch.matmul(self.chol_inv, k_star, out=v_buf)  # B x n x c
        cross = None
        if out is not None:  # C_Pc, before v is squared in place
            cross = rbf(out.points, candidates, self.lengthscale) - out.v.transpose(-1, -2) @ v
        latent = 1.0 - v.square_().sum(-2)
        if cross is not None:
            latent -= torch.linalg.solve_triangular(out.chol, cross, upper=False).square().sum(-2)
        return mean, latent.clamp_min_(0.0) + self.noise[:, None]

    def chunks(self, candidates: torch.Tensor, variance: bool = True, out: Out | None = None):
        """``(mean, var)`` of each chunk of candidates in turn, in reused work buffers."""
        step = self.chunk_size()
        batch, n = self.chol_inv.shape[:2]
        buffers = None
        if len(candidates) > step:
            buffers = tuple(torch.empty(batch, n, step, dtype=DTYPE) for _ in range(1 + variance))
            buffers = buffers if variance else (buffers[0], None)
        for i in range(0, len(candidates), step):
            chunk = candidates[i : i + step]
            yield self.predict_chunk(chunk, buffers if len(chunk) == step else None, variance, out)

    def predict(
        self, candidates: torch.Tensor, variance: bool = True, out: Out | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Mean and variance of ``y`` at ``candidates`` (``m x d``): ``B x m`` each; the
        variance ``None`` unless ``variance``; ``out``: fantasy runs (:meth:`out`)."""
        parts = list(self.chunks(candidates, variance, out))
        if not parts:
            empty = torch.empty(len(self.noise), 0, dtype=DTYPE)
            return empty, (empty.clone() if variance else None)
        mean = torch.cat([p[0] for p in parts], -1)
        return mean, (torch.cat([p[1] for p in parts], -1) if variance else None)


def predict(
    u, z, lengthscale, noise, candidates, label_noise=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Predictive mean and variance of ``y`` (``B x m`` each) under each of ``B`` GPs fitted to
    ``(u, z)``; ``candidates`` ``m x d``."""
    return Conditioned.fit(u, z, lengthscale, noise, label_noise).predict(candidates)


def predictive_covariance(
    u, z, lengthscale, noise, candidates, label_noise=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Joint predictive mean (``B x m``) and covariance of ``y`` (``B x m x m``) at ``candidates``
    (for the joint NLML of a test set)."""
    gp = Conditioned.fit(u, z, lengthscale, noise, label_noise)
    k_star = rbf(u, candidates, lengthscale)  # B x n x m
    mean = (gp.alpha[:, None, :] @ k_star)[:, 0, :]
    v = gp.chol_inv @ k_star
    cov = rbf(candidates, candidates, lengthscale) - v.transpose(-1, -2) @ v
    cov.diagonal(dim1=-2, dim2=-1).add_(noise[:, None])
    return mean, cov
