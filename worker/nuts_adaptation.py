"""The No-U-Turn sampler's settings and its warm-up, as Stan runs them: dual averaging of the
step size toward ``target_accept``, and the inverse mass matrix (diagonal, ``diag_e``, or dense,
``dense_e``) estimated in Stan's doubling windows and regularized as Stan does,
``(n / (n + 5)) Sigma + 1e-3 (5 / (n + 5)) I`` from the ``n`` draws of a window. One
:class:`ChainAdaptation` per chain; :mod:`worker.nuts` runs the chains."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


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
    # Stan's dense_e (a full inverse mass matrix) instead of diag_e
    dense_mass: bool = False


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


class ChainAdaptation:
    """Warm-up of one chain: dual averaging of the step size (Stan) and windowed variance."""

    def __init__(
        self, step_size: float, warmup: int, s: NutsSettings, dim: int, adapt_mass: bool = True
    ):
        self.s = s
        self.warmup = warmup
        self.windows = adaptation_windows(warmup, s) if adapt_mass else []
        self.restart(step_size)
        self.dim = dim
        self.reset_window()

    def reset_window(self) -> None:
        dim = self.dim
        self.count, self.mean = 0, np.zeros(dim)
        self.m2 = np.zeros((dim, dim)) if self.s.dense_mass else np.zeros(dim)

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
        """Add a warm-up draw to its window; at a window's end, the new inverse mass matrix
        (``P x P``: diagonal unless the metric is dense), regularized as Stan does."""
        for start, end in self.windows:
            if start <= iteration < end:
                self.count += 1
                delta = theta - self.mean
                self.mean += delta / self.count
                after = theta - self.mean
                self.m2 += np.outer(delta, after) if self.s.dense_mass else delta * after
                if iteration == end - 1:
                    n = self.count
                    covariance = self.m2 / max(n - 1, 1)
                    if not self.s.dense_mass:
                        covariance = np.diag(covariance)
                    self.reset_window()
                    shrink = 1e-3 * (5.0 / (n + 5.0)) * np.eye(len(theta))
                    return (n / (n + 5.0)) * covariance + shrink
        return None
