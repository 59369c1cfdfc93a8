"""PNG plots of benchmark results and simulators (matplotlib, Agg canvas, no pyplot state).

- :func:`plot_learning_curves`: one panel per (metric, simulator), one line per acquisition,
  the mean over runs with a +- 1 sd band (as the paper's figures).
- :func:`plot_simulator`: a 1-D simulator's mean with its +- 2 noise-sd band, or a 2-D one's mean
  as filled contours, with the labeled points of a run on top (initial design marked apart).
- :func:`plot_run`: :func:`plot_simulator` for the points one run recorded in a results file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from fbgp_al.clients.reproduction.protocol import pool_points
from fbgp_al.clients.reproduction.results import METRICS, labeled_points, learning_curves
from fbgp_al.clients.simulators import Simulator, get_simulator
from fbgp_al.worker.vocabulary.defaults import INITIAL_DESIGN_SIZE

_LABELS = {"nlml": "NLML (test set)", "rmse": "RMSE (true mean)"}


def _save(fig: Figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)  # binds the Agg canvas: no display, no global backend switch
    fig.savefig(path, dpi=110)
    return path


def plot_learning_curves(records: list[dict], path: str | Path, metrics=METRICS) -> Path:
    """Learning curves of every simulator in ``records``: rows are metrics, columns simulators.

    Each line is an acquisition's mean over its runs against ``n_labeled``; the band is +- 1 sd
    (ddof 0, so a single run shows no band).
    """
    per_metric = {m: learning_curves(records, m) for m in metrics}
    sims = sorted({s for curves in per_metric.values() for s in curves})
    if not sims:
        raise ValueError("no results to plot")
    fig = Figure(figsize=(3.6 * len(sims), 3.0 * len(metrics)), layout="constrained")
    axes = fig.subplots(len(metrics), len(sims), squeeze=False)
    for i, metric in enumerate(metrics):
        for j, sim in enumerate(sims):
            ax = axes[i, j]
            for acq, c in per_metric[metric].get(sim, {}).items():
                mean, sd = c.values.mean(0), c.values.std(0)
                (line,) = ax.plot(c.n_labeled, mean, label=f"{acq} ({len(c.runs)})")
                ax.fill_between(
                    c.n_labeled,
                    mean - sd,
                    mean + sd,
                    alpha=0.2,
                    color=line.get_color(),
                    linewidth=0,
                )
            if i == 0:
                ax.set_title(sim)
            if j == 0:
                ax.set_ylabel(_LABELS.get(metric, metric))
            if i == len(metrics) - 1:
                ax.set_xlabel("labeled points")
            ax.grid(alpha=0.3)
    axes[0, -1].legend(fontsize="small", title="acquisition (runs)")
    return _save(fig, path)


def plot_simulator(
    simulator: str | Simulator,
    path: str | Path,
    X=None,
    y=None,
    n_initial: int = INITIAL_DESIGN_SIZE,
    title: str | None = None,
) -> Path:
    """A 1-D or 2-D simulator over its pool grid, with labeled points ``X`` ``[n, d]``
    (original units) and optionally their labels ``y`` ``[n]`` (1-D only; the mean is used
    when absent). The first ``n_initial`` points are drawn as the initial design."""
    sim = get_simulator(simulator) if isinstance(simulator, str) else simulator
    if sim.dim > 2:
        raise ValueError(f"{sim.name} has {sim.dim} inputs; only 1-D and 2-D can be drawn")
    X = np.empty((0, sim.dim)) if X is None or np.size(X) == 0 else sim.check_inputs(X)
    order = np.arange(1, len(X) + 1)  # 1-based: the 4th label is the first acquired
    first, rest = slice(0, n_initial), slice(n_initial, None)
    fig = Figure(figsize=(6.0, 4.5), layout="constrained")
    ax = fig.subplots()
    grid = pool_points(sim, np.arange(sim.pool_size))
    if sim.dim == 1:
        x, mean, sd = grid[:, 0], sim.mean(grid), sim.noise_std(grid)
        ax.plot(x, mean, color="black", label="mean")
        ax.fill_between(
            x, mean - 2 * sd, mean + 2 * sd, color="gray", alpha=0.25, label="± 2 noise sd"
        )
        ys = sim.mean(X) if y is None else np.asarray(y, dtype=float)
        ax.scatter(
            X[first, 0], ys[first], marker="s", color="tab:red", zorder=3, label="initial design"
        )
        points = ax.scatter(
            X[rest, 0], ys[rest], c=order[rest], cmap="viridis", zorder=3, label="acquired"
        )
        ax.set_xlabel("x1")
        ax.set_ylabel("y")
    else:
        k = sim.points_per_dim
        # pool index is row-major over (x1, x2): reshape to [k, k] with x1 along rows
        g1, g2 = grid[:, 0].reshape(k, k), grid[:, 1].reshape(k, k)
        filled = ax.contourf(g1, g2, sim.mean(grid).reshape(k, k), levels=30, cmap="coolwarm")
        fig.colorbar(filled, ax=ax, label="mean")
        ax.scatter(X[first, 0], X[first, 1], marker="s", color="black", label="initial design")
        points = ax.scatter(
            X[rest, 0],
            X[rest, 1],
            c=order[rest],
            cmap="viridis",
            edgecolors="white",
            label="acquired",
        )
        ax.set_xlabel("x1")
        ax.set_ylabel("x2")
    if len(X) > n_initial:
        fig.colorbar(points, ax=ax, label="label number")
    ax.set_title(title or sim.name)
    ax.legend(fontsize="small", loc="best")
    return _save(fig, path)


def plot_run(
    records: list[dict], simulator: str, acquisition: str, run: int, path: str | Path
) -> Path:
    """:func:`plot_simulator` with the points run ``run`` of ``acquisition`` labeled."""
    X, y = labeled_points(records, simulator, acquisition, run)
    return plot_simulator(
        simulator, path, X, y, title=f"{simulator}: {acquisition}, run {run} ({len(X)} labels)"
    )
