"""The No-U-Turn Sampler for many chains over one batched potential.

Multinomial NUTS (Betancourt 2017) as Stan runs it: trajectories doubled in a random direction,
multinomial sampling within subtrees and biased progressive sampling between them, the generalized
U-turn criterion with the extra checks across merged subtrees, divergence when the energy error
exceeds ``max_delta_h``; warm-up by dual averaging of the step size (target acceptance
``target_accept``) and a mass matrix estimated in Stan's doubling windows: diagonal (Stan's
``diag_e``) or dense (``dense_e``), regularized as Stan does,
``(n / (n + 5)) Sigma + 1e-3 (5 / (n + 5)) I`` from the ``n`` draws of a window.

Sampling to a target: ``sample(..., more=f)`` calls ``f`` with the draws so far whenever the kept
draws asked for are there; ``f`` answers how many more draws per chain to run (0: done), and the
same chains go on from where they are, their adaptation frozen. :func:`sampling` is the same as
a generator, for a caller that answers from elsewhere (a chain group asking its peers).

Speed: every step is one leapfrog of every chain, one call of the potential on a ``C x P`` batch,
so the interpreter overhead is paid once for all chains. The trees are built iteratively (leaf by
leaf, with checkpoints for the U-turn checks of every balanced sub-tree, as NumPyro does), so each
chain runs its own iterations at its own pace: a chain whose trajectory stopped starts its next
iteration at the next step instead of waiting for the longest trajectory of the batch. The
bookkeeping works on small numpy arrays, whose operations cost a third of torch's at this size.

Every chain draws its random numbers from its own stream
(``SeedSequence(seed, spawn_key=(c,))``) in one block per iteration, indexed by position in the
tree, so a chain's draws do not depend on which other chains run beside it.

The potential is any callable ``theta (C x P) -> (U (C), dU/dtheta (C x P))`` on numpy arrays.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass

import numpy as np

from fbgp_al.worker import nuts_kernels as kernels
from fbgp_al.worker.nuts_adaptation import ChainAdaptation, NutsSettings

LOG_08 = math.log(0.8)


@dataclass
class Draws:
    """What :func:`sample` returns: per chain (``C``) and kept draw (``S``)."""

    theta: np.ndarray  # C x S x P
    accept_stat: np.ndarray  # C x S
    diverging: np.ndarray  # C x S
    tree_depth: np.ndarray  # C x S
    n_leapfrog: np.ndarray  # C x S
    step_size: np.ndarray  # C, adapted
    inverse_mass: np.ndarray  # C x P (diagonal metric) or C x P x P (dense), adapted
    warmup_divergences: np.ndarray  # C
    potential_calls: int = 0

    ARRAYS = (
        "theta",
        "accept_stat",
        "diverging",
        "tree_depth",
        "n_leapfrog",
        "step_size",
        "inverse_mass",
        "warmup_divergences",
    )

    def to_dict(self) -> dict:
        out = {name: getattr(self, name).tolist() for name in self.ARRAYS}
        return dict(out, potential_calls=self.potential_calls)

    @classmethod
    def from_dict(cls, data: dict) -> Draws:
        dtypes = {"diverging": bool, "tree_depth": np.int64, "warmup_divergences": np.int64}
        arrays = {n: np.asarray(data[n], dtype=dtypes.get(n, np.float64)) for n in cls.ARRAYS}
        return cls(**arrays, potential_calls=int(data.get("potential_calls", 0)))

    PER_DRAW = ("theta", "accept_stat", "diverging", "tree_depth", "n_leapfrog")

    @classmethod
    def concatenate(cls, parts: list[Draws]) -> Draws:
        """Chains of several runs, in the order given. Runs that sampled to a target on their
        own (chain groups on several workers) may end at different lengths: every chain then
        keeps its first draws, as many as the shortest run's (each chain's first draws after
        its warm-up are draws of the posterior as much as all of them are)."""
        kept = min(p.theta.shape[1] for p in parts)
        arrays = {
            n: np.concatenate(
                [getattr(p, n)[:, :kept] if n in cls.PER_DRAW else getattr(p, n) for p in parts]
            )
            for n in cls.ARRAYS
        }
        return cls(**arrays, potential_calls=sum(p.potential_calls for p in parts))


class _Run:
    """All chains' samplers, advanced one leapfrog step at a time (see the module docstring).

    Each step: one potential call for every chain's pending leapfrog, then the compiled
    bookkeeping of :mod:`worker.nuts_kernels`; chains whose iteration ended are then recorded or
    adapted here and start their next iteration."""

    def __init__(
        self,
        potential,
        init,
        warmup,
        samples,
        seed,
        s: NutsSettings,
        step_size=None,
        inverse_mass=None,
        chain_ids=None,
        adapt_mass=None,
    ):
        self.potential, self.s = potential, s
        self.dense = s.dense_mass
        self.warmup, self.total = warmup, warmup + samples
        C, P = init.shape
        self.C, self.P, self.K = C, P, s.max_tree_depth
        self.calls = 0
        ids = range(C) if chain_ids is None else chain_ids
        streams = [np.random.SeedSequence(seed, spawn_key=(int(c),)) for c in ids]
        self.rngs = [np.random.default_rng(stream) for stream in streams]
        self.idle = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(2**32,)))
        self.block = 2 * self.K + 2**self.K  # uniforms per iteration: 2 per doubling + 1 per leaf
        warm = inverse_mass is not None
        self.inverse_mass = np.tile(np.eye(P), (C, 1, 1))  # C x P x P, whichever the metric
        self.momentum_factor = np.tile(np.eye(P), (C, 1, 1))  # dense: L^-T, see set_inverse_mass
        if warm:
            self.set_inverse_mass(np.arange(C), inverse_mass)
        self.theta, self.U, self.grad = self.evaluate(np.array(init, dtype=np.float64))
        W = 4 * P + 1
        self.pts, self.vec = np.zeros((C, 6, W)), np.zeros((C, 5, P))
        self.ck = np.zeros((C, self.K, 5, P))
        self.sc, self.ic = np.zeros((C, 6)), np.zeros((C, 5), dtype=np.int64)
        self.log_u, self.theta_next = np.zeros((C, self.block)), np.zeros((C, P))
        self.step_size = self.sc[:, kernels.STEP]  # a view: the kernels read it there
        start = np.ones(C) if step_size is None else np.asarray(step_size, dtype=np.float64)
        tuned = warm and step_size is not None
        self.step_size[:] = start if tuned else self.initial_step_size(np.arange(C), start)
        # a warm start keeps its mass matrix and only tunes the step size again; a first guess
        # of the metric (adapt_mass) is adapted from as Stan adapts from the identity
        adapt_mass = not warm if adapt_mass is None else adapt_mass
        self.adapt = [ChainAdaptation(e, warmup, s, P, adapt_mass) for e in self.step_size]
        self.iteration = np.zeros(C, dtype=np.int64)
        self.out_theta = np.empty((C, samples, P))
        self.out_accept = np.empty((C, samples))
        self.out_diverging = np.zeros((C, samples), dtype=bool)
        self.out_depth = np.empty((C, samples), dtype=np.int64)
        self.out_leapfrog = np.empty((C, samples))
        self.warmup_divergences = np.zeros(C, dtype=np.int64)
        self.begin(np.arange(C))

    def set_inverse_mass(self, rows: np.ndarray, inverse_mass) -> None:
        """Chains ``rows`` get ``inverse_mass`` (``R x P`` diagonals or ``R x P x P``); a
        diagonal metric keeps only the diagonal of a dense one. Also the factor that draws
        momenta ``p ~ N(0, M)``: ``p = L^-T e`` with ``M^-1 = L L^T``."""
        m = np.asarray(inverse_mass, dtype=np.float64)
        if m.ndim == 2:
            m = np.stack([np.diag(row) for row in m])
        if not self.dense:
            m = np.stack([np.diag(np.diagonal(row)) for row in m])
        self.inverse_mass[rows] = m
        if self.dense:
            for r, c in enumerate(np.atleast_1d(rows)):
                self.momentum_factor[c] = _momentum_factor(m[r])

    def draw_momentum(self, c: int, rng=None) -> np.ndarray:
        e = (self.rngs[c] if rng is None else rng).standard_normal(self.P)
        if self.dense:
            return self.momentum_factor[c] @ e
        return e / np.sqrt(np.diagonal(self.inverse_mass[c]))

    def extend(self, more: int) -> None:
        """Every chain runs ``more`` kept iterations beyond those asked for so far (the caller
        then begins each chain's next iteration: the one a chain riding along has in flight is
        dropped)."""
        C = self.C
        self.total += more

        def grow(a, fill):
            return np.concatenate([a, np.full((C, more) + a.shape[2:], fill, dtype=a.dtype)], 1)

        self.out_theta = grow(self.out_theta, np.nan)
        self.out_accept = grow(self.out_accept, np.nan)
        self.out_diverging = grow(self.out_diverging, False)
        self.out_depth = grow(self.out_depth, 0)
        self.out_leapfrog = grow(self.out_leapfrog, np.nan)

    def evaluate(self, theta):
        self.calls += 1
        value, grad = self.potential(theta)
        return theta, value, grad

    def kinetic(self, p, rows=slice(None)):
        return 0.5 * np.einsum("ci,cij,cj->c", p, self.inverse_mass[rows], p)

    def initial_step_size(self, rows: np.ndarray, step_size: np.ndarray) -> np.ndarray:
        """Stan's heuristic for chains ``rows``: double or halve the step until the acceptance
        of one leapfrog crosses 0.8 (one momentum draw per chain)."""
        inv_mass = self.inverse_mass[rows]
        p = np.stack([self.draw_momentum(c) for c in rows])
        theta, U, grad = self.theta[rows], self.U[rows], self.grad[rows]
        h0 = U + self.kinetic(p, rows)

        def log_accept(eps):
            p_half = p - 0.5 * eps[:, None] * grad
            step = np.einsum("cij,cj->ci", inv_mass, p_half)
            _, U1, g1 = self.evaluate(theta + eps[:, None] * step)
            p1 = p_half - 0.5 * eps[:, None] * g1
            d = h0 - (U1 + self.kinetic(p1, rows))
            return np.where(np.isnan(d), -np.inf, d)

        eps = np.array(step_size, dtype=np.float64)
        direction = np.where(log_accept(eps) > LOG_08, 1.0, -1.0)
        searching = np.ones(len(rows), dtype=bool)
        for _ in range(60):
            eps = np.where(searching, eps * 2.0**direction, eps).clip(1e-10, 1e5)
            d = log_accept(eps)
            done = ((direction > 0) & ~(d > LOG_08)) | ((direction < 0) & ~(d < LOG_08))
            searching &= ~done
            if not searching.any():
                break
        return eps

    def begin(self, rows: np.ndarray) -> None:
        """Fresh momentum and uniforms, then a first doubling, for chains ``rows``. A chain that
        has run all its iterations rides along on numbers of a stream of no chain's, so that
        its own stream goes on where its last iteration left it, however long it rode along."""
        p0 = np.zeros((self.C, self.P))
        for c in rows:
            rng = self.rngs[c] if self.iteration[c] < self.total else self.idle
            p0[c] = self.draw_momentum(c, rng)
            self.log_u[c] = np.log(rng.random(self.block))
        kernels.begin_iterations(
            rows,
            p0,
            self.theta,
            self.U,
            self.grad,
            self.pts,
            self.vec,
            self.sc,
            self.ic,
            self.log_u,
            self.inverse_mass,
            self.theta_next,
        )

    def finish_iteration(self, c: int) -> None:
        """Chain ``c`` moves to its proposal; record it, or adapt during warm-up."""
        i = int(self.iteration[c])
        if i >= self.total:
            return  # a finished chain riding along
        P = self.P
        point = self.pts[c, kernels.PROP]
        self.theta[c], self.U[c], self.grad[c] = point[:P], point[P], point[P + 1 : 2 * P + 1]
        n_leapfrog = self.sc[c, kernels.N_LEAPFROG]
        accept_stat = self.sc[c, kernels.SUM_ACCEPT] / max(n_leapfrog, 1.0)
        diverged = bool(self.ic[c, kernels.DIVERGED])
        if i < self.warmup:
            self.warmup_divergences[c] += diverged
            adapt = self.adapt[c]
            self.step_size[c] = adapt.update_step_size(accept_stat)
            inverse_mass = adapt.observe(i, self.theta[c])
            if inverse_mass is not None:
                rows = np.array([c])
                self.set_inverse_mass(rows, inverse_mass[None])
                self.step_size[c] = self.initial_step_size(rows, self.step_size[rows])[0]
                adapt.restart(self.step_size[c])
            if i == self.warmup - 1:
                self.step_size[c] = adapt.final_step_size()
        else:
            j = i - self.warmup
            self.out_theta[c, j] = self.theta[c]
            self.out_accept[c, j] = accept_stat
            self.out_diverging[c, j] = diverged
            self.out_depth[c, j] = self.ic[c, kernels.DEPTH] + 1
            self.out_leapfrog[c, j] = n_leapfrog
        self.iteration[c] = i + 1

    def checks(self) -> Checks:
        """The kept draws so far each time those asked for are there, each answered with how
        many more per chain to run (0: stop); the draws at the end."""
        while True:
            with np.errstate(all="ignore"):  # finished or diverged chains ride along
                self.advance_all()
            extra = int((yield self.draws()))
            if extra <= 0:
                return self.draws()
            with np.errstate(all="ignore"):
                self.extend(extra)
                self.begin(np.arange(self.C))  # each chain's next iteration, from its own stream

    def advance_all(self) -> None:
        """Steps until every chain has run ``self.total`` iterations."""
        max_delta_h = float(self.s.max_delta_h)
        while (self.iteration < self.total).any():
            _, U, grad = self.evaluate(self.theta_next)
            kernels.advance(
                np.asarray(U, dtype=np.float64),
                np.asarray(grad, dtype=np.float64),
                self.pts,
                self.vec,
                self.ck,
                self.sc,
                self.ic,
                self.log_u,
                self.inverse_mass,
                self.theta_next,
                max_delta_h,
            )
            stopped = np.flatnonzero(self.ic[:, kernels.STOPPED])
            if len(stopped):
                for c in stopped:
                    self.finish_iteration(int(c))
                self.begin(stopped)  # finished chains too: they ride along until all are done

    def draws(self) -> Draws:
        """The kept draws so far, and the adaptation (diagonals for a diagonal metric)."""
        m = self.inverse_mass
        return Draws(
            theta=self.out_theta.copy(),
            accept_stat=self.out_accept.copy(),
            diverging=self.out_diverging.copy(),
            tree_depth=self.out_depth.copy(),
            n_leapfrog=self.out_leapfrog.copy(),
            step_size=self.step_size.copy(),
            inverse_mass=m.copy() if self.dense else np.diagonal(m, axis1=1, axis2=2).copy(),
            warmup_divergences=self.warmup_divergences.copy(),
            potential_calls=self.calls,
        )


def _momentum_factor(inverse_mass: np.ndarray) -> np.ndarray:
    """``L^-T`` with ``inverse_mass = L L^T`` (jittered if it is not positive definite)."""
    m = 0.5 * (inverse_mass + inverse_mass.T)
    for jitter in (0.0, 1e-10, 1e-8, 1e-6, 1e-4):
        try:
            chol = np.linalg.cholesky(m + jitter * np.eye(len(m)))
            return np.linalg.inv(chol).T
        except np.linalg.LinAlgError:
            continue
    return np.diag(1.0 / np.sqrt(np.clip(np.diagonal(m), 1e-12, None)))


Checks = Generator[Draws, int, Draws]


def answered(checks: Checks, more=None) -> Draws:
    """Drive a sampling's ``checks`` in this process: each answered by ``more`` (a callable
    ``Draws -> int``; None: 0, the draws asked for and no more); the draws at the end."""
    try:
        draws = next(checks)
        while True:
            draws = checks.send(int(more(draws)) if more is not None else 0)
    except StopIteration as done:
        return done.value


def sample(*args, more=None, **kwargs) -> Draws:
    """:func:`sampling` (the same arguments), its checks answered here by ``more``: a callable
    ``Draws -> int``, asked each time the kept draws asked for so far are there, how many more
    per chain to run (0: stop)."""
    return answered(sampling(*args, **kwargs), more)


def sampling(
    potential,
    init: np.ndarray,
    warmup: int,
    samples: int,
    seed: int,
    settings: NutsSettings | None = None,
    *,
    step_size=None,
    inverse_mass=None,
    chain_ids=None,
    adapt_mass=None,
) -> Checks:
    """Run NUTS from ``init`` (``C x P``, one row per chain): ``warmup`` adapting iterations, then
    ``samples`` kept ones per chain, and as many more as the caller asks at each check: a
    generator that yields the kept draws each time those asked for so far are there, is sent
    how many more per chain to run (0: stop), and returns the draws.

    A warm start passes the adapted ``step_size`` (``C``) and ``inverse_mass`` (``C x P``
    diagonals or ``C x P x P``) of an earlier run: the mass matrix is kept and the warm-up only
    tunes the step size from there; with ``adapt_mass`` the ``inverse_mass`` is only the first
    guess that the warm-up's windows adapt from (and ``step_size``, if None, is found by Stan's
    heuristic). ``chain_ids``: the global numbers of these chains (default
    ``0..C-1``), which key their random streams: chain 3 draws the same whether it runs alone, in
    a group or with all the others."""
    s = settings or NutsSettings()
    with np.errstate(all="ignore"):  # finished or diverged chains ride along and may overflow
        run = _Run(
            potential,
            init,
            warmup,
            samples,
            seed,
            s,
            step_size,
            inverse_mass,
            chain_ids,
            adapt_mass,
        )
    return (yield from run.checks())
