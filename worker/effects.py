"""A stored model's main effects and its mean over two inputs with the others averaged: the
posterior of ``g_J(t) = E[f(x) | x_J = t]``, the GP's latent function averaged over the inputs
not in ``J`` (each independent and uniform over its values, as for the Sobol indices of
:mod:`worker.vocabulary.sobol`: a float input over its bounds, a log input on the log scale, an int
and a choice input over their values).

Under one posterior draw (lengthscales ``l``, noise ``s2``) ``f`` is a GP with mean
``k(x, X) alpha`` and covariance ``k(x, x') - k(x, X) K^-1 k(X, x')``. The kernel factorizes
over the inputs, ``k(x, X_i) = k_J(t, X_iJ) k_-J(x_-J, X_i,-J)``, so with ``x_-J`` drawn from
its distribution

    E_-J[i] = E[k_-J(x_-J, X_i,-J)]                 (n, the same for every t)
    D_-J    = E[k_-J(x_-J, x'_-J)]                  (x, x' independent; k_J(t, t) = 1)
    w(t)    = k_J(t, X_J) * E_-J                    (n)
    mean(t) = alpha . w(t),   var(t) = D_-J - |L^-1 w(t)|^2     (L L^T = K)

``g_J`` is Gaussian under each draw (a linear functional of a GP). The average is taken over
:data:`SAMPLES` scrambled Sobol points ``x_s`` (``scipy.stats.qmc``) of the other inputs:
``E_-J`` and ``D_-J`` are the means of ``k_-J`` over the points and over all their pairs, so
that under each draw ``mean(t)`` and ``var(t)`` are exactly the posterior mean and variance of
``(1/S) sum_s f(t, x_s)``, the quasi-Monte Carlo estimate of ``g_J(t)``; the ``t`` grid is
exact. The draws mix with equal weights: the band is the mixture's equal-tailed interval
(bisection on its CDF), over the lengthscales' and noise's uncertainty and ``f``'s at each.
Values are ``f``'s, in the output's units (the noise is not in them). For an output modeled on
the log scale ``f`` is ``log y``'s, and the curve is ``exp g_J``: the geometric mean of ``y``
over the inputs not in ``J``, the mixture's median and band mapped by ``exp`` (exact for
quantiles, as ``exp`` is increasing). Its mean is not drawn: ``E[exp g_J]`` is not the mean of
``y`` over the other inputs either, and would be a second, less plain quantity.

Cost: per draw ``O(S n F)`` for ``E_-J``, ``O(S^2 F)`` for ``D_-J``, ``O(n^2 T)`` for the
variances (``S`` samples, ``n`` labels, ``F`` features, ``T`` grid points), and one Cholesky
``O(n^3)``; :data:`DRAWS` draws at most, evenly spread.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.special import ndtr
from scipy.stats import qmc

from fbgp_al.worker.answers import _context
from fbgp_al.worker.gp import distinct, factorize, rbf
from fbgp_al.worker.transforms import as_tensor
from fbgp_al.worker.vocabulary.space import Space

SAMPLES = 256  # quasi-Monte Carlo points over the inputs averaged over (a power of two)
DRAWS = 64  # posterior draws used at most (evenly spread over the thinned draws)
POINTS = 60  # grid points along a float or log input (an int's integers if fewer)
LEVEL = 0.95  # the band's probability
CHUNK_ELEMENTS = 1 << 22  # float64 elements of a chunk of draws' work array (32 MB)


def feature_columns(space: Space, inputs) -> list[int]:
    """The GP's feature columns of ``inputs`` (indices into ``space.inputs``)."""
    out, start = [], 0
    for j, inp in enumerate(space.inputs):
        if j in inputs:
            out += list(range(start, start + inp.n_features))
        start += inp.n_features
    return out


def axis(space: Space, j: int, points: int = POINTS) -> np.ndarray:
    """Pool coordinates along input ``j``: a choice's and a small int's every value, else
    ``points`` evenly spaced (on the log scale for a log input), an int's snapped."""
    inp = space.inputs[j]
    if inp.type == "choice":
        return np.arange(inp.k) / (inp.k - 1)
    if inp.type == "int" and inp.upper - inp.lower + 1 <= points:
        return inp.to_pool(np.arange(int(inp.lower), int(inp.upper) + 1, dtype=np.float64))
    return np.unique(inp.snap(np.linspace(0.0, 1.0, points)))


def other_inputs(space: Space, samples: int = SAMPLES, seed: int = 0) -> np.ndarray:
    """``samples`` points in pool coordinates (``samples x d``), scrambled Sobol, each input
    uniform over its values (:meth:`Space.stratify`)."""
    m = max(1, int(np.ceil(np.log2(max(2, samples)))))
    u = qmc.Sobol(space.dim, scramble=True, seed=seed).random_base2(m)[:samples]
    return space.stratify(u)


def averaged_views(
    space: Space,
    u: torch.Tensor,
    z: torch.Tensor,
    lengthscale: torch.Tensor,
    noise: torch.Tensor,
    label_noise,
    views: list[tuple[list[int], np.ndarray]],
    others: np.ndarray,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each draw's mean and variance of ``g_J`` at each view ``(fixed, t)`` (``t``: ``T x d``
    pool coordinates, only the columns of ``fixed``, ``J``, read), in the GP's standardized
    units (``B x T`` each); ``others``: the samples of the inputs averaged over (``S x d`` pool
    coordinates, the columns not in ``fixed`` read). Each draw is factored once for all the
    views (each input's main effect), each distinct draw once (a Laplace mixture's repeat; a
    copy's answer is its draw's). Draws go in chunks of at most :data:`CHUNK_ELEMENTS` per
    work array."""
    repeated = distinct(lengthscale, noise)
    if repeated is not None:
        unique_l, unique_s2, index = repeated
        once = averaged_views(space, u, z, unique_l, unique_s2, label_noise, views, others)
        return [(means[index.numpy()], variances[index.numpy()]) for means, variances in once]
    prepared = []
    for fixed, t in views:
        cols = feature_columns(space, fixed)
        rest = [c for c in range(space.n_features) if c not in cols]
        grid = as_tensor(space.features(t))[:, cols]
        xs = as_tensor(space.features(others))[:, rest] if rest else None
        prepared.append((cols, rest, grid, xs))
    n = len(u)
    longest = max(len(t) for _, t in views)
    widest = max(n, longest, len(others), len(others) ** 2 // max(n, 1), 1)
    step = max(1, CHUNK_ELEMENTS // (n * widest))
    out = [([], []) for _ in views]
    for b in range(0, len(noise), step):
        ls, s2 = lengthscale[b : b + step], noise[b : b + step]
        factor = factorize(u, ls, s2, label_noise)
        alpha = torch.cholesky_solve(z.expand(len(s2), -1)[..., None], factor.chol)[..., 0]
        for (cols, rest, grid, xs), (means, variances) in zip(prepared, out, strict=True):
            if rest:
                E = rbf(u[:, rest], xs, ls[:, rest]).mean(-1)  # B x n
                D = rbf(xs, xs, ls[:, rest]).mean((-1, -2))  # B: the S x S pairs' mean
            else:  # nothing to average over
                E, D = torch.ones_like(alpha), torch.ones_like(s2)
            w = rbf(u[:, cols], grid, ls[:, cols]) * E[:, :, None]  # B x n x T
            means.append((alpha[:, None, :] @ w)[:, 0, :])
            v = torch.linalg.solve_triangular(factor.chol, w, upper=False)
            variances.append((D[:, None] - v.square().sum(-2)).clamp_min(0.0))
    return [(torch.cat(m).numpy(), torch.cat(v).numpy()) for m, v in out]


def mixture_quantiles(means: np.ndarray, variances: np.ndarray, probabilities) -> list:
    """The quantiles of the equal-weight mixture of ``N(means[b], variances[b])`` at each point
    (``B x T``) at each of ``probabilities``, by bisection on its CDF (``T`` each)."""
    sd = np.sqrt(np.maximum(variances, 1e-300))
    mean = means.mean(0)
    spread = np.abs(means - mean).max(0) + 10 * sd.max(0)
    out = []
    for p in probabilities:
        lo, hi = mean - spread, mean + spread
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            below = ndtr((mid - means) / sd).mean(0) < p
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        out.append(0.5 * (lo + hi))
    return out


def mixture_band(means: np.ndarray, variances: np.ndarray, level: float = LEVEL):
    """The equal-weight mixture of ``N(means[b], variances[b])`` at each point (``B x T``): its
    mean and the ``level`` equal-tailed interval (``low``, ``high``)."""
    tail = (1.0 - level) / 2
    low, high = mixture_quantiles(means, variances, (tail, 1.0 - tail))
    return means.mean(0), low, high


def _draws(post, draws: int | None):
    lengthscale, noise = post.lengthscale, post.noise
    if draws is not None and draws < len(noise):
        keep = np.unique(np.linspace(0, len(noise) - 1, max(1, draws)).round().astype(int))
        lengthscale, noise = lengthscale[keep], noise[keep]
    return lengthscale, noise


def averaged(
    spec: dict,
    model: dict,
    labels: list[dict],
    fixed: list[int],
    t: np.ndarray,
    **options,
) -> dict:
    """``g_J`` of a single-output campaign's model at ``t`` (``T x d`` pool coordinates, the
    columns of ``fixed``, ``J``, read), in the output's units: ``center`` (the line to draw: the
    mixture's mean; for a log output, ``exp`` of its median), ``low``, ``high`` (the ``level``
    band), ``geometric`` (whether the values are the geometric mean of ``y``: a log output), and
    each draw's ``draw_means`` and ``draw_variances`` (``B x T``, the output's units, for a log
    output ``log y``'s). ``options``: :func:`averaged_each`'s."""
    return averaged_each(spec, model, labels, [(fixed, t)], **options)[0]


def averaged_each(
    spec: dict,
    model: dict,
    labels: list[dict],
    views: list[tuple[list[int], np.ndarray]],
    *,
    samples: int = SAMPLES,
    draws: int | None = DRAWS,
    seed: int = 0,
    level: float = LEVEL,
) -> list[dict]:
    """:func:`averaged` at each of ``views`` (``(fixed, t)`` pairs), the draws factored once
    for all of them (:func:`averaged_views`)."""
    space, scale_y, u, z, post, noise = _context(spec, model, labels)
    lengthscale, s2 = _draws(post, draws)
    others = other_inputs(space, samples, seed)
    views = [(fixed, np.atleast_2d(t)) for fixed, t in views]
    out = []
    for means, variances in averaged_views(space, u, z, lengthscale, s2, noise, views, others):
        means = scale_y.mean + scale_y.std * means
        variances = variances * scale_y.std**2
        tail = (1.0 - level) / 2
        if scale_y.log:  # the median and band of g_J on log y's scale, mapped by exp
            center, low, high = np.exp(mixture_quantiles(means, variances, (0.5, tail, 1.0 - tail)))
        else:
            center, low, high = mixture_band(means, variances, level)
        out.append(
            {
                "center": center,
                "low": low,
                "high": high,
                "geometric": bool(scale_y.log),
                "draw_means": means,
                "draw_variances": variances,
            }
        )
    return out


def main_effects(spec: dict, model: dict, labels: list[dict], inputs=None, **options) -> list:
    """Each input's main effect (``inputs``: their indices, default all): ``{"input": name,
    "type", "v": pool coordinates, "x": values, "center", "low", "high", "geometric"}`` (lists,
    output units; see :func:`averaged`)."""
    space = Space.of(spec["inputs"])
    shown = list(range(space.dim) if inputs is None else inputs)
    views = []
    for j in shown:
        v = axis(space, j)
        t = np.zeros((len(v), space.dim))
        t[:, j] = v
        views.append(([j], t))
    out = []
    for j, (_, t), g in zip(
        shown, views, averaged_each(spec, model, labels, views, **options), strict=True
    ):
        v = t[:, j]
        values = [row[j] for row in space.from_pool(t)]
        out.append(
            {
                "input": space.inputs[j].name,
                "type": space.inputs[j].type,
                "v": v.tolist(),
                "x": values,
                "center": g["center"].tolist(),
                "low": g["low"].tolist(),
                "high": g["high"].tolist(),
                "geometric": g["geometric"],
            }
        )
    return out
