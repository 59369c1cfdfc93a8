"""``fbgp-al bench-fidelity``: multi-fidelity active learning against single-fidelity, in
process, on the literature's two-level problems (:mod:`.fidelity_problems`).

Both arms fit the same model family by NUTS (:mod:`worker.fidelity.model`; one level is the paper's
GP) and choose by the same criterion (:func:`worker.fidelity.acquisition.choose`): the top level's
integrated variance removed per unit of cost (``ivr``), or a disagreement acquisition of the top
level with the level by that (``qb-mgp``, ``b-qbc``, ``b-alm``): ``single`` runs the expensive level
only, ``multi`` either level. Both start from the same Latin hypercube of ``d + 2`` expensive runs,
``multi`` with ``2 (d + 2)`` cheap ones besides, and run until their cost reaches ``budget``
expensive runs (by default the problem's ``BUDGETS``), each refit warm-started from the one before
(and, from ``laplace_from`` runs on, drawn from the Laplace mixture as a campaign's refits are:
:func:`worker.fitting.fidelity.sampled`).
After every run: the top level's RMSE and NLPD (the draws' mixture) on 1,000 seeded uniform points,
against the cost spent. The table: per problem, acquisition and arm, the final RMSE and NLPD
(medians over seeds), the cost at which ``multi`` first reached ``single``'s final RMSE (median, and
its share of the budget), and the RD-AUC of the RMSE curves over cost (``multi`` against
``single``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys

import numpy as np
from scipy import special, stats
from scipy.stats import qmc

from fbgp_al.clients.reproduction.fidelity_problems import PROBLEMS, Problem
from fbgp_al.clients.reproduction.rdauc import auc, rd_auc
from fbgp_al.worker.fidelity import acquisition
from fbgp_al.worker.fidelity.model import Conditioned, Potential
from fbgp_al.worker.fitting.fidelity import kept_draws, sampled

TEST_POINTS = 1000
CANDIDATES = 256
REFERENCE = 128
NOISE_FLOOR = 1e-6
# Each problem's budget in expensive runs: twice what multi's design costs at 1:10 or more
# (forrester 3.6, currin 4.8, park 7.2, borehole 12), so that a multi-fidelity arm's design
# alone never reaches single's final error within the 60% of its cost
BUDGETS = {"forrester": 10.0, "currin": 15.0, "park": 20.0, "borehole": 24.0}


def _sobol(d: int, count: int, seed) -> np.ndarray:
    return qmc.Sobol(d, scramble=True, seed=np.random.default_rng(seed)).random(count)


def score(draws: list[Conditioned], level: int, u, truth, mean_y, sd_y) -> tuple[float, float]:
    """The top level's RMSE (the draws' mean) and NLPD (their mixture, with each draw's noise)
    at ``u`` against ``truth``, in the labels' units."""
    means, variances = [], []
    for g in draws:
        m, v = g.predict(u, level)
        means.append(m.numpy() * sd_y + mean_y)
        variances.append((v.numpy() + float(g.noise[level])) * sd_y**2)
    means, variances = np.array(means), np.array(variances)
    rmse = float(np.sqrt(np.mean((means.mean(0) - truth) ** 2)))
    log_density = stats.norm.logpdf(truth, means, np.sqrt(variances))
    nlpd = float(-np.mean(special.logsumexp(log_density, 0) - np.log(len(draws))))
    return rmse, nlpd


def run(
    problem: Problem,
    arm: str,
    costs,
    budget: float,
    seed: int,
    mcmc: dict,
    how: str = "ivr",
    log=None,
) -> dict:
    """One campaign of ``arm`` (``single`` or ``multi``) on ``problem`` until its cost reaches
    ``budget`` (in units of the expensive level's cost), choosing by ``how``
    (:func:`worker.fidelity.acquisition.choose`: ``ivr`` or a disagreement acquisition); a line
    per refit to the file ``log``, if any."""
    d, top = problem.dim, 1
    rng = np.random.default_rng([seed, 3])
    n0 = d + 2
    u = qmc.LatinHypercube(d, seed=rng).random(n0)
    t = np.ones(n0, dtype=int)
    if arm == "multi":
        u = np.r_[qmc.LatinHypercube(d, seed=rng).random(2 * n0), u]
        t = np.r_[np.zeros(2 * n0, dtype=int), t]
    y = np.concatenate([problem.at(u[t == k], k) for k in (0, 1)])
    u = np.r_[u[t == 0], u[t == 1]]
    t = np.sort(t)
    test = rng.random((TEST_POINTS, d))
    truth = problem.at(test, top)
    reference = _sobol(d, REFERENCE, [seed, 5])
    levels = 2 if arm == "multi" else 1
    arm_costs = list(costs) if arm == "multi" else [costs[top]]
    curve = []
    step, warm = 0, None
    while True:
        spent = float(sum(costs[k] for k in t)) / costs[top]
        mean_y, sd_y = float(y.mean()), float(y.std()) or 1.0
        level_of = t if arm == "multi" else np.zeros(len(t), dtype=int)
        pot = Potential(u, level_of, (y - mean_y) / sd_y, levels, NOISE_FLOOR)
        first = mcmc.get("laplace_from")
        theta, report = sampled(pot, mcmc, seed + step, warm, first is not None and len(t) >= first)
        warm = report["adaptation"]
        method = report["method"]
        draws = [Conditioned.of(pot, row) for row in kept_draws(theta, report, mcmc)]
        rmse, nlpd = score(draws, levels - 1, test, truth, mean_y, sd_y)
        check = report["max_rhat"] if method == "nuts" else report["khat"]
        curve.append([spent, rmse, nlpd, check, method])
        if log is not None:
            said = "R-hat" if method == "nuts" else "mixture, k"
            print(
                f"{problem.name} {how} {arm} seed {seed}: cost {spent:.3g}, runs {len(t)}, "
                f"RMSE {rmse:.4g}, {said} {check:.3f}",
                file=log,
                flush=True,
            )
        if spent >= budget:
            break
        candidates = _sobol(d, CANDIDATES, [seed, step, 7])
        row, level = acquisition.choose(draws, candidates, reference, arm_costs, how)
        if arm == "single":
            level = top
        u = np.r_[u, candidates[row : row + 1]]
        t = np.r_[t, level]
        y = np.r_[y, problem.at(candidates[row : row + 1], level)]
        step += 1
    return {
        "problem": problem.name,
        "arm": arm,
        "acquisition": how,
        "seed": seed,
        "costs": list(costs),
        "budget": budget,
        "laplace_from": mcmc.get("laplace_from"),
        "runs": [int((t == k).sum()) for k in (0, 1)],
        "curve": curve,
    }


def curve_auc(record: dict, grid: np.ndarray) -> float:
    """The area under the RMSE curve over ``grid`` (cost), the last value carried forward."""
    cost = np.array([c[0] for c in record["curve"]])
    rmse = np.array([c[1] for c in record["curve"]])
    at = np.searchsorted(cost, grid, side="right") - 1
    return float(auc(rmse[np.maximum(at, 0)], grid))


def reached(record: dict, target: float) -> float:
    """The cost at which the RMSE curve first reached ``target`` (inf: never)."""
    return next((c[0] for c in record["curve"] if c[1] <= target), float("inf"))


def table(records: list[dict]) -> str:
    lines = [
        "| problem | costs | acquisition | arm | seeds | final RMSE, median | final NLPD, median "
        "| cost to single's final RMSE, median | RMSE RD-AUC over cost against single (%) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def key(r):
        how = r.get("acquisition", "ivr")
        if r.get("laplace_from") is not None:
            how += f", mixture from {r['laplace_from']} runs"
        return r["problem"], tuple(r["costs"]), how

    for name, costs, how in sorted({key(r) for r in records}):
        group = [r for r in records if key(r) == (name, costs, how)]
        single = {r["seed"]: r for r in group if r["arm"] == "single"}
        multi = {r["seed"]: r for r in group if r["arm"] == "multi"}
        seeds = sorted(set(single) & set(multi))
        budget = group[0]["budget"]
        start = max(min(r["curve"][0][0] for r in group), 0.0)
        grid = np.linspace(start, budget, 200)
        for arm, runs in (("single", single), ("multi", multi)):
            if not runs:
                continue
            final = [r["curve"][-1] for r in runs.values()]
            cost, versus = (f"{budget:g}", "baseline") if arm == "single" else ("", "")
            if arm == "multi" and seeds:
                costs_at = [reached(multi[s], single[s]["curve"][-1][1]) for s in seeds]
                at = statistics.median(costs_at)
                cost = f"{at:.3g} of {budget:g} ({100 * at / budget:.0f}%)"
                rd = rd_auc(
                    [curve_auc(single[s], grid) for s in seeds],
                    [curve_auc(multi[s], grid) for s in seeds],
                )
                versus = f"{100 * rd.mean:.1f} ± {100 * rd.sd:.1f}"
            lines.append(
                f"| {name} | {':'.join(f'{c:g}' for c in costs)} | {how} | {arm} | {len(runs)} "
                f"| {statistics.median(f[1] for f in final):.4g} "
                f"| {statistics.median(f[2] for f in final):.4g} | {cost} | {versus} |"
            )
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="fbgp-al bench-fidelity",
        description="Multi-fidelity active learning against single-fidelity at the top level, "
        "side by side in process, over cost, on the literature's two-level problems.",
    )
    parser.add_argument("--problems", nargs="+", default=sorted(PROBLEMS), choices=sorted(PROBLEMS))
    parser.add_argument(
        "--ratios",
        "--ratio",
        nargs="+",
        type=float,
        default=[10.0, 3.0],
        help="expensive / cheap costs, each its own comparison [10 3]",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        help="in expensive runs [per problem: "
        + ", ".join(f"{name} {budget:g}" for name, budget in BUDGETS.items())
        + "]",
    )
    parser.add_argument(
        "--acquisitions",
        nargs="+",
        default=["ivr", "qb-mgp"],
        choices=["ivr", *acquisition.DISAGREEMENTS],
        help="how each arm chooses, each its own comparison [ivr qb-mgp]",
    )
    parser.add_argument("--seeds", type=int, default=5, help="repetitions [5]")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--chains", type=int, default=2, help="NUTS chains per refit [2]")
    parser.add_argument("--warmup", type=int, default=80, help="warm-up steps per chain [80]")
    parser.add_argument("--samples", type=int, default=60, help="kept steps per chain [60]")
    parser.add_argument("--thinning", type=int, default=6, help="every k-th kept step [6]")
    parser.add_argument(
        "--laplace-from",
        type=int,
        default=None,
        help="refits on this many runs or more draw from the Laplace mixture, as a campaign's "
        "mcmc.laplace_from (NUTS where its Pareto k is past its limit) [none: NUTS throughout]",
    )
    parser.add_argument("--out", default=None, help="append each run's record here (JSONL)")
    parser.add_argument("--table", default=None, help="print the table of a records file")
    parser.add_argument(
        "--refits",
        type=int,
        nargs="+",
        default=None,
        metavar="N",
        help="instead: a refit at N labels of each problem by NUTS and by the Laplace mixture, "
        "side by side, on --seeds data sets",
    )
    args = parser.parse_args(argv)
    if args.refits:
        from fbgp_al.clients.reproduction import fidelity_refits

        rows = []
        for n, seed, name in itertools.product(
            args.refits, range(args.first_seed, args.first_seed + args.seeds), args.problems
        ):
            done = fidelity_refits.refits(PROBLEMS[name], n, seed)
            print(fidelity_refits.table(done), file=sys.stderr, flush=True)
            rows += done
        print(fidelity_refits.table(rows))
        return
    if args.table:
        with open(args.table) as f:
            print(table([json.loads(line) for line in f]))
        return
    mcmc = {
        k: getattr(args, k) for k in ("chains", "warmup", "samples", "thinning", "laplace_from")
    }
    records = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for name, ratio in itertools.product(args.problems, args.ratios):
            budget = BUDGETS[name] if args.budget is None else args.budget
            for how, arm in itertools.product(args.acquisitions, ("single", "multi")):
                record = run(PROBLEMS[name], arm, (1.0, ratio), budget, seed, mcmc, how, sys.stderr)
                records.append(record)
                if args.out:
                    with open(args.out, "a") as f:
                        f.write(json.dumps(record) + "\n")
    print(table(records))


if __name__ == "__main__":
    main()
