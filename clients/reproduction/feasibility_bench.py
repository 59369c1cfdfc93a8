"""The failure model's inference, measured: Laplace with fitted hyperparameters
(worker.feasibility) against a fully Bayesian GP classifier on small problems, and its time at
the sizes campaigns reach.

    python -m clients.reproduction.feasibility_bench accuracy --seeds 4
    python -m clients.reproduction.feasibility_bench timing --n 100 400

Problems: ``n`` uniform runs in the unit cube of ``d`` inputs that fail in a box corner
(``u1 > 0.6``, and ``u2 < 0.45``, ``u3 > 0.3`` where there are such inputs: 40%, 18% and 13% of
the cube); scored at 2,000 uniform held-out points against the true region (log loss, Brier).
The fully Bayesian reference has the same model and priors (probit, ``s2 SE + b2``): two chains
of 1,500 iterations (500 warm-up), each an elliptical slice step of the whitened latents
(``f = chol(K) nu``; Murray, Adams & MacKay 2010) and a step-out slice step of every
log-hyperparameter with ``nu`` held (Murray & Adams 2010), predictions averaged over every 5th
draw. ``chains differ``: the mean absolute difference of the two chains' probabilities, how
far the reference itself is from its limit.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy import linalg, optimize, special

from fbgp_al.worker import feasibility as fe

CORNER = ((0, ">", 0.6), (1, "<", 0.45), (2, ">", 0.3))
HELD_OUT = 2000


def fails(u: np.ndarray) -> np.ndarray:
    """The true failure region: the box corner of ``CORNER`` over the inputs ``u`` has."""
    out = np.ones(len(u), dtype=bool)
    for j, side, edge in CORNER[: u.shape[1]]:
        out &= (u[:, j] > edge) if side == ">" else (u[:, j] < edge)
    return out


def problem(n: int, d: int, seed: int):
    rng = np.random.default_rng(1000 * d + n + seed)
    u = rng.random((n, d))
    while fails(u).all() or not fails(u).any():
        u = rng.random((n, d))
    test = rng.random((HELD_OUT, d))
    return u, ~fails(u), test, ~fails(test)


def scores(p: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    """Log loss (nats) and Brier score of probabilities of success ``p`` against ``truth``."""
    p = np.clip(p, 1e-12, 1 - 1e-12)
    log_loss = -np.where(truth, np.log(p), np.log1p(-p)).mean()
    return float(log_loss), float(((p - truth) ** 2).mean())


def zero_mean(u, success, seed: int = 0):
    """The default model with a zero prior mean (``b2 = 0``): ``(log l, log s2)`` fitted by
    Laplace's evidence as :func:`worker.feasibility.hyperparameters` fits them, EP at them."""
    centre, scale, bounds = fe._prior("probit", u.shape[1])
    centre, scale, bounds = centre[:-1], scale[:-1], bounds[:-1]

    def objective(theta):
        value, grad, _ = fe.log_marginal(
            u, success, np.exp(theta[:-1]), math.exp(theta[-1]), 0.0, "probit", True
        )
        z = (theta - centre) / scale
        return -(value - 0.5 * z @ z), -(grad[:-1] - z / scale)

    rng = np.random.default_rng(seed)
    lo, hi = np.array(bounds).T
    starts = [centre] + [
        np.clip(centre + scale * rng.standard_normal(len(centre)), lo, hi)
        for _ in range(fe.RESTARTS - 1)
    ]
    ends = [
        optimize.minimize(objective, s, jac=True, method="L-BFGS-B", bounds=bounds) for s in starts
    ]
    theta = min(ends, key=lambda r: r.fun).x
    return fe.condition(u, success, np.exp(theta[:-1]), math.exp(theta[-1]), 0.0, "probit", "ep")


def _chol(K: np.ndarray) -> np.ndarray:
    scale = float(np.mean(np.diag(K)))
    for jitter in (1e-10, *fe.JITTERS):
        try:
            return linalg.cholesky(K + jitter * scale * np.eye(len(K)), lower=True)
        except linalg.LinAlgError:
            continue
    raise linalg.LinAlgError("no jitter factorizes K")


def fully_bayesian(
    u, success, test, seed: int, iterations: int = 1500, warmup: int = 500, thin: int = 5
) -> np.ndarray:
    """One chain of the reference sampler; the mean probability of success at ``test``."""
    rng = np.random.default_rng(seed)
    y = 2.0 * success - 1.0
    d = u.shape[1]
    centre, scale, bounds = fe._prior("probit", d)
    lo, hi = np.array(bounds).T

    def factor(theta):
        return _chol(fe.kernel(u, u, np.exp(theta[:d]), math.exp(theta[d]), math.exp(theta[d + 1])))

    def log_lik(f):
        return float(special.log_ndtr(y * f).sum())

    def log_post(theta, nu):
        if np.any(theta < lo) or np.any(theta > hi):
            return -math.inf
        z = (theta - centre) / scale
        return log_lik(factor(theta) @ nu) - 0.5 * float(z @ z)

    theta, nu = centre.copy(), np.zeros(len(y))
    Lk = factor(theta)
    total = np.zeros(len(test))
    kept = 0
    for it in range(iterations):
        for _ in range(3):  # elliptical slice steps on nu, prior N(0, I), f = Lk nu
            e = rng.standard_normal(len(y))
            level = log_lik(Lk @ nu) + math.log(rng.random())
            angle = rng.uniform(0, 2 * math.pi)
            low, high = angle - 2 * math.pi, angle
            while True:
                proposal = nu * math.cos(angle) + e * math.sin(angle)
                if log_lik(Lk @ proposal) > level:
                    nu = proposal
                    break
                low, high = (angle, high) if angle < 0 else (low, angle)
                angle = rng.uniform(low, high)
        for j in range(len(theta)):  # step-out slice sampling of each log-hyperparameter
            current = log_post(theta, nu)
            level = current + math.log(rng.random())
            left = theta[j] - rng.random()
            right = left + 1.0
            for _ in range(10):
                trial = theta.copy()
                trial[j] = left
                if log_post(trial, nu) <= level:
                    break
                left -= 1.0
            for _ in range(10):
                trial = theta.copy()
                trial[j] = right
                if log_post(trial, nu) <= level:
                    break
                right += 1.0
            while True:
                trial = theta.copy()
                trial[j] = rng.uniform(left, right)
                if log_post(trial, nu) > level:
                    theta = trial
                    break
                left, right = (trial[j], right) if trial[j] < theta[j] else (left, trial[j])
        Lk = factor(theta)
        if it >= warmup and (it - warmup) % thin == 0:
            k_star = fe.kernel(
                u, test, np.exp(theta[:d]), math.exp(theta[d]), math.exp(theta[d + 1])
            )
            v = linalg.solve_triangular(Lk, k_star, lower=True)
            var = math.exp(theta[d]) + math.exp(theta[d + 1]) - (v * v).sum(0)
            total += special.ndtr((v.T @ nu) / np.sqrt(1.0 + np.maximum(var, 0.0)))
            kept += 1
    return total / kept


def accuracy(ns: list[int], ds: list[int], seeds: int) -> None:
    methods = (
        "laplace probit",
        "laplace logistic",
        "ep probit",
        "ep at laplace's theta",
        "ep at laplace's theta, zero mean",
        "fully Bayesian probit",
    )
    print(
        "d\tn\tseed\t" + "\t".join(f"{m}: log loss\tBrier\ts" for m in methods) + "\tchains differ"
    )
    sums = {m: np.zeros(3) for m in methods}
    rows = 0
    for d in ds:
        for n in ns:
            for seed in range(seeds):
                u, success, test, truth = problem(n, d, seed)
                cells = []
                for m in methods:
                    started = time.perf_counter()
                    if m == "fully Bayesian probit":
                        chains = [fully_bayesian(u, success, test, 2 * seed + c) for c in (0, 1)]
                        p = 0.5 * (chains[0] + chains[1])
                    elif m.endswith("zero mean"):
                        p = zero_mean(u, success.astype(float), seed).p_success(test)
                    elif m == "ep probit":
                        p = fe.fit(u, success, seed, inference="ep", evidence="ep").p_success(test)
                    elif m == "ep at laplace's theta":
                        p = fe.fit(u, success, seed).p_success(test)
                    else:
                        lik = m.split()[1]
                        model = fe.fit(u, success, seed, lik, inference="laplace")
                        p = model.p_success(test)
                    row = np.array([*scores(p, truth), time.perf_counter() - started])
                    sums[m] += row
                    cells.append("\t".join(f"{x:.4f}" for x in row))
                rows += 1
                spread = float(np.abs(chains[0] - chains[1]).mean())
                print(f"{d}\t{n}\t{seed}\t" + "\t".join(cells) + f"\t{spread:.4f}", flush=True)
    print("mean over " + str(rows) + " problems:")
    for m in methods:
        log_loss, brier, seconds = sums[m] / rows
        print(f"  {m}: log loss {log_loss:.4f}, Brier {brier:.4f}, {seconds:.2f} s")


# the priors before issue 50: a latent sd of 2, the regression GP's lengthscale prior
EARLIER_PRIORS = {
    "LOG_LENGTHSCALE_PRIOR": (0.0, math.sqrt(3.0)),
    "LOG_VARIANCE_PRIOR": (math.log(4.0), 1.5),
    "LOG_BIAS_PRIOR": (math.log(4.0), 1.5),
}


def priors(ns: list[int], ds: list[int], seeds: int) -> None:
    """The default model (EP at Laplace's hyperparameters) under the earlier priors and under
    today's, on :func:`accuracy`'s problems: held-out log loss and Brier score, mean of all."""
    from fbgp_al.worker.feasibility import evidence

    today = {name: getattr(evidence, name) for name in EARLIER_PRIORS}
    sums = {"earlier": np.zeros(2), "today": np.zeros(2)}
    rows = 0
    print("d\tn\tseed\tearlier: log loss\tBrier\ttoday: log loss\tBrier")
    for d in ds:
        for n in ns:
            for seed in range(seeds):
                u, success, test, truth = problem(n, d, seed)
                cells = []
                for name, values in (("earlier", EARLIER_PRIORS), ("today", today)):
                    for key, value in values.items():
                        setattr(evidence, key, value)
                    row = np.array(scores(fe.fit(u, success, seed).p_success(test), truth))
                    sums[name] += row
                    cells.append(f"{row[0]:.4f}\t{row[1]:.4f}")
                for key, value in today.items():
                    setattr(evidence, key, value)
                rows += 1
                print(f"{d}\t{n}\t{seed}\t" + "\t".join(cells), flush=True)
    for name, total in sums.items():
        print(f"  {name}: log loss {total[0] / rows:.4f}, Brier {total[1] / rows:.4f}")


def timing(ns: list[int], d: int, candidates: int = 10_000) -> None:
    print(
        "n\td\tfit s\tEP at the end s\tp_success s (10,000)\tone evidence + gradient,"
        " Laplace s\tEP s\tfully Bayesian s per iteration (x 1,500 x 2 chains)"
    )
    for n in ns:
        u, success, _, _ = problem(n, d, 0)
        test = np.random.default_rng(0).random((candidates, d))
        started = time.perf_counter()
        model = fe.fit(u, success)
        fitted = time.perf_counter() - started
        started = time.perf_counter()
        fe.condition(u, success, model.lengthscale, model.variance, model.bias)
        conditioned = time.perf_counter() - started
        started = time.perf_counter()
        model.p_success(test)
        predicted = time.perf_counter() - started
        evaluations = []
        for inference in fe.INFERENCES:
            started = time.perf_counter()
            fe.log_marginal(
                u,
                success,
                model.lengthscale,
                model.variance,
                model.bias,
                gradient=True,
                inference=inference,
            )
            evaluations.append(time.perf_counter() - started)
        started = time.perf_counter()
        fully_bayesian(u, success, test[:1], 0, iterations=20, warmup=19, thin=1)
        per_iteration = (time.perf_counter() - started) / 20
        print(
            f"{n}\t{d}\t{fitted:.2f}\t{conditioned:.2f}\t{predicted:.3f}\t{evaluations[0]:.3f}"
            f"\t{evaluations[1]:.3f}\t{per_iteration:.4f} ({per_iteration * 3000:.0f} s)",
            flush=True,
        )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    acc = sub.add_parser("accuracy")
    acc.add_argument("--n", type=int, nargs="+", default=[20, 40, 80])
    acc.add_argument("--d", type=int, nargs="+", default=[1, 2, 3])
    acc.add_argument("--seeds", type=int, default=4)
    pri = sub.add_parser("priors")
    pri.add_argument("--n", type=int, nargs="+", default=[20, 40, 80])
    pri.add_argument("--d", type=int, nargs="+", default=[1, 2, 3])
    pri.add_argument("--seeds", type=int, default=4)
    tim = sub.add_parser("timing")
    tim.add_argument("--n", type=int, nargs="+", default=[100, 400])
    tim.add_argument("--d", type=int, default=3)
    args = parser.parse_args(argv)
    if args.what == "accuracy":
        accuracy(args.n, args.d, args.seeds)
    elif args.what == "priors":
        priors(args.n, args.d, args.seeds)
    else:
        timing(args.n, args.d)


if __name__ == "__main__":
    main()
