"""``fbgp-al bench-anywhere``: the next point from the pool, from the pool polished, or from the
box itself, side by side in process (the refit's own math, :func:`worker.fitting.sample` and
:func:`worker.fitting.rank`, as a job runs it).

Three arms on the same problems, seeds and initial designs (the paper's protocol,
:func:`clients.reproduction.protocol.run_setup`: a maximin Latin hypercube of 3 points snapped
to the problem's grid, noisy labels, one label per iteration):

- ``pool``: the campaign as it is today, the best of ``pool_subsample`` grid points;
- ``polished``: the same, its best ``starts`` polished over the box (``search.polish``);
- ``continuous``: ``"pool": {"type": "continuous"}``, ``pool_subsample`` Sobol points of the
  box each refit, polished.

Every refit warm-starts from the one before. After each: the RMSE of the draws' mean against
the noise-free function on the run's RMSE points and the NLPD of the draws' mixture at its noisy
test labels (:func:`clients.reproduction.protocol.run_setup`), the seconds of the refit's
choice (scoring, polish, accuracy estimates: :func:`worker.fitting.rank`) and of its polish
alone. The table: per problem, acquisition and arm, the final RMSE and NLPD (medians over
seeds), the RD-AUC of the RMSE and NLPD curves against ``pool`` (:func:`.rdauc.rd_auc`; NLPD's
bound the lowest value of any arm), and the median seconds of a choice.

Problems: Hartmann 6-D and Ishigami 3-D (:mod:`clients.simulators`), Friedman's 5-D function
(Friedman 1991, noise sd 0.1) and the 8-D borehole function (Morris et al. 1993, noise sd 1.0 of
its water flow), each on a grid of 100 levels per input.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time

import numpy as np
from scipy import special, stats

from fbgp_al.clients.reproduction.protocol import run_setup
from fbgp_al.clients.reproduction.rdauc import auc, rd_auc
from fbgp_al.clients.simulators import Simulator, _constant, get_simulator

ARMS = ("pool", "polished", "continuous")
BOREHOLE_BOUNDS = (
    (0.05, 0.15),  # rw, radius of the borehole (m)
    (100.0, 50_000.0),  # r, radius of influence (m)
    (63_070.0, 115_600.0),  # Tu, transmissivity of the upper aquifer (m^2/yr)
    (990.0, 1110.0),  # Hu, potentiometric head of the upper aquifer (m)
    (63.1, 116.0),  # Tl, of the lower aquifer (m^2/yr)
    (700.0, 820.0),  # Hl, of the lower aquifer (m)
    (1120.0, 1680.0),  # L, length of the borehole (m)
    (9855.0, 12_045.0),  # Kw, hydraulic conductivity of the borehole (m/yr)
)


def friedman_mean(X: np.ndarray) -> np.ndarray:
    """Friedman's function on ``[0, 1]^5``."""
    X = np.atleast_2d(X)
    return (
        10 * np.sin(math.pi * X[:, 0] * X[:, 1])
        + 20 * (X[:, 2] - 0.5) ** 2
        + 10 * X[:, 3]
        + 5 * X[:, 4]
    )


def borehole_mean(X: np.ndarray) -> np.ndarray:
    """The borehole function's water flow (m^3/yr) in its 8 inputs' own units."""
    rw, r, tu, hu, tl, hl, length, kw = np.atleast_2d(X).T
    log_ratio = np.log(r / rw)
    return (2 * math.pi * tu * (hu - hl)) / (
        log_ratio * (1 + 2 * length * tu / (log_ratio * rw**2 * kw) + tu / tl)
    )


PROBLEMS = {
    "hartmann6": get_simulator("hartmann6"),
    "friedman": Simulator("friedman", ((0.0, 1.0),) * 5, 100, friedman_mean, _constant(0.1)),
    "borehole": Simulator("borehole", BOREHOLE_BOUNDS, 100, borehole_mean, _constant(1.0)),
    "ishigami": get_simulator("ishigami"),
}


def spec_of(sim: Simulator, arm: str, acquisition: str, args, seed: int) -> dict:
    """The campaign of ``arm`` on ``sim`` (checked as ``POST /campaigns`` checks it)."""
    from fbgp_al.service.schemas.campaigns import CampaignCreate

    pool = {"type": "continuous"} if arm == "continuous" else dict(sim.pool)
    body = {
        "name": f"{sim.name}-{arm}",
        "inputs": sim.inputs(),
        "pool": pool,
        "pool_subsample": args.candidates,
        "acquisition": acquisition,
        "max_labels": 3 + args.iterations,
        "mcmc": {
            "chains": args.chains,
            "warmup": args.warmup,
            "samples": args.samples,
            "thinning": args.thinning,
        },
        "seed": seed,
    }
    if arm != "pool":
        body["search"] = {"polish": True, "starts": args.starts}
    return dict(CampaignCreate(**body).model_dump(), id=f"{sim.name}-{arm}-{seed}")


def scores(sampled, setup, mcmc: dict) -> tuple[float, float]:
    """RMSE (the draws' mean against the noise-free function at the run's RMSE points) and
    NLPD (the draws' mixture at its noisy test labels), in the labels' units, of the draws a
    campaign's ``mcmc`` hands to scoring."""
    import torch

    from fbgp_al.worker.gp import predict

    data, post = sampled.data, sampled.post.for_scoring(mcmc)
    out, std, shift = [], float(data.scale_y.std), float(data.scale_y.mean)
    for x in (setup.rmse_x, setup.test_x):
        u = torch.from_numpy(data.space.to_gp(x.tolist()))
        mean, var = predict(data.u, data.z, post.lengthscale, post.noise, u, data.noise)
        out.append((mean.numpy() * std + shift, var.numpy() * std**2))
    (rmse_mean, _), (test_mean, test_var) = out
    rmse = float(np.sqrt(np.mean((rmse_mean.mean(0) - setup.rmse_mean) ** 2)))
    log_density = stats.norm.logpdf(setup.test_y, test_mean, np.sqrt(test_var))
    nlpd = float(-np.mean(special.logsumexp(log_density, 0) - np.log(len(test_mean))))
    return rmse, nlpd


def run(sim: Simulator, arm: str, acquisition: str, seed_run: int, args, log=None) -> dict:
    """One campaign of ``arm`` on ``sim``: its run ``seed_run`` of the protocol, ``iterations``
    labels after the design; a record of its curves."""
    from fbgp_al.worker import fitting
    from fbgp_al.worker.vocabulary.design import PointPool
    from fbgp_al.worker.vocabulary.pools import pool_of

    setup = run_setup(sim, seed_run)
    spec = spec_of(sim, arm, acquisition, args, setup.seed)
    pool = PointPool(sim.to_unit(setup.initial_x)) if arm == "continuous" else pool_of(spec)
    rng = np.random.default_rng([setup.seed, 11])
    labels = [
        {"x": x.tolist(), "y": float(y), "index": None}
        for x, y in zip(setup.initial_x, setup.initial_y, strict=True)
    ]
    exclude = set() if arm == "continuous" else {int(i) for i in setup.initial_index}
    curve, previous = [], None
    while True:
        began = time.perf_counter()
        sampled = fitting.sample(spec, labels, previous)
        chosen = time.perf_counter()
        model, ranking = fitting.rank(spec, sampled, pool, exclude, [], [], began)
        done = time.perf_counter()
        rmse, nlpd = scores(sampled, setup, spec["mcmc"])
        polish = (model["diagnostics"].get("search") or {}).get("seconds", 0.0)
        curve.append([len(labels), rmse, nlpd, done - chosen, polish, chosen - began])
        if log is not None:
            print(
                f"{sim.name} {acquisition} {arm} run {seed_run}: n {len(labels)}, RMSE {rmse:.4g}, "
                f"NLPD {nlpd:.4g}, choice {done - chosen:.2f} s (polish {polish:.2f} s)",
                file=log,
                flush=True,
            )
        if len(labels) >= spec["max_labels"] or not ranking:
            break
        best = ranking[0]
        x = np.asarray(best["x"], dtype=float)[None]
        labels.append({"x": best["x"], "y": float(sim.sample(x, rng)[0]), "index": None})
        if best["index"] is not None:
            exclude.add(int(best["index"]))
        previous = model
    return {
        "problem": sim.name,
        "arm": arm,
        "acquisition": acquisition,
        "run": seed_run,
        "seed": setup.seed,
        "curve": curve,
    }


def overhead(n: int, seed: int, starts: int, log=None, acquisition: str = "qb-mgp") -> dict:
    """The seconds a refit's choice adds, at ``n`` labels of Hartmann 6-D (uniform random
    points, noisy): one posterior sampled as a default campaign samples it (the service's
    ``mcmc`` defaults), then each arm's choice by ``acquisition`` from it
    (:func:`worker.fitting.rank`), so that the arms differ by their choice alone. The
    label-to-next time of an arm is the sampling's seconds plus its choice's."""
    from fbgp_al.service.schemas.campaigns import CampaignCreate
    from fbgp_al.worker import fitting
    from fbgp_al.worker.vocabulary.design import PointPool
    from fbgp_al.worker.vocabulary.pools import pool_of

    sim = PROBLEMS["hartmann6"]
    rng = np.random.default_rng([seed, n])
    x = rng.random((n, sim.dim))
    labels = [
        {"x": a.tolist(), "y": float(b), "index": None}
        for a, b in zip(x, sim.sample(x, rng), strict=True)
    ]
    base = {
        "inputs": sim.inputs(),
        "pool": dict(sim.pool),
        "max_labels": n + 1,
        "seed": seed,
        "acquisition": acquisition,
    }
    began = time.perf_counter()
    sampled = fitting.sample(dict(CampaignCreate(**base).model_dump(), id="overhead"), labels)
    out = {"n": n, "seed": seed, "acquisition": acquisition}
    out["sample_s"] = time.perf_counter() - began
    for arm in ARMS:
        body = dict(base, pool={"type": "continuous"}) if arm == "continuous" else dict(base)
        if arm != "pool":
            body["search"] = {"polish": True, "starts": starts}
        spec = dict(CampaignCreate(**body).model_dump(), id="overhead")
        pool = PointPool(x[:3]) if arm == "continuous" else pool_of(spec)
        began = time.perf_counter()
        model, _ = fitting.rank(spec, sampled, pool, set(), [], [], began)
        out[f"{arm}_s"] = time.perf_counter() - began
        out[f"{arm}_polish_s"] = (model["diagnostics"].get("search") or {}).get("seconds", 0.0)
    if log is not None:
        print(json.dumps(out), file=log, flush=True)
    return out


def _median(values) -> float:
    return statistics.median(values) if values else float("nan")


def table(records: list[dict]) -> str:
    """The records' table (one row per problem, acquisition and arm)."""
    lines = [
        "| problem | acquisition | arm | runs | final RMSE | final NLPD | RMSE RD-AUC vs pool (%) "
        "| NLPD RD-AUC vs pool (%) | choice s, median | of it polish s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    groups = sorted({(r["problem"], r["acquisition"]) for r in records})
    for problem, acquisition in groups:
        by_arm = {
            arm: {
                r["run"]: r
                for r in records
                if (r["problem"], r["acquisition"], r["arm"]) == (problem, acquisition, arm)
            }
            for arm in ARMS
        }
        lowest = min(c[2] for arm in by_arm.values() for r in arm.values() for c in r["curve"])
        for arm in ARMS:
            runs = by_arm[arm]
            if not runs:
                continue
            base = by_arm["pool"]
            common = sorted(set(base) & set(runs))
            cells = []
            for k, bound in ((1, 0.0), (2, lowest)):
                if arm == "pool" or not common:
                    cells.append("baseline" if arm == "pool" else "")
                    continue
                x = np.array([c[0] for c in base[common[0]]["curve"]], dtype=float)
                b = [auc([c[k] for c in base[s]["curve"]], x) for s in common]
                new = [auc([c[k] for c in runs[s]["curve"]], x) for s in common]
                rd = rd_auc(b, new, float(auc(np.full(len(x), bound), x)))
                cells.append(f"{100 * rd.mean:.1f} ± {100 * rd.sd:.1f}")
            final = [r["curve"][-1] for r in runs.values()]
            choice = [c[3] for r in runs.values() for c in r["curve"]]
            polish = [c[4] for r in runs.values() for c in r["curve"]]
            lines.append(
                f"| {problem} | {acquisition} | {arm} | {len(runs)} "
                f"| {_median([f[1] for f in final]):.4g} | {_median([f[2] for f in final]):.4g} "
                f"| {cells[0]} | {cells[1]} | {_median(choice):.2f} | {_median(polish):.2f} |"
            )
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="fbgp-al bench-anywhere", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--problems", nargs="+", default=sorted(PROBLEMS), choices=sorted(PROBLEMS))
    parser.add_argument("--acquisitions", nargs="+", default=["qb-mgp"])
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    parser.add_argument("--runs", type=int, default=5, help="repetitions (protocol runs) [5]")
    parser.add_argument("--first-run", type=int, default=0)
    parser.add_argument("--iterations", type=int, default=40, help="labels after the design [40]")
    parser.add_argument("--candidates", type=int, default=10_000, help="pool_subsample [10000]")
    parser.add_argument("--starts", type=int, default=5, help="search.starts [5]")
    parser.add_argument("--chains", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--samples", type=int, default=60)
    parser.add_argument("--thinning", type=int, default=2)
    parser.add_argument("--out", default=None, help="append each run's record here (JSONL)")
    parser.add_argument("--table", default=None, help="print the table of a records file")
    parser.add_argument(
        "--overhead",
        type=int,
        default=None,
        metavar="N",
        help="instead: the seconds each arm's choice takes at N labels of Hartmann 6-D, "
        "beside the sampling's, on --runs seeds, for each of --acquisitions",
    )
    args = parser.parse_args(argv)
    if args.overhead:
        for seed in range(args.first_run, args.first_run + args.runs):
            for acquisition in args.acquisitions:
                overhead(args.overhead, seed, args.starts, sys.stdout, acquisition)
        return
    if args.table:
        with open(args.table) as f:
            print(table([json.loads(line) for line in f]))
        return
    records = []
    for seed_run in range(args.first_run, args.first_run + args.runs):
        for name in args.problems:
            for acquisition in args.acquisitions:
                for arm in args.arms:
                    record = run(PROBLEMS[name], arm, acquisition, seed_run, args, sys.stderr)
                    records.append(record)
                    if args.out:
                        with open(args.out, "a") as f:
                            f.write(json.dumps(record) + "\n")
    print(table(records))


if __name__ == "__main__":
    main()
