"""The offline :class:`~clients.metamodel.Metamodel`'s predictions, timed against the
computation before (commit 85c3182), in one run:

    python -m clients.reproduction.metamodel_speed --points 2000 --draws 150 --labels 60

The model: a synthetic export of a campaign of four inputs (a float, an int, a choice and a
float), two outputs (on the log scale, or as they are with ``--linear``), ``--draws`` draws and
``--labels`` labels, and a failure model; predicted at ``--points`` random points. "before" is
the previous code: the draws' kernel in chunks of 4M values and the mean and the variance in
two products, and the quantiles of the log outputs' mixtures by Newton's steps (its failure
model's answer, once per output, by today's code). Each figure is the best of ``--repeats``.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from fbgp_al.clients import metamodel
from fbgp_al.clients.numpy_gp import rbf
from fbgp_al.clients.prediction import Prediction
from fbgp_al.worker.vocabulary import lognormal
from fbgp_al.worker.vocabulary.space import Space

INPUTS = [
    {"name": "a", "lower": 0.0, "upper": 10.0},
    {"name": "k", "type": "int", "lower": 1, "upper": 8},
    {"name": "c", "type": "choice", "values": ["p", "q", "r"]},
    {"name": "b", "lower": 1.0, "upper": 5.0},
]


def points(m: int, seed: int) -> list[list]:
    """``m`` random points of :data:`INPUTS`, as a user gives them."""
    rng = np.random.default_rng(seed)
    return [
        [
            float(rng.uniform(0, 10)),
            int(rng.integers(1, 9)),
            str(rng.choice(["p", "q", "r"])),
            float(rng.uniform(1, 5)),
        ]
        for _ in range(m)
    ]


def document(draws: int = 150, labels: int = 60, log: bool = True, seed: int = 0) -> dict:
    """An exported two-output model over :data:`INPUTS` (``draws`` draws, ``labels`` labels, a
    failure model of ``labels`` runs), its hyperparameters drawn around plausible values."""
    rng = np.random.default_rng(seed)
    f = Space.of(INPUTS).n_features

    def output() -> dict:
        return {
            "acquisition_samples": {
                "lengthscale": np.exp(rng.normal(-1.0, 0.3, (draws, f))).tolist(),
                "noise": np.exp(rng.normal(-6.0, 1.0, draws)).tolist(),
            },
            "mode": {"lengthscale": np.exp(rng.normal(-1.0, 0.3, f)).tolist(), "noise": 1e-3},
            "transform": {"y_mean": 1.0, "y_std": 2.0, "y_transform": "log" if log else "none"},
        }

    x = points(labels, seed + 1)
    value = (lambda: float(np.exp(rng.normal(1.0, 2.0)))) if log else lambda: rng.normal(1.0, 2.0)
    y = [{name: float(value()) for name in ("o1", "o2")} for _ in x]
    classifier = {
        "kind": "classifier",
        "likelihood": "probit",
        "inference": "ep",
        "u": rng.random((labels, f)).tolist(),
        "success": [1] * labels,
        "lengthscale": [0.5] * f,
        "variance": 1.0,
        "bias": 0.1,
        "tau": np.exp(rng.normal(0, 1, labels)).tolist(),
        "nu": rng.normal(0, 1, labels).tolist(),
    }
    return {
        "format": metamodel.FORMAT,
        "format_version": 3,
        "kernel": metamodel.KERNEL,
        "version": labels,
        "n_labeled": labels,
        "inputs": INPUTS,
        "transform": Space.of(INPUTS).transform(),
        "data": {"x": x, "y": y},
        "outputs": {"o1": output(), "o2": output()},
        "failures": {"model": classifier, "min_success": 0.5},
    }


# -- the computation before ----------------------------------------------------------------------
def _gp_before(fitted, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``numpy_gp.Fitted.predict`` before: kernels of 4M values, two products."""
    batch, n = fitted.chol_inv.shape[:2]
    step = max(1, (1 << 22) // (batch * max(n, 1)))
    means, variances = [], []
    for i in range(0, len(cand), step):
        k_star = rbf(fitted.u, cand[i : i + step], fitted.lengthscale)
        means.append((fitted.alpha[:, None, :] @ k_star)[:, 0, :])
        v = fitted.chol_inv @ k_star
        variances.append(np.maximum(1.0 - np.square(v).sum(-2), 0.0) + fitted.s2[:, None])
    if not means:
        return np.empty((batch, 0)), np.empty((batch, 0))
    return np.concatenate(means, -1), np.concatenate(variances, -1)


def _quantile_before(mu, s2, z: float) -> np.ndarray:
    """``lognormal.mixture_quantile`` before: Newton's steps, safeguarded by bisection."""
    mu = np.atleast_2d(np.asarray(mu, dtype=np.float64))
    s = np.sqrt(np.maximum(np.atleast_2d(np.asarray(s2, dtype=np.float64)), 1e-300))
    own = mu + z * s
    lo, hi = own.min(0), own.max(0)
    q = np.clip(mu.mean(0) + z * np.sqrt((s * s).mean(0) + mu.var(0)), lo, hi)
    p = float(lognormal.normal_cdf(z))
    active = hi > lo
    for _ in range(lognormal.MAX_STEPS):
        if not active.any():
            break
        t = (q[active] - mu[:, active]) / s[:, active]
        f = lognormal.normal_cdf(t).mean(0) - p
        slope = (np.exp(-0.5 * t * t) / s[:, active]).mean(0) / math.sqrt(2 * math.pi)
        a = np.where(f < 0, q[active], lo[active])
        b = np.where(f >= 0, q[active], hi[active])
        with np.errstate(divide="ignore", invalid="ignore"):
            step = q[active] - f / slope
        inside = np.isfinite(step) & (step >= a) & (step <= b)
        new = np.where(inside, step, 0.5 * (a + b))
        done = (np.abs(new - q[active]) <= lognormal.TOLERANCE * (1.0 + np.abs(new))) | (f == 0)
        lo[active], hi[active], q[active] = a, b, np.where(f == 0, q[active], new)
        active[np.flatnonzero(active)[done]] = False
    return q


def _mixture_before(mu, s2) -> dict:
    mean, variance = lognormal.mixture_moments(mu, s2)
    return {
        "mixture_mean": mean,
        "mixture_variance": variance,
        **{
            key: lognormal._exp(_quantile_before(mu, s2, z))
            for key, z in (
                ("mixture_median", 0.0),
                ("mixture_lower", -lognormal.Z95),
                ("mixture_upper", lognormal.Z95),
            )
        },
    }


def predict_before(model: metamodel.Metamodel, x) -> dict:
    """``model.predict(x)`` as the code before computed it (one output's, or ``{name: ...}``)."""
    if model.outputs is not None:
        return {name: predict_before(part, x) for name, part in model.outputs.items()}
    cand = model._gp(model._points(x))
    model._fit()
    mean, var = _gp_before(model._mode, cand)
    means, variances = _gp_before(model._draws_fitted, cand)
    p = None if model.failures is None else model.failures.p_success(cand)
    m, s = model.y_mean, model.y_std
    if model.log:
        out = lognormal.predictive(m + s * mean[0], s * s * var[0])
        out.update(_mixture_before(m + s * means, s * s * variances))
        return Prediction(**out, model_version=model.version, p_success=p)
    return Prediction(
        mean=m + mean[0] * s,
        variance=var[0] * s * s,
        mixture_mean=m + means.mean(0) * s,
        mixture_variance=(variances.mean(0) + means.var(0)) * s * s,
        model_version=model.version,
        p_success=p,
    )


def _best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m fbgp_al.clients.reproduction.metamodel_speed",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("--points", type=int, default=2000)
    parser.add_argument("--draws", type=int, default=150)
    parser.add_argument("--labels", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--linear", action="store_true", help="outputs as they are, not log")
    args = parser.parse_args(argv)
    doc = document(args.draws, args.labels, log=not args.linear)
    x = points(args.points, seed=7)
    model = metamodel.Metamodel.load(doc)
    start = time.perf_counter()
    new = model.predict(x)  # the first prediction factorizes each GP
    first = time.perf_counter() - start
    old = predict_before(model, x)
    differs = max(
        float(np.max(np.abs(new[o][k] - old[o][k]) / np.maximum(np.abs(old[o][k]), 1.0)))
        for o in new
        for k in old[o]
    )
    before = _best(lambda: predict_before(model, x), args.repeats)
    after = _best(lambda: model.predict(x), args.repeats)
    kind = "as they are" if args.linear else "on the log scale"
    print(
        f"{args.points} points, 2 outputs {kind}, {args.draws} draws, {args.labels} labels "
        f"(best of {args.repeats}; the first prediction, factors included: {first:.3f} s)"
    )
    print(f"{'':8}{'predict, s':>12}")
    print(f"{'before':8}{before:12.3f}\n{'after':8}{after:12.3f}")
    print(f"largest difference (relative, or absolute below 1): {differs:.1e}")


if __name__ == "__main__":
    main()
