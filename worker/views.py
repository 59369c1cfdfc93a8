"""PNG pictures of a campaign for its page: the hyperparameter posterior, the model over the input
space (1-D and 2-D), its failure model's P(failure) with the failed runs, the learning curve of
its evaluations, and its models' accuracy estimates.
Matplotlib on the Agg canvas; predictions from :mod:`worker.answers`."""

from __future__ import annotations

import io

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from fbgp_al.worker import answers
from fbgp_al.worker.feasibility.campaign import of_model
from fbgp_al.worker.vocabulary.constraints import of_spec
from fbgp_al.worker.vocabulary.defaults import known_noise, output_names, output_title, output_units
from fbgp_al.worker.vocabulary.space import Space


def _plain(text: str) -> str:
    """A user's text (an input's name) as matplotlib prints it: its ``$`` escaped, so that it
    is never parsed as mathtext (which fails on TeX it does not know)."""
    return text.replace("$", r"\$")


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=90, bbox_inches="tight")
    return out.getvalue()


def posterior_png(spec: dict, model: dict, output: str = "y") -> bytes:
    """Draws of log noise against each of the GP's log lengthscales (one per input, one per
    value of a choice input: the model's ``features``); the mode marked."""
    lengthscale = np.log(np.asarray(model["samples"]["lengthscale"]))
    noise = np.log(np.asarray(model["samples"]["noise"]))
    names = [_plain(name) for name in Space.of(spec["inputs"]).feature_names]
    shown = min(len(names), 6)
    fig = Figure(figsize=(3.2 * shown, 3.3), layout="constrained")
    mode_l = np.log(np.asarray(model["mode"]["lengthscale"]))
    mode_s = np.log(model["mode"]["noise"])
    for i in range(shown):
        ax = fig.add_subplot(1, shown, i + 1)
        ax.scatter(lengthscale[:, i], noise, s=4, alpha=0.3, color="tab:blue", label="draws")
        ax.scatter([mode_l[i]], [mode_s], marker="*", s=180, color="tab:red", label="mode")
        ax.set_xlabel(f"log lengthscale\n{names[i]}")
        if i == 0:
            ax.set_ylabel("log nugget variance" if known_noise(spec) else "log noise variance")
            ax.legend(loc="best", fontsize=8)
    fig.suptitle(
        f"{_plain(output)}: hyperparameter posterior, model {model['version']} "
        "(inputs scaled to [0, 1], output standardized)"
    )
    return _png(fig)


def model_png(spec: dict, model: dict, labels: list[dict], output: str = "y") -> bytes | None:
    """The posterior-mode GP's mean and uncertainty over the box, with the labeled points; for
    one or two numeric inputs (None otherwise: more inputs, or a choice among them). A log
    input is drawn on a log axis, an int input at its integers. An output modeled on the log
    scale is drawn by its median and 95% interval on a log axis (2-D: log10 of its median).
    Over two inputs, the part of the box that the campaign's constraints rule out is hatched,
    with no model drawn there."""
    space = Space.of(spec["inputs"])
    d = space.dim
    if d > 2 or not space.numeric:
        return None
    x_seen = np.array([label["x"] for label in labels[: model["n_labeled"]]], dtype=float)
    y_seen = np.array([label["y"] for label in labels[: model["n_labeled"]]])
    if d == 1:
        grid = np.array(space.from_pool(np.linspace(0, 1, 200)[:, None]), dtype=float)
        grid = np.unique(grid, axis=0)  # an int input's integers once each
        pred = answers.predict(spec, model, labels, grid.tolist())
        log = "median" in pred  # a log output: its median and 95% interval, log scale
        mean, sd = np.array(pred["mean"]), np.sqrt(pred["variance"])
        fig = Figure(figsize=(8, 4))
        ax = fig.add_subplot(1, 1, 1)
        low, high = (pred["lower"], pred["upper"]) if log else (mean - 2 * sd, mean + 2 * sd)
        ax.fill_between(
            grid[:, 0],
            low,
            high,
            color="tab:blue",
            alpha=0.2,
            label="mode GP: median and 95% interval of y" if log else "mode GP: mean +- 2 sd of y",
        )
        ax.plot(grid[:, 0], pred["median"] if log else mean, color="tab:blue")
        ax.plot(
            grid[:, 0],
            pred["mixture_median" if log else "mixture_mean"],
            "--",
            color="tab:purple",
            label="mixture median" if log else "mixture mean",
        )
        if known_noise(spec):  # each label with its own noise: +- 2 of its sd
            sd_seen = 2 * np.sqrt([label.get("noise", 0.0) for label in labels[: len(y_seen)]])
            ax.errorbar(
                x_seen[:, 0],
                y_seen,
                yerr=sd_seen,
                fmt="o",
                color="black",
                zorder=3,
                markersize=4,
                label="labels +- 2 sd of their noise",
            )
        else:
            ax.scatter(x_seen[:, 0], y_seen, color="black", zorder=3, s=18, label="labels")
        ax.set_xlabel(_plain(spec["inputs"][0]["name"]))
        _scale(ax, space, "x")
        ax.set_ylabel(f"{_plain(output)} (log scale)" if log else _plain(output))
        if log:
            ax.set_yscale("log")
        ax.legend(loc="best", fontsize=8)
    else:
        k = 60
        axes = [
            np.unique(
                np.array(space.from_pool(np.column_stack([np.linspace(0, 1, k)] * 2)), dtype=float)[
                    :, j
                ]
            )
            for j in range(2)
        ]
        g0, g1 = np.meshgrid(*axes)
        grid = np.column_stack([g0.ravel(), g1.ravel()])
        pred = answers.predict(spec, model, labels, grid.tolist())
        fig = Figure(figsize=(10, 4), layout="constrained")
        name = _plain(output)
        centre = (
            (np.log10(pred["median"]), f"mode GP: log10 of the median of {name}")
            if "median" in pred
            else (pred["mean"], f"mode GP: mean of {name}")
        )
        spread = (np.sqrt(pred["variance"]), f"sd of {name}")
        constraints = of_spec(spec)
        ruled_out = np.zeros(g0.shape, dtype=bool)
        if constraints is not None:
            ruled_out = ~constraints.holds(grid).reshape(g0.shape)
        for j, (values, title) in enumerate((centre, spread)):
            ax = fig.add_subplot(1, 2, j + 1)
            values = np.ma.masked_where(ruled_out, np.reshape(values, g0.shape))
            image = ax.contourf(g0, g1, values, levels=20, cmap="viridis")
            fig.colorbar(image, ax=ax)
            if ruled_out.any():  # no model drawn where the constraints rule runs out: hatched
                hatched = dict(levels=[0.5, 1.5], colors="none", hatches=["//"])
                ax.contourf(g0, g1, ruled_out.astype(float), **hatched)
                title += " (hatched: ruled out)"
            ax.scatter(
                x_seen[:, 0], x_seen[:, 1], color="red", s=14, edgecolor="white", clip_on=False
            )
            ax.set_title(title)
            ax.set_xlabel(_plain(spec["inputs"][0]["name"]))
            ax.set_ylabel(_plain(spec["inputs"][1]["name"]))
            _scale(ax, space, "x")
            _scale(ax, space, "y")
    fig.suptitle(f"{_plain(output)}: model {model['version']}, {model['n_labeled']} labels")
    return _png(fig)


def _scale(ax, space: Space, which: str) -> None:
    """A log input's axis on the log scale, an int input's ticks at integers."""
    kind = space.inputs["xy".index(which)].type
    if kind == "log":
        (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    if kind == "int":
        getattr(ax, f"{which}axis").set_major_locator(MaxNLocator(integer=True))


# values over this ratio, all positive, are drawn on a log axis: a linear one would hold the
# largest (an early model's error of 5e12) and lay the rest flat on zero
DECADES = 100.0


def _log_if_decades(ax, values) -> None:
    """A log y axis for ``values`` that are all positive and span more than two decades."""
    v = np.asarray([x for x in values if x is not None], dtype=float)
    v = v[np.isfinite(v)]
    if len(v) and np.all(v > 0) and v.max() > DECADES * v.min():
        ax.set_yscale("log")


def curve_png(history: list[dict]) -> bytes | None:
    """NLML and RMSE of every evaluation against the labels its model saw (None if none); an
    error that spans more than two decades on a log axis (:data:`DECADES`)."""
    points = [e for e in history if e.get("event") == "evaluate"]
    if not points:
        return None
    n = [e["n_labeled"] for e in points]
    fig = Figure(figsize=(8, 3.2), layout="constrained")
    # several outputs: their mean NLML and NLPD (GP units), since their RMSEs have units apart
    metrics = ("nlml", "rmse") if all("rmse" in e for e in points) else ("nlml", "nlpd_mixture")
    for j, metric in enumerate(metrics):
        ax = fig.add_subplot(1, 2, j + 1)
        values = [e[metric] for e in points]
        ax.plot(n, values, marker="o")
        _log_if_decades(ax, values)
        ax.set_xlabel("labels")
        ax.set_ylabel(metric.upper() + (" (log scale)" if ax.get_yscale() == "log" else ""))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if max(n) - min(n) < 2:  # one or two label counts: whole numbers either side of them
            ax.set_xlim(min(n) - 1, max(n) + 1)
    fig.suptitle(
        "learning curve of the test sets (/evaluate)"
        + ("" if metrics[1] == "rmse" else ": the outputs' mean NLML and NLPD, standardized")
    )
    return _png(fig)


def accuracy_png(history: list[dict], spec: dict) -> bytes | None:
    """Each model's accuracy estimates against its labels (None if no model has them), a row
    of two panels per output in that output's units: the LOO RMSE (on a log axis where it
    spans more than two decades), and the integrated
    predictive variances of y and f and the draws' disagreement (log scale, units squared);
    the stopping rule's targets in those units dashed (relative ones dash-dotted, scaled by
    each model's labels), each stop and resume a vertical line. A multi-output campaign's
    models before each output's estimates were kept in its history are left out."""
    names = output_names(spec)
    series = []
    for name in names or [None]:
        models = [
            (e["version"], e["accuracy"] if name is None else (e.get("outputs") or {}).get(name))
            for e in history
            if e.get("event") == "model" and e.get("accuracy")
        ]
        models = [(version, a) for version, a in models if a]
        if models:
            series.append((name, models))
    if not series:
        return None
    fig = Figure(figsize=(10, 3.3 * len(series) + 0.5), layout="constrained")
    for row, (output, models) in enumerate(series):
        title, units = _plain(output_title(spec, output)), output_units(spec, output)
        name = _plain(output or "y")
        for j in range(2):
            ax = fig.add_subplot(len(series), 2, 2 * row + j + 1)
            _accuracy_panel(ax, j, models, spec.get("stop") or {}, history)
            ax.set_title(
                f"{title}: " + ("LOO RMSE" if j == 0 else "integrated variances"), fontsize=9
            )
            unit2 = units if units is None or units.isalnum() else f"({units})"
            squared = f"variance of {name}" + (f" [{_plain(unit2)}²]" if units else "")
            ax.set_ylabel(title if j == 0 else squared)
    fig.suptitle(
        "accuracy without a test set, model after model (dotted: stopped, resumed)", fontsize=10
    )
    return _png(fig)


ACCURACY_PANELS = (
    (("loo_rmse", "LOO RMSE of the mixture mean"),),
    (("ipv", "ipv (y)"), ("ipv_f", "ipv_f (f)"), ("qbc", "qbc (draws' disagreement)")),
)


def _accuracy_panel(ax, j: int, models: list[tuple], rule: dict, history: list[dict]) -> None:
    """Panel ``j`` of :data:`ACCURACY_PANELS` of one output's ``models`` (``(version,
    accuracy)``)."""
    n = [version for version, _ in models]
    lines = ACCURACY_PANELS[j]
    for (name, label), color in zip(lines, ("tab:blue", "tab:green", "tab:red"), strict=False):
        ax.plot(n, [a[name] for _, a in models], marker="o", ms=3, color=color, label=label)
        if rule.get(name):
            ax.axhline(rule[name], color=color, ls="--", lw=1, label=f"target {name}")
        relative = rule.get(f"{name}_relative")
        if relative and all(a[f"{name}_relative"] > 0 for _, a in models):
            # in the output's units each model's target moves with the labels' spread
            scaled = [relative * a[name] / a[f"{name}_relative"] for _, a in models]
            ax.plot(n, scaled, color=color, ls="-.", lw=1, label=f"target {name}_relative")
    for e in history:
        if e.get("event") in ("stopped", "resumed"):
            at = e.get("version", e.get("n_labeled"))
            ax.axvline(at, color="black" if e["event"] == "stopped" else "grey", ls=":", lw=1)
    if j == 1 and all(a[k] > 0 for _, a in models for k, _ in lines):
        ax.set_yscale("log")
    elif j == 0:  # the LOO RMSE, where it spans decades
        _log_if_decades(ax, [a["loo_rmse"] for _, a in models])
    ax.set_xlabel("labels")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(loc="best", fontsize=7)


def failures_png(spec: dict, model: dict, labels: list[dict], failures: list[dict]) -> bytes | None:
    """The failure model's probability that a run fails over the campaign's first one or two
    numeric inputs, the others held at the latest failed run's values; the failed runs kept
    marked (x) and the labels (dots). None without a failure model or a numeric input."""
    failure = of_model(model)
    space = Space.of(spec["inputs"])
    drawn = [j for j, i in enumerate(space.inputs) if i.type != "choice"][:2]
    if failure is None or not drawn or not failures:
        return None
    base = list(failures[-1]["x"])
    k = 60
    axes = []
    for j in drawn:  # each drawn input's values, as the pool snaps them (an int's integers)
        v = np.repeat(space.to_pool([base]), k, axis=0)
        v[:, j] = np.linspace(0, 1, k)
        axes.append(sorted({row[j] for row in space.from_pool(v)}))
    index = np.meshgrid(*[np.arange(len(a)) for a in axes])
    points = [list(base) for _ in range(index[0].size)]
    for where, j, values in zip(index, drawn, axes, strict=True):
        for point, i in zip(points, where.ravel(), strict=True):
            point[j] = values[i]
    mesh = [
        np.asarray(values, dtype=float)[where] for values, where in zip(axes, index, strict=True)
    ]
    fail = 1.0 - failure.p_success(space.to_gp(points)).reshape(mesh[0].shape)
    bad = np.array([[run["x"][j] for j in drawn] for run in failures], dtype=float)
    good = np.array([[label["x"][j] for j in drawn] for label in labels], dtype=float)
    names = [_plain(spec["inputs"][j]["name"]) for j in drawn]
    fig = Figure(figsize=(6.4, 4.4), layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    if len(drawn) == 1:
        ax.plot(mesh[0].ravel(), fail.ravel(), color="tab:red", label="P(failure)")
        ax.scatter(
            good[:, 0], np.zeros(len(good)), s=14, color="black", label="labels", clip_on=False
        )
        ax.scatter(
            bad[:, 0],
            np.ones(len(bad)),
            marker="x",
            color="tab:red",
            label="failed runs",
            clip_on=False,
        )
        ax.set_ylim(-0.05, 1.05)
        ax.set_ylabel("P(failure)")
        ax.legend(loc="best", fontsize=8)
    else:
        image = ax.contourf(*mesh, fail, levels=np.linspace(0, 1, 11), cmap="Reds")
        fig.colorbar(image, ax=ax, label="P(failure)")
        ax.scatter(good[:, 0], good[:, 1], s=10, color="black", label="labels", clip_on=False)
        ax.scatter(
            bad[:, 0],
            bad[:, 1],
            marker="x",
            s=40,
            color="blue",
            label="failed runs",
            clip_on=False,
            zorder=3,
        )
        ax.set_ylabel(names[1])
        if drawn == [0, 1]:
            _scale(ax, space, "y")
        ax.legend(loc="upper right", fontsize=7)
    ax.set_xlabel(names[0])
    if drawn[0] == 0:
        _scale(ax, space, "x")
    others = [
        f"{_plain(spec['inputs'][j]['name'])} = {base[j]}"
        for j in range(space.dim)
        if j not in drawn
    ]
    held = f" ({', '.join(others)}: the latest failed run's)" if others else ""
    fig.suptitle(f"failure model {model['version']}: {len(failures)} failed runs{held}", fontsize=9)
    return _png(fig)
