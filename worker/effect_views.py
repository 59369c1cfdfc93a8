"""PNG pictures of what a model says about its output, for an engineer (the campaign page):
each input's main effect, the Sobol indices as bars with their intervals, and the mean over
two inputs with the others averaged. Each is one output's (a multi-output campaign's output as
its single-output campaign), titled with its name. Matplotlib on the Agg canvas; the numbers
from :mod:`worker.effects` and :mod:`worker.sensitivity`."""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from fbgp_al.worker import effects
from fbgp_al.worker.sensitivity import sensitivity
from fbgp_al.worker.views import _plain, _png
from fbgp_al.worker.vocabulary.space import Space

MAX_PANELS = 12  # main effects drawn at most (the first inputs)
PAIR_POINTS = 40  # grid points along each input of a two-input picture


def _others(space: Space, drawn: list[int]) -> str:
    """What the picture does with the inputs it does not draw, in words."""
    rest = [_plain(space.inputs[j].name) for j in range(space.dim) if j not in drawn]
    if not rest:
        return "no other inputs"
    return f"{', '.join(rest)} averaged over {'its range' if len(rest) == 1 else 'their ranges'}"


def _labels_at(labels: list[dict], model: dict, j: int) -> list:
    return [label["x"][j] for label in labels[: model["n_labeled"]]]


def effects_png(spec: dict, model: dict, labels: list[dict], output: str) -> bytes:
    """Each input's main effect on ``output`` (the first :data:`MAX_PANELS`): the mixture's
    mean and 95% band of ``f`` along the input, the others averaged over their ranges (a log
    output: the geometric mean's median and band, on a log axis); a choice input's as a point
    and bar per value; the labels' values of the input as ticks."""
    space = Space.of(spec["inputs"])
    shown = list(range(min(space.dim, MAX_PANELS)))
    curves = effects.main_effects(spec, model, labels, shown)
    cols = min(3, len(shown))
    rows = math.ceil(len(shown) / cols)
    fig = Figure(figsize=(4.3 * cols, 3.3 * rows + 0.9), layout="constrained")
    axes = fig.subplots(rows, cols, sharey=True, squeeze=False).ravel()
    for j, (ax, curve) in enumerate(zip(axes, curves, strict=False)):
        inp = space.inputs[j]
        mean, low, high = (np.asarray(curve[k]) for k in ("center", "low", "high"))
        if curve["geometric"]:
            ax.set_yscale("log")
        if inp.type == "choice":
            where = np.arange(len(curve["x"]))
            ax.errorbar(
                where, mean, yerr=[mean - low, high - mean], fmt="o", capsize=4, color="tab:blue"
            )
            ax.set_xticks(where, [_plain(str(x)) for x in curve["x"]])
            ax.set_xlim(-0.5, len(where) - 0.5)
        else:
            x = np.asarray(curve["x"], dtype=float)
            ax.fill_between(x, low, high, color="tab:blue", alpha=0.2)
            ax.plot(x, mean, color="tab:blue", marker="o" if inp.type == "int" else None, ms=3)
            seen = np.asarray(_labels_at(labels, model, j), dtype=float)
            ax.plot(
                seen,
                np.zeros_like(seen),
                "|",
                color="black",
                ms=8,
                alpha=0.6,
                transform=ax.get_xaxis_transform(),
            )
            if inp.type == "log":
                ax.set_xscale("log")
            if inp.type == "int":
                ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel(_plain(inp.name))
        if j % cols == 0:
            ax.set_ylabel(_plain(output))
        ax.grid(alpha=0.3)
    for ax in axes[len(curves) :]:
        ax.set_visible(False)
    more = f" (the first {len(shown)} of {space.dim} inputs)" if len(shown) < space.dim else ""
    what = (
        f"geometric mean of {_plain(output)} over the other inputs' ranges: the model's "
        "median and 95% band"
        if curves and curves[0]["geometric"]
        else "mean and 95% band of the model along each input, the other inputs averaged over "
        "their ranges"
    )
    fig.suptitle(
        f"{_plain(output)}: main effects, model {model['version']}{more}\n"
        f"{what}; ticks: the labels",
        fontsize=10,
    )
    return _png(fig)


def sobol_png(
    spec: dict, model: dict, labels: list[dict], output: str, indices: dict | None = None
) -> bytes:
    """``output``'s first-order and total Sobol indices per input (closed form), each bar its
    mean over the draws and its 95% credible interval; ``indices``: those of
    :func:`worker.sensitivity.sensitivity` if already at hand."""
    s = sensitivity(spec, model, labels) if indices is None else indices
    names = [_plain(name) for name in s["inputs"]]
    where = np.arange(len(names))
    fig = Figure(figsize=(7.5, 0.9 + 0.45 * len(names) + 0.8), layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    for offset, key, label, color in (
        (-0.2, "first", "first-order", "tab:blue"),
        (0.2, "total", "total", "tab:orange"),
    ):
        b = s[key]
        mean, low, high = (np.asarray(b[k]) for k in ("mean", "low", "high"))
        ax.barh(
            where + offset,
            mean,
            height=0.38,
            color=color,
            label=label,
            xerr=[np.maximum(mean - low, 0), np.maximum(high - mean, 0)],
            error_kw={"capsize": 3, "elinewidth": 1},
        )
        for y, m, h in zip(where + offset, mean, high, strict=True):
            ax.text(max(h, m) + 0.01, y, f"{m:.2f}", va="center", fontsize=7)
    ax.set_yticks(where, names)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.1)
    ax.set_xlabel("share of the variance of the model's mean")
    ax.grid(axis="x", alpha=0.3)
    fig.legend(loc="outside lower center", ncols=2, fontsize=8)
    fig.suptitle(
        f"{_plain(output)}: Sobol indices, model {model['version']}\n"
        f"{s['level']:.0%} intervals over {s['draws']} posterior draws",
        fontsize=10,
    )
    return _png(fig)


def pair_png(
    spec: dict, model: dict, labels: list[dict], output: str, drawn: tuple[int, int]
) -> bytes | None:
    """The model of ``output`` over the numeric inputs ``drawn`` (two indices), the other
    inputs averaged over their ranges: the mean and the width of its 95% band, the labels'
    points (their other inputs anywhere); None unless both are numeric and distinct."""
    space = Space.of(spec["inputs"])
    h, v = drawn
    if h == v or "choice" in (space.inputs[h].type, space.inputs[v].type):
        return None
    ah = effects.axis(space, h, PAIR_POINTS)
    av = effects.axis(space, v, PAIR_POINTS)
    gh, gv = np.meshgrid(ah, av)
    t = np.zeros((gh.size, space.dim))
    t[:, h], t[:, v] = gh.ravel(), gv.ravel()
    g = effects.averaged(spec, model, labels, [h, v], t)
    values = np.array(space.pool_to_code(t), dtype=float)
    xh, xv = values[:, h].reshape(gh.shape), values[:, v].reshape(gh.shape)
    fig = Figure(figsize=(11, 4.6), layout="constrained")
    center = "mean of"
    if g["geometric"]:  # the others averaged on the log scale: y's geometric mean over them
        center = "median of the geometric mean of" if space.dim > 2 else "median of"
    panels = (
        (g["center"], f"{center} {_plain(output)}", "viridis"),
        (g["high"] - g["low"], "width of its 95% band", "magma"),
    )
    seen_h = np.asarray(_labels_at(labels, model, h), dtype=float)
    seen_v = np.asarray(_labels_at(labels, model, v), dtype=float)
    for k, (values_k, title, cmap) in enumerate(panels):
        ax = fig.add_subplot(1, 2, k + 1)
        image = ax.contourf(xh, xv, np.reshape(values_k, gh.shape), levels=20, cmap=cmap)
        fig.colorbar(image, ax=ax, label=_plain(output))
        ax.scatter(seen_h, seen_v, s=14, color="red", edgecolor="white", clip_on=False)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(_plain(space.inputs[h].name))
        ax.set_ylabel(_plain(space.inputs[v].name))
        for which, inp in (("x", space.inputs[h]), ("y", space.inputs[v])):
            if inp.type == "log":
                (ax.set_xscale if which == "x" else ax.set_yscale)("log")
            if inp.type == "int":
                getattr(ax, f"{which}axis").set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(
        f"{_plain(output)} over {_plain(space.inputs[h].name)} and "
        f"{_plain(space.inputs[v].name)}, model {model['version']}\n"
        f"{_others(space, [h, v])}; dots: the labels (at any values of the others)",
        fontsize=10,
    )
    return _png(fig)
