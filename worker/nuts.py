"""The No-U-Turn Sampler, many chains advanced in lockstep over one batched potential.

Multinomial NUTS (Betancourt 2017) as Stan runs it: trajectories doubled in a random direction,
multinomial sampling within subtrees and biased progressive sampling between them, the generalized
U-turn criterion with the extra checks across merged subtrees, divergence when the energy error
exceeds ``max_delta_h``; warm-up by dual averaging of the step size (target acceptance ``delta``)
and a diagonal mass matrix estimated in Stan's doubling windows.

All ``C`` chains take their leapfrog steps together, so each step is one call of the potential on a
``C x P`` batch: the per-step interpreter overhead is paid once for all chains, not once per chain.
A chain whose trajectory has already stopped rides along and ignores what is computed for it.
The tree bookkeeping works on small numpy arrays (float64), whose operations cost a third of
torch's at this size; the potential may compute in anything.

Every chain draws its random numbers from its own stream
(``SeedSequence(seed, spawn_key=(c,))``) in fixed-size blocks per iteration, indexed by position
in the tree, so a chain's draws do not depend on which other chains it runs beside.

The potential is any callable ``theta (C x P) -> (U (C), dU/dtheta (C x P))`` on numpy arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

LOG_HALF = math.log(0.5)


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
class State:
    theta: np.ndarray  # C x P
    potential: np.ndarray  # C
    grad: np.ndarray  # C x P


def _select(mask: np.ndarray, a: State, b: State) -> State:
    """Per chain: ``a`` where ``mask`` else ``b``."""
    m = mask[:, None]
    return State(
        np.where(m, a.theta, b.theta),
        np.where(mask, a.potential, b.potential),
        np.where(m, a.grad, b.grad),
    )


@dataclass
class Ends:
    """Momenta (``p``) and velocities (``p_sharp = M^-1 p``) at both ends of a trajectory, in the
    order it was built: ``start`` is next to where it grew from."""

    p_start: np.ndarray
    sharp_start: np.ndarray
    p_end: np.ndarray
    sharp_end: np.ndarray


@dataclass
class Tree:
    """A subtree in the order it was built."""

    ends: Ends
    end: State  # where the next subtree grows from
    proposal: State
    log_weight: np.ndarray  # log sum over leaves of exp(H0 - H)
    rho: np.ndarray  # sum of momenta
    invalid: np.ndarray  # turned or diverged: the subtree is not used
    diverging: np.ndarray
    sum_accept: np.ndarray
    n_leapfrog: np.ndarray


@dataclass
class Draws:
    """What :func:`sample` returns. Arrays are per chain (``C``) and per kept draw (``S``)."""

    theta: np.ndarray  # C x S x P
    accept_stat: np.ndarray  # C x S
    diverging: np.ndarray  # C x S
    tree_depth: np.ndarray  # C x S
    n_leapfrog: np.ndarray  # C x S
    step_size: np.ndarray  # C, adapted
    inverse_mass: np.ndarray  # C x P, adapted
    warmup_divergences: np.ndarray  # C
    gradient_evaluations: int = 0
    extra: dict = field(default_factory=dict)


class _Streams:
    """One numpy generator per chain; blocks of draws stacked into ``C x k`` tensors."""

    def __init__(self, seed: int, chains: int):
        self.rngs = [
            np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(c,))))
            for c in range(chains)
        ]

    def normal(self, k: int) -> np.ndarray:
        return np.stack([r.standard_normal(k) for r in self.rngs])

    def uniform(self, k: int) -> np.ndarray:
        return np.stack([r.random(k) for r in self.rngs])


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


class Sampler:
    """NUTS over ``potential`` for ``C`` chains; see the module docstring."""

    def __init__(self, potential, settings: NutsSettings, streams: _Streams, inverse_mass):
        self.potential = potential
        self.s = settings
        self.streams = streams
        self.inverse_mass = inverse_mass  # C x P

    # -- dynamics ---------------------------------------------------------------------------
    def evaluate(self, theta: np.ndarray) -> State:
        value, grad = self.potential(theta)
        return State(theta, value, grad)

    def kinetic(self, p: np.ndarray) -> np.ndarray:
        return 0.5 * (p * p * self.inverse_mass).sum(-1)

    def leapfrog(self, state: State, p: np.ndarray, eps: np.ndarray) -> tuple[State, np.ndarray]:
        """One step of size ``eps`` (``C``, signed by direction)."""
        e = eps[:, None]
        p = p - 0.5 * e * state.grad
        new = self.evaluate(state.theta + e * self.inverse_mass * p)
        return new, p - 0.5 * e * new.grad

    @staticmethod
    def merged_turned(a: Ends, a_rho, b: Ends, b_rho) -> np.ndarray:
        """Generalized U-turn criterion for subtree ``a`` followed by ``b``: the whole, and Stan's
        two extra checks that each half plus the neighbouring point of the other half has not
        turned. A span turned when ``p_sharp . rho <= 0`` at either of its ends."""
        rho = np.stack([a_rho + b_rho, a_rho + b.p_start, b_rho + a.p_end])  # 3 x C x P
        left = np.stack([a.sharp_start, a.sharp_start, a.sharp_end])
        right = np.stack([b.sharp_end, b.sharp_start, b.sharp_end])
        return (((left * rho).sum(-1) <= 0) | ((right * rho).sum(-1) <= 0)).any(0)

    # -- one transition ---------------------------------------------------------------------
    def build(self, edge, p_edge, eps, depth, h0, uniforms, index, active) -> Tree:
        """A subtree of ``2^depth`` leapfrog steps from ``edge``. ``index`` numbers this node's
        merge (pre-order) to pick its column of ``uniforms``."""
        if depth == 0:
            new, p = self.leapfrog(edge, p_edge, eps)
            delta = new.potential + self.kinetic(p) - h0
            delta = np.where(np.isnan(delta), np.inf, delta)
            diverging = delta > self.s.max_delta_h
            sharp = self.inverse_mass * p
            return Tree(
                ends=Ends(p, sharp, p, sharp), end=new, proposal=new,
                log_weight=-delta, rho=p, invalid=diverging, diverging=diverging,
                sum_accept=np.minimum(np.exp(-delta), 1.0), n_leapfrog=np.ones_like(delta),
            )  # fmt: skip
        a = self.build(edge, p_edge, eps, depth - 1, h0, uniforms, index + 1, active)
        if not (active & ~a.invalid).any():
            return a
        b_index = index + 2 ** (depth - 1)
        b = self.build(a.end, a.ends.p_end, eps, depth - 1, h0, uniforms, b_index, active)
        log_weight = np.logaddexp(a.log_weight, b.log_weight)
        take_b = np.log(uniforms[:, index]) < b.log_weight - log_weight
        turned = self.merged_turned(a.ends, a.rho, b.ends, b.rho)
        zero = np.zeros_like(log_weight)
        ends = Ends(a.ends.p_start, a.ends.sharp_start, b.ends.p_end, b.ends.sharp_end)
        return Tree(
            ends=ends, end=b.end,
            proposal=_select(take_b, b.proposal, a.proposal),
            log_weight=log_weight, rho=a.rho + b.rho,
            invalid=a.invalid | b.invalid | turned,
            diverging=a.diverging | (~a.invalid & b.diverging),
            sum_accept=a.sum_accept + np.where(a.invalid, zero, b.sum_accept),
            n_leapfrog=a.n_leapfrog + np.where(a.invalid, zero, b.n_leapfrog),
        )  # fmt: skip

    def transition(self, state: State, step_size: np.ndarray):
        """One NUTS iteration for every chain; returns the new state and its statistics."""
        max_depth = self.s.max_tree_depth
        p0 = self.streams.normal(state.theta.shape[1]) / np.sqrt(self.inverse_mass)
        uniforms = self.streams.uniform(2 * max_depth + 2**max_depth)
        merges = uniforms[:, 2 * max_depth :]
        h0 = state.potential + self.kinetic(p0)
        sharp0 = self.inverse_mass * p0
        minus, plus = state, state
        p_minus, p_plus, sharp_minus, sharp_plus = p0, p0, sharp0, sharp0
        proposal, rho = state, p0
        log_weight = np.zeros_like(h0)
        chains = len(h0)
        active = np.ones(chains, dtype=bool)
        diverging = np.zeros(chains, dtype=bool)
        sum_accept, n_leapfrog = np.zeros_like(h0), np.zeros_like(h0)
        depth = np.zeros(chains, dtype=np.int64)
        offset = 0
        for j in range(max_depth):
            forward = uniforms[:, 2 * j] < 0.5
            fwd = forward[:, None]
            eps = np.where(forward, step_size, -step_size)
            edge = _select(forward, plus, minus)
            tree = self.build(
                edge, np.where(fwd, p_plus, p_minus), eps, j, h0, merges, offset, active
            )
            offset += 2**j - 1
            sum_accept += np.where(active, tree.sum_accept, 0.0)
            n_leapfrog += np.where(active, tree.n_leapfrog, 0.0)
            diverging |= active & tree.diverging
            depth = np.where(active, j + 1, depth)
            valid = active & ~tree.invalid
            accept = valid & (np.log(uniforms[:, 2 * j + 1]) < tree.log_weight - log_weight)
            proposal = _select(accept, tree.proposal, proposal)
            # the old trajectory, oriented in the direction of travel, then the new subtree
            old = Ends(
                np.where(fwd, p_minus, p_plus), np.where(fwd, sharp_minus, sharp_plus),
                np.where(fwd, p_plus, p_minus), np.where(fwd, sharp_plus, sharp_minus),
            )  # fmt: skip
            turned = self.merged_turned(old, rho, tree.ends, tree.rho)
            grow_plus, grow_minus = (valid & forward)[:, None], (valid & ~forward)[:, None]
            plus = _select(grow_plus[:, 0], tree.end, plus)
            p_plus = np.where(grow_plus, tree.ends.p_end, p_plus)
            sharp_plus = np.where(grow_plus, tree.ends.sharp_end, sharp_plus)
            minus = _select(grow_minus[:, 0], tree.end, minus)
            p_minus = np.where(grow_minus, tree.ends.p_end, p_minus)
            sharp_minus = np.where(grow_minus, tree.ends.sharp_end, sharp_minus)
            rho = np.where(valid[:, None], rho + tree.rho, rho)
            log_weight = np.where(valid, np.logaddexp(log_weight, tree.log_weight), log_weight)
            active = valid & ~turned
            if not active.any():
                break
        accept_stat = sum_accept / np.maximum(n_leapfrog, 1.0)
        return proposal, accept_stat, diverging, depth, n_leapfrog

    # -- step size ----------------------------------------------------------------------------
    def initial_step_size(self, state: State, step_size: np.ndarray) -> np.ndarray:
        """Stan's heuristic: double or halve until one leapfrog's acceptance crosses 0.8."""
        p = self.streams.normal(state.theta.shape[1]) / np.sqrt(self.inverse_mass)
        h0 = state.potential + self.kinetic(p)
        log_target = math.log(0.8)

        def log_accept(eps):
            new, p_new = self.leapfrog(state, p, eps)
            d = h0 - (new.potential + self.kinetic(p_new))
            return np.where(np.isnan(d), -np.inf, d)

        eps = step_size.copy()
        direction = np.where(log_accept(eps) > log_target, 1.0, -1.0)
        searching = np.ones(len(eps), dtype=bool)
        for _ in range(60):
            eps = np.where(searching, eps * 2.0**direction, eps).clip(1e-10, 1e5)
            d = log_accept(eps)
            done = ((direction > 0) & ~(d > log_target)) | ((direction < 0) & ~(d < log_target))
            searching &= ~done
            if not searching.any():
                break
        return eps


class DualAveraging:
    """Stan's step-size adaptation, one per chain (``C``)."""

    def __init__(self, step_size: np.ndarray, s: NutsSettings):
        self.s = s
        self.mu = np.log(10 * step_size)
        self.t = 0
        self.s_bar = np.zeros_like(step_size)
        self.x_bar = np.zeros_like(step_size)

    def update(self, accept_stat: np.ndarray) -> np.ndarray:
        self.t += 1
        eta = 1.0 / (self.t + self.s.t0)
        self.s_bar = (1 - eta) * self.s_bar + eta * (self.s.target_accept - accept_stat)
        x = self.mu - math.sqrt(self.t) / self.s.gamma * self.s_bar
        weight = self.t ** (-self.s.kappa)
        self.x_bar = weight * x + (1 - weight) * self.x_bar
        return np.exp(x)

    def final(self) -> np.ndarray:
        return np.exp(self.x_bar)


def sample(
    potential,
    init: np.ndarray,
    warmup: int,
    samples: int,
    seed: int,
    settings: NutsSettings | None = None,
) -> Draws:
    """Run NUTS from ``init`` (``C x P``, one row per chain): ``warmup`` adapting iterations, then
    ``samples`` kept ones."""
    with np.errstate(all="ignore"):  # stopped chains ride along and may overflow; that is ignored
        return _sample(potential, init, warmup, samples, seed, settings or NutsSettings())


def _sample(potential, init, warmup, samples, seed, s: NutsSettings) -> Draws:
    chains, dim = init.shape
    streams = _Streams(seed, chains)
    sampler = Sampler(potential, s, streams, np.ones((chains, dim)))
    state = sampler.evaluate(np.asarray(init, dtype=np.float64))
    step_size = sampler.initial_step_size(state, np.ones(chains))
    averaging = DualAveraging(step_size, s)
    windows = adaptation_windows(warmup, s)
    window_ends = {end - 1: start for start, end in windows}
    in_window = {i for start, end in windows for i in range(start, end)}
    count, mean, m2 = 0, np.zeros((chains, dim)), np.zeros((chains, dim))
    warmup_divergences = np.zeros(chains, dtype=np.int64)
    for i in range(warmup):
        state, accept_stat, diverging, _, _ = sampler.transition(state, step_size)
        warmup_divergences += diverging
        step_size = averaging.update(accept_stat)
        if i in in_window:  # Welford's running variance of the window's draws
            count += 1
            delta = state.theta - mean
            mean += delta / count
            m2 += delta * (state.theta - mean)
        if i in window_ends:
            variance = m2 / max(count - 1, 1)
            shrink = count / (count + 5.0)
            sampler.inverse_mass = shrink * variance + 1e-3 * (1 - shrink)
            count, mean, m2 = 0, np.zeros_like(mean), np.zeros_like(m2)
            step_size = sampler.initial_step_size(state, step_size)
            averaging = DualAveraging(step_size, s)
    if warmup > 0:
        step_size = averaging.final()
    theta = np.empty((chains, samples, dim))
    accept = np.empty((chains, samples))
    divergent = np.empty((chains, samples), dtype=bool)
    depth = np.empty((chains, samples), dtype=np.int64)
    leapfrogs = np.empty((chains, samples))
    for i in range(samples):
        state, accept[:, i], divergent[:, i], depth[:, i], leapfrogs[:, i] = sampler.transition(
            state, step_size
        )
        theta[:, i] = state.theta
    return Draws(
        theta=theta, accept_stat=accept, diverging=divergent, tree_depth=depth,
        n_leapfrog=leapfrogs, step_size=step_size, inverse_mass=sampler.inverse_mass,
        warmup_divergences=warmup_divergences,
    )  # fmt: skip
