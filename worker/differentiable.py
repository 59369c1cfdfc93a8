"""The acquisitions (:mod:`worker.acquisition`) at any points of the box, differentiable by
autograd: the same draws, the same averages over them and the same numbers as a pool's scoring
(to rounding), so that an optimizer may climb them from a pool's best candidates
(:mod:`worker.polish`).

An :class:`Acquisition` holds each output's draws' GPs factored once (one factor per distinct
draw, shared by its copies) and, with points pending or picked in a greedy batch, the factors
with them added as fantasies; called on ``c x f`` features (the GP's inputs), it gives the
``c`` values ``sum_k weight_k * score_k`` as :func:`worker.acquisition.batch_scores` and
:func:`worker.scoring.combined_scores` give them, with a graph to differentiate. ``alm`` is the
mode's variance, ``b-alm``, ``b-qbc``, ``qb-mgp`` and ``bald`` average over the draws as their
pool scorings do; BALD's mixture entropy is the same trapezoid rule on the same nodes
(:func:`mixture_entropy`). ``random`` has no gradient and no place here.
"""

from __future__ import annotations

import math

import torch

from fbgp_al.worker.acquisition import (
    MEANS_ONLY,
    QUADRATURE_ELEMENTS,
    QUADRATURE_HALF_WIDTH,
    QUADRATURE_MAX_NODES,
    QUADRATURE_MIN_NODES,
    QUADRATURE_NODES_PER_SD,
    bald_std,
    draw_groups,
    gaussian_entropy,
)
from fbgp_al.worker.gp import distinct, factorize, rbf
from fbgp_al.worker.transforms import DTYPE, as_tensor

# the acquisitions an optimizer may climb (all but ``random``)
DIFFERENTIABLE = frozenset({"alm", "b-alm", "b-qbc", "qb-mgp", "bald", "bald-code", "bald-std"})


def mixture_entropy(mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
    """:func:`worker.acquisition.mixture_entropy` (``M x c`` means and variances -> ``c``), the
    same nodes and the same trapezoid rule, written without work buffers so that autograd
    follows it. The nodes' count is piecewise constant in the inputs: the gradient is the
    rule's on its nodes."""
    sd = var.sqrt()
    lo = (mean - QUADRATURE_HALF_WIDTH * sd).min(0).values
    hi = (mean + QUADRATURE_HALF_WIDTH * sd).max(0).values
    with torch.no_grad():
        needed = ((hi - lo) * QUADRATURE_NODES_PER_SD / sd.min(0).values).ceil() + 1
        nodes = torch.exp2(
            torch.log2(needed.clamp(QUADRATURE_MIN_NODES, QUADRATURE_MAX_NODES)).ceil()
        )
    draws = mean.shape[0]
    out = torch.zeros(mean.shape[1], dtype=DTYPE)
    for count in nodes.unique().tolist():
        count = int(count)
        idx = (nodes == count).nonzero().squeeze(-1)
        grid = torch.linspace(0.0, 1.0, count, dtype=DTYPE)
        step = max(1, QUADRATURE_ELEMENTS // (draws * count))
        for i in range(0, len(idx), step):
            j = idx[i : i + step]
            start = (lo[j] - mean[:, j]) / sd[:, j]  # M x c
            stride = (hi[j] - lo[j]) / sd[:, j]
            t = start[..., None] + stride[..., None] * grid  # M x c x G
            weight = 1.0 / (sd[:, j] * (draws * math.sqrt(2 * math.pi)))
            density = (weight[..., None] * torch.exp(-0.5 * t.square())).sum(0)  # c x G
            positive = density > 0
            safe = torch.where(positive, density, 1.0)
            integrand = torch.where(positive, -density * safe.log(), 0.0)
            h = (hi[j] - lo[j]) / (count - 1)
            value = h * (integrand.sum(-1) - 0.5 * (integrand[:, 0] + integrand[:, -1]))
            out = out.index_put((j,), value)
    return out


def score(name: str, mean: torch.Tensor, var: torch.Tensor | None, noise: torch.Tensor):
    """Acquisition ``name`` of the draws' predictive means and variances of y (``M x c``;
    ``var`` None for ``b-qbc``), ``noise`` the draws' noise variances: as
    :func:`worker.acquisition.scorer`'s, differentiable."""
    if name in ("alm", "b-alm"):
        return var.mean(0)
    if name == "b-qbc":
        return mean.var(0, correction=0)
    if name == "qb-mgp":
        return var.mean(0) + mean.var(0, correction=0)
    if name == "bald":
        return mixture_entropy(mean, var) - gaussian_entropy(var).mean(0)
    if name in ("bald-code", "bald-std"):
        return bald_std(var - noise[:, None])
    raise ValueError(f"acquisition {name!r} has no gradient")


class Draws:
    """One output's draws' GPs conditioned on ``(u, z)``, each distinct draw factored once:
    predictions at any features, differentiable in them.

    A polish asks for a few points at a time, so each draw keeps its Cholesky factor ``L`` and
    solves ``L v = k(X, x)`` where a pool's scoring multiplies by ``L^-1``
    (:class:`worker.gp.Conditioned`): no triangular inverse to compute, and a solve reads half
    the matrix a product reads (at n = 200 and 150 draws, 0.13 s against 0.24 s to factor and
    10 ms against 19 ms for a value and its gradient at one point, docs/benchmarks.md)."""

    def __init__(self, u, z, lengthscale, noise, label_noise=None, factors=None):
        """``factors``: the distinct draws' Cholesky factors and ``K^-1 z`` (``(chol,
        alpha)``, in the order of :func:`worker.gp.distinct`) where a refit has them already
        (its accuracy estimates', :func:`worker.accuracy.summary`), or None."""
        self.noise = noise
        repeated = distinct(lengthscale, noise)
        self.index = None
        if repeated is not None:
            lengthscale, noise, self.index = repeated
        self.u, self.lengthscale, self.nugget = u, lengthscale, noise
        if factors is not None:
            self.chol, self.alpha = factors
            if self.chol.shape != (len(noise), len(u), len(u)):
                raise ValueError("the factors given are not one per distinct draw")
            return
        # in groups of draws, so that the covariances being factored add a group's at most
        self.chol = torch.empty(len(noise), len(u), len(u), dtype=DTYPE)
        for part in draw_groups(len(noise), len(u)):
            self.chol[part] = factorize(u, lengthscale[part], noise[part], label_noise).chol
        rhs = z.expand(len(noise), -1)[..., None]
        self.alpha = torch.cholesky_solve(rhs, self.chol)[..., 0]

    def predict(self, x: torch.Tensor, variance: bool = True):
        """Mean and variance of y at features ``x`` (``c x f``), ``M x c`` each (the variance
        None unless ``variance``), as :meth:`worker.gp.Conditioned.predict_chunk` computes
        them (to rounding)."""
        k_star = rbf(self.u, x, self.lengthscale)  # B x n x c
        mean = (self.alpha[:, None, :] @ k_star)[:, 0, :]
        var = None
        if variance:
            v = torch.linalg.solve_triangular(self.chol, k_star, upper=False)
            var = (1.0 - v.square().sum(-2)).clamp_min(0.0) + self.nugget[:, None]
        if self.index is not None:
            mean = mean[self.index]
            var = None if var is None else var[self.index]
        return mean, var


class Acquisition:
    """Acquisition ``name`` of several outputs at any features, differentiable: ``parts``
    holds each output's ``(weight, posterior, u, z, label_noise)`` (the thinned draws a
    scoring uses, as :func:`worker.acquisition.greedy_batch_outputs` takes them), ``pending``
    the inputs out for labeling or already picked in a batch (``k x f``), fantasies of every
    output's GPs that lower their variances (their noise the nugget alone), ``factors`` each
    output's draws' factors already computed (:class:`Draws`; None, or None for an output:
    computed here)."""

    def __init__(self, name: str, parts: list[tuple], pending=None, factors=None):
        if name not in DIFFERENTIABLE:
            raise ValueError(f"acquisition {name!r} has no gradient")
        self.name = name
        self.variance = name not in MEANS_ONLY
        self.parts = parts
        self.pending = None if pending is None or not len(pending) else as_tensor(pending)
        self.factors = [None] * len(parts) if factors is None or name == "alm" else factors
        self.outputs = []
        for (weight, post, u, z, label_noise), factor in zip(parts, self.factors, strict=True):
            post = post.mode() if name == "alm" else post
            u, z = as_tensor(u), as_tensor(z)
            noise = None if label_noise is None else as_tensor(label_noise)
            base = Draws(u, z, post.lengthscale, post.noise, noise, factor)
            fantasy = None
            if self.pending is not None and self.variance:
                zeros = torch.zeros(len(self.pending), dtype=DTYPE)
                fantasy = Draws(
                    torch.cat([u, self.pending]),
                    torch.cat([z, zeros]),
                    post.lengthscale,
                    post.noise,
                    None if noise is None else torch.cat([noise, zeros]),
                )
            self.outputs.append((float(weight), post.noise, base, fantasy))

    def with_pending(self, more) -> Acquisition:
        """The same acquisition with the inputs ``more`` (``k x f``) pending as well."""
        more = as_tensor(more).reshape(-1, self.parts[0][2].shape[1])
        pending = more if self.pending is None else torch.cat([self.pending, more])
        return Acquisition(self.name, self.parts, pending, self.factors)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """The acquisition at features ``x`` (``c x f``): ``c`` values."""
        total = torch.zeros(len(x), dtype=DTYPE)
        for weight, noise, base, fantasy in self.outputs:
            mean, var = base.predict(x, self.variance)
            if fantasy is not None:
                var = fantasy.predict(x)[1]
            total = total + weight * score(self.name, mean, var, noise)
        return total

    def value_and_grad(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The values at ``x`` (``c x f``) and each one's gradient in its own row (``c x f``)."""
        x = as_tensor(x).detach().clone().requires_grad_(True)
        values = self(x)
        (grad,) = torch.autograd.grad(values.sum(), x)
        return values.detach(), grad
