"""The No-U-Turn Sampler for many chains over one batched potential.

Multinomial NUTS (Betancourt 2017) as Stan runs it: trajectories doubled in a random direction,
multinomial sampling within subtrees and biased progressive sampling between them, the generalized
U-turn criterion with the extra checks across merged subtrees, divergence when the energy error
exceeds ``max_delta_h``; warm-up by dual averaging of the step size (target acceptance
``target_accept``) and a diagonal mass matrix estimated in Stan's doubling windows.

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
from dataclasses import dataclass

import numpy as np

LOG_08 = math.log(0.8)


@dataclass(frozen=True)
class NutsSettings:
    target_accept: float = 0.8
    max_tree_depth: int = 10
    max_delta_h: float = 1000.0
    # Stan's dual-averaging constants
    gamma: float = 0.05
    t0: float = 10.0
    kappa: float = 0.75
    # Stan's adaptation windows (scaled down for short warm-ups, as Stan does)
    init_buffer: int = 75
    term_buffer: int = 50
    base_window: int = 25


@dataclass
class Draws:
    """What :func:`sample` returns: per chain (``C``) and kept draw (``S``)."""

    theta: np.ndarray  # C x S x P
    accept_stat: np.ndarray  # C x S
    diverging: np.ndarray  # C x S
    tree_depth: np.ndarray  # C x S
    n_leapfrog: np.ndarray  # C x S
    step_size: np.ndarray  # C, adapted
    inverse_mass: np.ndarray  # C x P, adapted
    warmup_divergences: np.ndarray  # C
    potential_calls: int = 0


def adaptation_windows(warmup: int, s: NutsSettings) -> list[tuple[int, int]]:
    """Stan's slow-adaptation windows ``[(start, end), ...]`` for the mass matrix."""
    if warmup < 20:
        return []
    init, term, base = s.init_buffer, s.term_buffer, s.base_window
    if init + base + term > warmup:
        init, term = int(0.15 * warmup), int(0.1 * warmup)
        base = warmup - init - term
    slow_end = warmup - term
    windows, start, size = [], init, base
    while start < slow_end:
        end = start + size
        if end + 2 * size > slow_end:
            end = slow_end
        windows.append((start, end))
        start, size = end, 2 * size
    return windows


def _trailing_ones(n: np.ndarray) -> np.ndarray:
    """Number of trailing one bits of each (non-negative) integer."""
    m = n + 1
    return np.log2(m & -m).astype(np.int64)


class _ChainAdaptation:
    """Warm-up of one chain: dual averaging of the step size (Stan) and windowed variance."""

    def __init__(self, step_size: float, warmup: int, s: NutsSettings, dim: int):
        self.s = s
        self.warmup = warmup
        self.windows = adaptation_windows(warmup, s)
        self.restart(step_size)
        self.count, self.mean, self.m2 = 0, np.zeros(dim), np.zeros(dim)

    def restart(self, step_size: float) -> None:
        self.mu = math.log(10 * step_size)
        self.t, self.s_bar, self.x_bar = 0, 0.0, 0.0

    def update_step_size(self, accept_stat: float) -> float:
        s = self.s
        self.t += 1
        eta = 1.0 / (self.t + s.t0)
        self.s_bar = (1 - eta) * self.s_bar + eta * (s.target_accept - accept_stat)
        x = self.mu - math.sqrt(self.t) / s.gamma * self.s_bar
        weight = self.t ** (-s.kappa)
        self.x_bar = weight * x + (1 - weight) * self.x_bar
        return math.exp(x)

    def final_step_size(self) -> float:
        return math.exp(self.x_bar)

    def observe(self, iteration: int, theta: np.ndarray) -> np.ndarray | None:
        """Add a warm-up draw to its window; at a window's end, the new inverse mass matrix."""
        for start, end in self.windows:
            if start <= iteration < end:
                self.count += 1
                delta = theta - self.mean
                self.mean += delta / self.count
                self.m2 += delta * (theta - self.mean)
                if iteration == end - 1:
                    n = self.count
                    variance = self.m2 / max(n - 1, 1)
                    self.count, self.mean, self.m2 = 0, np.zeros_like(theta), np.zeros_like(theta)
                    return (n / (n + 5.0)) * variance + 1e-3 * (5.0 / (n + 5.0))
        return None


class _Run:
    """All chains' samplers, advanced one leapfrog step at a time (see the module docstring)."""

    def __init__(self, potential, init, warmup, samples, seed, s: NutsSettings):
        self.potential, self.s = potential, s
        self.warmup, self.total = warmup, warmup + samples
        C, P = init.shape
        self.C, self.P, self.K = C, P, s.max_tree_depth
        self.calls = 0
        streams = [np.random.SeedSequence(seed, spawn_key=(c,)) for c in range(C)]
        self.rngs = [np.random.default_rng(stream) for stream in streams]
        self.block = 2 * self.K + 2**self.K  # uniforms per iteration: 2 per doubling + 1 per leaf
        self.inverse_mass = np.ones((C, P))
        self.theta, self.U, self.grad = self.evaluate(np.array(init, dtype=np.float64))
        self.step_size = self.initial_step_size(np.arange(C), np.ones(C))
        self.adapt = [_ChainAdaptation(e, warmup, s, P) for e in self.step_size]
        self.iteration = np.zeros(C, dtype=np.int64)
        self.out_theta = np.empty((C, samples, P))
        self.out_accept = np.empty((C, samples))
        self.out_diverging = np.zeros((C, samples), dtype=bool)
        self.out_depth = np.empty((C, samples), dtype=np.int64)
        self.out_leapfrog = np.empty((C, samples))
        self.warmup_divergences = np.zeros(C, dtype=np.int64)
        self._allocate()
        self.start_iterations(np.ones(C, dtype=bool))

    # -- potential and dynamics ---------------------------------------------------------------
    def evaluate(self, theta):
        self.calls += 1
        value, grad = self.potential(theta)
        return theta, value, grad

    def kinetic(self, p, rows=slice(None)):
        return 0.5 * (p * p * self.inverse_mass[rows]).sum(-1)

    def initial_step_size(self, rows: np.ndarray, step_size: np.ndarray) -> np.ndarray:
        """Stan's heuristic for chains ``rows``: double or halve the step until the acceptance
        of one leapfrog crosses 0.8 (one momentum draw per chain)."""
        inv_mass = self.inverse_mass[rows]
        p = np.stack([self.rngs[c].standard_normal(self.P) for c in rows]) / np.sqrt(inv_mass)
        theta, U, grad = self.theta[rows], self.U[rows], self.grad[rows]
        h0 = U + self.kinetic(p, rows)

        def log_accept(eps):
            p_half = p - 0.5 * eps[:, None] * grad
            _, U1, g1 = self.evaluate(theta + eps[:, None] * inv_mass * p_half)
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

    # -- per-iteration state -------------------------------------------------------------------
    # A point of a trajectory is one row packed as [theta, U, grad, p, p_sharp] (width 4P + 1),
    # so that choosing between points per chain is one np.where, not five.
    def _allocate(self):
        C, P, K = self.C, self.P, self.K
        self.W = 4 * P + 1
        self.TH, self.UU = slice(0, P), P
        self.G, self.PP, self.SH = (
            slice(P + 1, 2 * P + 1),
            slice(2 * P + 1, 3 * P + 1),
            slice(3 * P + 1, None),
        )
        z = np.zeros
        self.h0, self.uniforms = z(C), z((C, self.block))
        self.edge = z((C, self.W))  # the last leaf: the next leapfrog starts here
        self.minus, self.plus = z((C, self.W)), z((C, self.W))
        self.proposal, self.sub_proposal, self.sub_start = (
            z((C, self.W)),
            z((C, self.W)),
            z((C, self.W)),
        )
        self.log_w, self.rho, self.sub_log_w, self.sub_rho = z(C), z((C, P)), z(C), z((C, P))
        self.depth, self.leaf = z(C, dtype=np.int64), z(C, dtype=np.int64)
        self.forward = z(C, dtype=bool)
        self.prev = z((C, 2 * P))  # p, p_sharp of the previous leaf
        # checkpoint k holds the latest leaf whose index is a multiple of 2^k, packed as
        # [p_sharp, p, sum of momenta before it, p and p_sharp of the leaf before it]
        self.ck = z((C, K, 5 * P))
        self.powers = 2 ** np.arange(K)
        self.sum_accept, self.n_leapfrog = z(C), z(C)
        self.diverged = z(C, dtype=bool)

    def start_iterations(self, mask: np.ndarray) -> None:
        """Fresh momentum and a first doubling for the chains in ``mask``."""
        rows = np.flatnonzero(mask)
        if len(rows) == 0:
            return
        normals = np.zeros((self.C, self.P))
        normals[rows] = np.stack([self.rngs[c].standard_normal(self.P) for c in rows])
        self.uniforms[rows] = np.stack([self.rngs[c].random(self.block) for c in rows])
        p = normals / np.sqrt(self.inverse_mass)
        point = np.concatenate(
            [self.theta, self.U[:, None], self.grad, p, self.inverse_mass * p], 1
        )
        m = mask[:, None]
        self.h0 = np.where(mask, self.U + self.kinetic(p), self.h0)
        self.minus = np.where(m, point, self.minus)
        self.plus = np.where(m, point, self.plus)
        self.proposal = np.where(m, point, self.proposal)
        self.log_w = np.where(mask, 0.0, self.log_w)
        self.rho = np.where(m, p, self.rho)
        self.depth[mask] = 0
        self.sum_accept[mask], self.n_leapfrog[mask], self.diverged[mask] = 0.0, 0.0, False
        self.start_subtrees(mask)

    def start_subtrees(self, mask: np.ndarray) -> None:
        """Pick a direction for doubling ``depth`` and grow from that end of the trajectory."""
        direction = self.uniforms[np.arange(self.C), 2 * self.depth] < 0.5
        self.forward = np.where(mask, direction, self.forward)
        from_end = np.where(self.forward[:, None], self.plus, self.minus)
        self.edge = np.where(mask[:, None], from_end, self.edge)
        self.leaf[mask] = 0
        self.sub_rho = np.where(mask[:, None], 0.0, self.sub_rho)

    # -- one step ----------------------------------------------------------------------------
    def step(self) -> None:
        """One leapfrog for every chain, then the tree bookkeeping of each."""
        eps = np.where(self.forward, self.step_size, -self.step_size)[:, None]
        edge = self.edge
        p = edge[:, self.PP] - 0.5 * eps * edge[:, self.G]
        theta, U, grad = self.evaluate(edge[:, self.TH] + eps * self.inverse_mass * p)
        p = p - 0.5 * eps * grad
        sharp = self.inverse_mass * p
        leaf = np.concatenate([theta, U[:, None], grad, p, sharp], 1)
        delta = U + 0.5 * np.add.reduce(p * sharp, -1) - self.h0
        delta = np.where(np.isnan(delta), np.inf, delta)
        diverging = delta > self.s.max_delta_h
        self.sum_accept += np.minimum(np.exp(-delta), 1.0)
        self.n_leapfrog += 1.0
        self.edge = leaf

        # multinomial sampling within the subtree, leaf by leaf
        n = self.leaf
        first = n == 0
        new_log_w = np.where(first, -delta, np.logaddexp(self.sub_log_w, -delta))
        u = self.uniforms[np.arange(self.C), 2 * self.K + (2**self.depth - 1) + n]
        take = first | (np.log(u) < -delta - new_log_w)
        self.sub_log_w = new_log_w
        self.sub_proposal = np.where(take[:, None], leaf, self.sub_proposal)
        self.sub_start = np.where(first[:, None], leaf, self.sub_start)
        rho_before = self.sub_rho
        self.sub_rho = rho_before + p

        # checkpoints: this leaf starts every balanced block of size 2^k with 2^k | n
        store = (n[:, None] % self.powers) == 0  # C x K
        np.copyto(self.ck, np.concatenate([sharp, p, rho_before, self.prev], 1)[:, None, :],
                  where=store[:, :, None])  # fmt: skip
        self.prev = np.concatenate([p, sharp], 1)
        turned = self.blocks_turned(_trailing_ones(n), sharp)
        invalid = turned | diverging
        self.diverged |= diverging
        self.leaf = n + 1
        done = invalid | (self.leaf == 2**self.depth)
        if done.any():
            self.end_subtrees(done, invalid)

    def blocks_turned(self, completed: np.ndarray, sharp: np.ndarray) -> np.ndarray:
        """U-turn checks of the balanced blocks that end at this leaf: block ``k`` (``2^k``
        leaves, ``1 <= k <= completed``) starts at the leaf in checkpoint ``k``; its halves meet
        at the leaf in checkpoint ``k - 1``, whose predecessor ends the first half."""
        kmax = int(completed.max())
        if kmax == 0:
            return np.zeros(self.C, dtype=bool)
        P = self.P
        start, mid = self.ck[:, 1 : kmax + 1], self.ck[:, :kmax]  # C x k x 5P
        start_sharp, start_rho = start[..., :P], start[..., 2 * P : 3 * P]
        mid_sharp, mid_p, mid_rho = mid[..., :P], mid[..., P : 2 * P], mid[..., 2 * P : 3 * P]
        before_mid_p, before_mid_sharp = mid[..., 3 * P : 4 * P], mid[..., 4 * P :]
        rho, end_sharp = self.sub_rho[:, None, :], sharp[:, None, :]
        turned = (
            _turned(rho - start_rho, start_sharp, end_sharp)
            | _turned(mid_rho - start_rho + mid_p, start_sharp, mid_sharp)
            | _turned(rho - mid_rho + before_mid_p, before_mid_sharp, end_sharp)
        )  # C x k
        return (turned & (np.arange(1, kmax + 1) <= completed[:, None])).any(1)

    def end_subtrees(self, done: np.ndarray, invalid: np.ndarray) -> None:
        """Merge finished subtrees into their trajectories; end the iterations that stop."""
        valid = done & ~invalid
        u = self.uniforms[np.arange(self.C), 2 * self.depth + 1]
        accept = valid & (np.log(u) < self.sub_log_w - self.log_w)
        self.proposal = np.where(accept[:, None], self.sub_proposal, self.proposal)
        fwd = self.forward[:, None]
        old_start = np.where(fwd, self.minus, self.plus)
        old_end = np.where(fwd, self.plus, self.minus)
        PP, SH = self.PP, self.SH
        sub_rho, rho, new_sharp = self.sub_rho, self.rho, self.edge[:, SH]
        turned = (
            _turned(rho + sub_rho, old_start[:, SH], new_sharp)
            | _turned(rho + self.sub_start[:, PP], old_start[:, SH], self.sub_start[:, SH])
            | _turned(sub_rho + old_end[:, PP], old_end[:, SH], new_sharp)
        )
        self.plus = np.where((valid & self.forward)[:, None], self.edge, self.plus)
        self.minus = np.where((valid & ~self.forward)[:, None], self.edge, self.minus)
        self.rho = np.where(valid[:, None], rho + sub_rho, rho)
        self.log_w = np.where(valid, np.logaddexp(self.log_w, self.sub_log_w), self.log_w)
        stop = done & (~valid | turned | (self.depth + 1 >= self.K))
        going_on = done & ~stop
        if going_on.any():
            self.depth += going_on
            self.start_subtrees(going_on)
        if stop.any():
            for c in np.flatnonzero(stop):
                self.finish_iteration(int(c))
            self.start_iterations(stop)  # finished chains too: they ride along until all are done

    def finish_iteration(self, c: int) -> None:
        """Chain ``c`` moves to its proposal; record it, or adapt during warm-up."""
        i = int(self.iteration[c])
        if i >= self.total:
            return  # a finished chain riding along
        point = self.proposal[c]
        self.theta[c], self.U[c], self.grad[c] = point[self.TH], point[self.UU], point[self.G]
        accept_stat = self.sum_accept[c] / max(self.n_leapfrog[c], 1.0)
        if i < self.warmup:
            self.warmup_divergences[c] += self.diverged[c]
            adapt = self.adapt[c]
            self.step_size[c] = adapt.update_step_size(accept_stat)
            inverse_mass = adapt.observe(i, self.theta[c])
            if inverse_mass is not None:
                self.inverse_mass[c] = inverse_mass
                self.step_size[c] = self.initial_step_size(
                    np.array([c]), self.step_size[c : c + 1]
                )[0]
                adapt.restart(self.step_size[c])
            if i == self.warmup - 1:
                self.step_size[c] = adapt.final_step_size()
        else:
            j = i - self.warmup
            self.out_theta[c, j] = self.theta[c]
            self.out_accept[c, j] = accept_stat
            self.out_diverging[c, j] = self.diverged[c]
            self.out_depth[c, j] = self.depth[c] + 1
            self.out_leapfrog[c, j] = self.n_leapfrog[c]
        self.iteration[c] = i + 1

    def run(self) -> Draws:
        while (self.iteration < self.total).any():
            self.step()
        return Draws(
            theta=self.out_theta, accept_stat=self.out_accept, diverging=self.out_diverging,
            tree_depth=self.out_depth, n_leapfrog=self.out_leapfrog, step_size=self.step_size,
            inverse_mass=self.inverse_mass, warmup_divergences=self.warmup_divergences,
            potential_calls=self.calls,
        )  # fmt: skip


def _turned(rho: np.ndarray, sharp_a: np.ndarray, sharp_b: np.ndarray) -> np.ndarray:
    """A span with momentum sum ``rho`` turned if ``p_sharp . rho <= 0`` at either end."""
    dot = np.add.reduce  # without ndarray.sum's Python wrapper: this runs a million times
    return np.minimum(dot(sharp_a * rho, -1), dot(sharp_b * rho, -1)) <= 0


def sample(
    potential,
    init: np.ndarray,
    warmup: int,
    samples: int,
    seed: int,
    settings: NutsSettings | None = None,
) -> Draws:
    """Run NUTS from ``init`` (``C x P``, one row per chain): ``warmup`` adapting iterations, then
    ``samples`` kept ones per chain."""
    with np.errstate(all="ignore"):  # finished or diverged chains ride along and may overflow
        return _Run(potential, init, warmup, samples, seed, settings or NutsSettings()).run()
