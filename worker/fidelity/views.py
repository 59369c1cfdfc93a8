"""The campaign page's picture of a multi-fidelity model: over one numeric input, each level's
mixture mean and two standard deviations of y (:func:`worker.fidelity.answers.predict`), with
each level's labels."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from fbgp_al.worker.fidelity import answers
from fbgp_al.worker.views import _png
from fbgp_al.worker.vocabulary import fidelities
from fbgp_al.worker.vocabulary.space import Space

COLORS = ("tab:orange", "tab:green", "tab:purple", "tab:red", "tab:brown")


def model_png(spec: dict, model: dict, labels: list[dict]) -> bytes | None:
    """Each level's mixture mean +- 2 sd over the one declared input, the top level's the
    most prominent, and the labels at each level; None for more inputs or a choice."""
    declared = Space.of(fidelities.declared_inputs(spec))
    if declared.dim != 1 or not declared.numeric:
        return None
    names = fidelities.levels(spec)
    grid = np.unique(
        np.array(declared.from_pool(np.linspace(0, 1, 200)[:, None]), dtype=float), axis=0
    )
    seen = labels[: model["n_labeled"]]
    fig = Figure(figsize=(8, 4))
    ax = fig.add_subplot(1, 1, 1)
    for t, name in enumerate(names):
        top = t == len(names) - 1
        color = "tab:blue" if top else COLORS[t % len(COLORS)]
        x = [[float(g), name] for g in grid[:, 0]]
        pred = answers.predict(spec, model, labels, x)
        mean, sd = np.array(pred["mixture_mean"]), np.sqrt(pred["mixture_variance"])
        ax.fill_between(grid[:, 0], mean - 2 * sd, mean + 2 * sd, color=color, alpha=0.2)
        ax.plot(grid[:, 0], mean, color=color, lw=2 if top else 1, label=f"{name}: mean +- 2 sd")
        at = [(label["x"][0], label["y"]) for label in seen if label["x"][-1] == name]
        if at:
            xs, ys = zip(*at, strict=True)
            ax.plot(xs, ys, "o", color=color, markeredgecolor="black", zorder=3, markersize=5)
    ax.set_xlabel(declared.inputs[0].name)
    ax.set_ylabel("y")
    if declared.inputs[0].type == "log":
        ax.set_xscale("log")
    ax.legend(loc="best", fontsize=8)
    return _png(fig)
