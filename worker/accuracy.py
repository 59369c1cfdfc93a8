"""A model's accuracy without a test set: leave-one-out cross-validation of the labels and the
predictive variance integrated over the pool, under the mixture of the posterior draws' GPs.

For draw ``j`` with ``K_j = Kf + diag(label_noise) + s2_j I`` (the covariance of the labels
``z``), the GP fitted to every label but ``i`` predicts ``z_i`` with (Rasmussen & Williams, 2006,
eq. 5.12)

    mu_ij = z_i - [K_j^-1 z]_i / [K_j^-1]_ii,    v_ij = 1 / [K_j^-1]_ii

(``v_ij`` is the variance of ``y_i``: latent, ``s2_j`` and its known noise). The draws mix with
equal weights: mean ``mean_j mu_ij``, variance ``mean_j v_ij + var_j mu_ij``, density
``mean_j N(z_i; mu_ij, v_ij)``.

Over pool points the draws predict ``y`` with means ``m_j`` and variances ``w_j`` (latent +
``s2_j``): the integrated predictive variance is the mean over the points of the mixture's
variance (``mean_j w_j + var_j m_j``, QB-MGP's score), ``ipv_f`` the same for ``f`` (``w_j -
s2_j``), and ``qbc`` the mean of ``var_j m_j`` (B-QBC's score): how much the draws disagree.

Everything is computed in standardized units (``z``) and reported both in original units
(``y_std`` and its square) and relative to the labels' standard deviation (``..._relative``, the
standardized values). Draws are processed in groups whose factors stay within
:data:`worker.acquisition.FIT_ELEMENTS`.

An output modeled on the log scale (``scale_y.log``) is reported in its own units too: each
draw's prediction of ``log y`` is a lognormal of ``y`` (:mod:`worker.vocabulary.lognormal`), the
draws' means and variances mix as above; ``loo_rmse`` is the LOO mixture mean's error against the
labels, ``ipv`` the mixture's variance of ``y``, ``ipv_f`` of ``exp f``, ``qbc`` the variance of
the draws' means of ``y``, and ``..._relative`` each relative to the labels' standard deviation
(variance) in their units. ``loo_nlpd`` stays in the GP's units (of standardized ``log y``);
``loo_coverage_95`` is the same on either scale (``exp`` is increasing).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from fbgp_al.worker.acquisition import draw_groups
from fbgp_al.worker.gp import Conditioned, cholesky, distinct, inverse_factor, rbf
from fbgp_al.worker.transforms import DTYPE, OutputStandardization
from fbgp_al.worker.vocabulary import lognormal
from fbgp_al.worker.vocabulary.defaults import STOP_TARGETS

POOL_POINTS = 2000  # pool points the integrated variances average over, at most
# The draws' predictive variances at the pool points cost draws x points x n^2. Beyond this work
# (the defaults' at n = 100) each draw's variances are taken at every k-th point only, the draws
# taking turns (draw j at the points i = j mod k), k the smallest that keeps the work within it:
# every point still averages its variance over a share of the draws, and the draws' means (the
# disagreement, qbc) are still taken at every point. A log output keeps every point (its means
# in y's units need the variances).
VARIANCE_WORK = 150 * POOL_POINTS * 100**2
NORMAL_95 = 0.975  # a label is covered when its LOO mixture CDF lies in [1 - this, this]
TARGETS = STOP_TARGETS  # the values a stopping rule may name: all of them lower is better


def _fit(u, z, lengthscale, noise, label_noise):
    """One group of draws: the Cholesky factor of ``K`` and its inverse (``B x n x n`` each) and
    ``K^-1 z``."""
    diagonal = noise[:, None] + (0.0 if label_noise is None else label_noise[None, :])
    K = rbf(u, u, lengthscale)
    K.diagonal(dim1=-2, dim2=-1).add_(diagonal)
    factor = cholesky(K)
    chol_inv = inverse_factor(factor.chol)
    alpha = (chol_inv.transpose(-1, -2) @ (chol_inv @ z[:, None]))[..., 0]
    return factor.chol, chol_inv, alpha


@dataclass
class _Group:
    """One group of distinct draws, factored: the draws it stands for (``rows``, their places
    among all the draws) and, for each, its place in the group (``which``)."""

    rows: torch.Tensor
    which: torch.Tensor
    lengthscale: torch.Tensor
    noise: torch.Tensor
    chol: torch.Tensor | None  # None unless asked for (:func:`_fits`)
    chol_inv: torch.Tensor
    alpha: torch.Tensor

    def conditioned(self, u, keep: torch.Tensor | None = None) -> Conditioned:
        """The group's GPs (or those of its places ``keep``)."""
        if keep is None:
            return Conditioned(u, self.lengthscale, self.noise, self.alpha, self.chol_inv)
        return Conditioned(
            u, self.lengthscale[keep], self.noise[keep], self.alpha[keep], self.chol_inv[keep]
        )


def _fits(u, z, lengthscale, noise, label_noise, chol: bool = False):
    """Each group of distinct draws (:func:`worker.acquisition.draw_groups`) in turn, factored
    (:func:`_fit`): a Laplace mixture's resampled draws repeat (:func:`worker.gp.distinct`),
    and each distinct one is factored once, wherever its copies fall among the groups.
    ``chol``: each group holds its Cholesky factors too (else only their inverses)."""
    repeated = distinct(lengthscale, noise)
    if repeated is None:
        index = torch.arange(len(noise))
    else:
        lengthscale, noise, index = repeated
    for g in draw_groups(len(noise), len(z)):
        rows = ((index >= g.start) & (index < g.start + len(noise[g]))).nonzero().squeeze(-1)
        factor, chol_inv, alpha = _fit(u, z, lengthscale[g], noise[g], label_noise)
        held = factor if chol else None
        yield _Group(rows, index[rows] - g.start, lengthscale[g], noise[g], held, chol_inv, alpha)


def _loo_of(z, chol_inv, alpha) -> tuple[torch.Tensor, torch.Tensor]:
    inv_diag = chol_inv.square().sum(-2)  # [K^-1]_ii = sum_k (L^-1)_ki^2
    return z - alpha / inv_diag, 1.0 / inv_diag


def _loo_into(means, variances, z, group: _Group) -> None:
    """The group's draws' leave-one-out predictions, into each row they stand for."""
    m, v = _loo_of(z, group.chol_inv, group.alpha)
    means[group.rows], variances[group.rows] = m[group.which], v[group.which]


def loo(u, z, lengthscale, noise, label_noise=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Closed-form leave-one-out predictions of each label by each draw's GP: means and
    variances of ``y_i`` (``B x n`` each, standardized units)."""
    means, variances = (torch.empty(len(noise), len(z), dtype=DTYPE) for _ in range(2))
    for group in _fits(u, z, lengthscale, noise, label_noise):
        _loo_into(means, variances, z, group)
    return means, variances


def mixture_loo(z, means, variances) -> dict[str, torch.Tensor]:
    """The equal-weight mixture of the draws' LOO predictions (``B x n``) at each label: its
    ``mean``, ``variance``, negative log density ``nlpd`` and CDF ``cdf`` at ``z_i``
    (``n`` each)."""
    mean = means.mean(0)
    variance = variances.mean(0) + means.var(0, correction=0)
    log_density = -0.5 * ((z - means) ** 2 / variances + torch.log(2 * math.pi * variances))
    nlpd = -(torch.logsumexp(log_density, 0) - math.log(len(means)))
    normal = torch.distributions.Normal(torch.zeros((), dtype=DTYPE), torch.ones((), dtype=DTYPE))
    cdf = normal.cdf((z - means) / variances.sqrt()).mean(0)
    return {"mean": mean, "variance": variance, "nlpd": nlpd, "cdf": cdf}


class _Spread:
    """The draws' means at each point, group by group: their running mean and sum of squared
    deviations (Chan et al.'s pairwise update), so that only one group is held at once."""

    def __init__(self):
        self.count, self.mean, self.m2 = 0, None, None

    def add(self, m: torch.Tensor) -> None:
        k, g_mean = len(m), m.mean(0)
        g_m2 = (m - g_mean).square().sum(0)
        if self.mean is None:
            self.count, self.mean, self.m2 = k, g_mean, g_m2
        else:
            delta = g_mean - self.mean
            total = self.count + k
            self.mean = self.mean + delta * (k / total)
            self.m2 = self.m2 + g_m2 + delta.square() * (self.count * k / total)
            self.count = total

    def variance(self) -> torch.Tensor:
        return self.m2 / self.count


def variance_stride(draws: int, points: int, n: int) -> int:
    """The ``k`` of :data:`VARIANCE_WORK`: 1 (every draw at every point) up to that work, at
    most ``draws`` (every point keeps a draw)."""
    return max(1, min(draws, math.ceil(draws * points * n * n / VARIANCE_WORK)))


class _Pool:
    """:func:`pool_moments` group of draws by group (:meth:`add` each group's factors)."""

    def __init__(self, u, z, noise, points, scale_y=None):
        self.u, self.points = u, points
        self.means, self.latent_means = _Spread(), _Spread()
        self.sum_var = torch.zeros(len(points), dtype=DTYPE)
        self.sum_latent = torch.zeros(len(points), dtype=DTYPE)
        self.seen = torch.zeros(len(points), dtype=DTYPE)
        self.scale_y = scale_y
        self.log = scale_y is not None and scale_y.log
        self.k = 1 if self.log else variance_stride(len(noise), len(points), len(z))

    def add(self, group: _Group) -> None:
        """One group of distinct draws, each counted once for every draw it stands for."""
        u, points, k, which = self.u, self.points, self.k, group.which
        if k > 1:  # draw j's variances at the points i = j mod k, for every draw j
            self.means.add(group.conditioned(u).predict(points, False)[0][which])
            turn = group.rows % k
            for r in turn.unique().tolist():
                mine = which[turn == r]
                places, copies = mine.unique(return_inverse=True)
                _, w = group.conditioned(u, places).predict(points[r::k])
                w = w[copies]
                self.sum_var[r::k] += w.sum(0)
                self.sum_latent[r::k] += (w - group.noise[mine][:, None]).sum(0)
                self.seen[r::k] += len(mine)
            return
        m, w = group.conditioned(u).predict(points)
        m, w = m[which], w[which]
        latent = w - group.noise[which][:, None]
        if self.log:  # each draw's lognormal moments of y and of exp f
            scale_y = self.scale_y
            mu, var = scale_y.mean + scale_y.std * m.numpy(), scale_y.std**2
            m, w = map(torch.from_numpy, lognormal.moments(mu, var * w.numpy()))
            m_f, latent = map(
                torch.from_numpy, lognormal.moments(mu, var * latent.clamp_min(0).numpy())
            )
            self.latent_means.add(m_f)
        self.sum_var += w.sum(0)
        self.sum_latent += latent.sum(0)
        self.seen += len(w)
        self.means.add(m)

    def result(self) -> dict:
        qbc = self.means.variance()
        qbc_f = self.latent_means.variance() if self.log else qbc
        return {
            "ipv": self.sum_var / self.seen + qbc,
            "ipv_f": self.sum_latent / self.seen + qbc_f,
            "qbc": qbc,
        }


def pool_moments(
    u, z, lengthscale, noise, points, label_noise=None, scale_y: OutputStandardization | None = None
) -> dict:
    """At each pool point (``m x d``): the mixture's variance of ``y`` (``ipv``) and of ``f``
    (``ipv_f``) and the variance of the draws' means (``qbc``), ``m`` each, standardized
    units; for a log output (``scale_y.log``) of ``y`` and ``exp f`` in the output's units.
    The draws' moments are combined group by group (:class:`_Spread`); beyond
    :data:`VARIANCE_WORK` each point's mean variance is over the draws whose turn it is
    (:func:`variance_stride`)."""
    pool = _Pool(u, z, noise, points, scale_y)
    for group in _fits(u, z, lengthscale, noise, label_noise):
        pool.add(group)
    return pool.result()


def summary(
    u,
    z,
    lengthscale,
    noise,
    points,
    y_std: float,
    label_noise=None,
    scale_y: OutputStandardization | None = None,
    keep: list | None = None,
) -> dict:
    """The model body's ``accuracy``: LOO RMSE of the mixture mean (original units, and
    relative to the labels' sd), mean LOO NLPD (standardized units, as ``/evaluate``'s
    ``nlpd_mixture``), the share of labels within the mixture's central 95% LOO interval, and
    ``ipv``, ``ipv_f``, ``qbc`` averaged over ``points`` (original units squared, and relative
    to the labels' variance). ``points``: pool points in the unit cube (``m x d``, ``m >= 1``).
    ``scale_y``: the output's standardization, whose ``log`` reports a log output in its own
    units (see the module's docstring; ``y_std`` is then its ``std``). ``keep``: as
    :func:`summary_at`'s."""
    args = (u, z, lengthscale, noise, points, y_std, None, label_noise, scale_y)
    return summary_at(*args, keep=keep)[0]


def summary_at(
    u,
    z,
    lengthscale,
    noise,
    points,
    y_std: float,
    at,
    label_noise=None,
    scale_y: OutputStandardization | None = None,
    joint: bool = False,
    keep: list | None = None,
) -> tuple[dict, torch.Tensor | None, torch.Tensor | None]:
    """:func:`summary`, and the draws' predictive means and variances of ``y`` at ``at``
    (``c x d``; ``B x c`` each, None without ``at``) from the same factors: one factorization
    of each distinct draw for both (a ranking's exact scores, :mod:`worker.fitting.ranking`).
    ``joint``: the latent covariances of ``f`` at ``at`` (``B x c x c``) in place of the
    variances (a greedy batch's, :mod:`worker.fantasies`). Its ``seconds`` count the
    predictions at ``at`` too. ``keep``: a list that receives each group's Cholesky factors
    and ``K^-1 z`` (``(chol, alpha)``, the distinct draws in the order of
    :func:`worker.gp.distinct`), for a polish to climb on (:mod:`worker.differentiable`)."""
    started = time.perf_counter()
    pool = _Pool(u, z, noise, points, scale_y)
    means, variances = (torch.empty(len(noise), len(z), dtype=DTYPE) for _ in range(2))
    mean = var = None
    if at is not None:
        mean = torch.empty(len(noise), len(at), dtype=DTYPE)
        var = torch.empty((len(noise), len(at)) + ((len(at),) if joint else ()), dtype=DTYPE)
    for group in _fits(u, z, lengthscale, noise, label_noise, keep is not None):  # each once
        _loo_into(means, variances, z, group)
        pool.add(group)
        if keep is not None:
            keep.append((group.chol, group.alpha))
        if at is not None:
            fitted = group.conditioned(u)
            m, v = fitted.joint(at) if joint else fitted.predict(at)
            mean[group.rows], var[group.rows] = m[group.which], v[group.which]
    mix = mixture_loo(z, means, variances)
    rmse_z = float((z - mix["mean"]).square().mean().sqrt())
    covered = ((mix["cdf"] >= 1 - NORMAL_95) & (mix["cdf"] <= NORMAL_95)).to(DTYPE).mean()
    out = {
        "loo_rmse": rmse_z * y_std,
        "loo_rmse_relative": rmse_z,
        "loo_nlpd": float(mix["nlpd"].mean()),
        "loo_coverage_95": float(covered),
    }
    sd = y_std
    if pool.log:  # y's units: the labels' and the mixture's means
        sd, rmse = _log_rmse(z, means, variances, scale_y)
        out.update(loo_rmse=rmse, loo_rmse_relative=rmse / sd)
    for name, values in pool.result().items():
        relative = float(values.mean())
        if pool.log:  # in y's units already
            relative /= sd**2
        out[name] = relative * sd**2
        out[f"{name}_relative"] = relative
    out.update(
        pool_points=len(points),
        draws=len(noise),
        variance_stride=pool.k,
        seconds=time.perf_counter() - started,
    )
    return out, mean, var


def _log_rmse(z, means, variances, scale_y: OutputStandardization) -> tuple[float, float]:
    """A log output's labels' standard deviation in their units (``ddof=1``; 1 when they are
    constant), and the LOO RMSE of the mixture's mean of ``y`` (the draws' lognormal means'
    mean) against them."""
    y = np.exp(scale_y.mean + scale_y.std * z.numpy())
    sd = float(y.std(ddof=1 if len(y) > 1 else 0)) or 1.0
    mu = scale_y.mean + scale_y.std * means.numpy()
    mean, _ = lognormal.mixture_moments(mu, scale_y.std**2 * variances.numpy())
    return sd, float(np.sqrt(np.mean((mean - y) ** 2)))
