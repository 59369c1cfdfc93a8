"""``fbgp-al bench-failures --url URL [...]``: the paper's simulators with a failure region each,
run with the failure model and without it.

Each simulator fails in a box around the steepest part of its mean function, where active
learning wants to go: the point of largest gradient (central differences in unit-cube units)
among 4,096 seeded uniform points, and a cube around it (clipped to the unit cube) whose
half-width is chosen by bisection so that it covers ``FRACTION`` of the domain (estimated on
65,536 seeded points; :func:`region`). A run there raises, and the runner reports it failed.

For each repetition x simulator x failure model (``classifier`` with its defaults, and
``none``), a campaign of the simulator's inputs and grid pool, its repetition as its seed, is
labeled by the noisy simulator to ``--labels`` labels (``mode`` sequential, the paper's;
``max_failures`` high enough that a campaign without the model is never ``failing``). It
reports the runs wasted in the region (failed runs over all runs, and after the initial design)
and the final model's RMSE of its mean against the noise-free function over 2,000 seeded
uniform points of the feasible domain. Not measured here: the RD-AUC of the RMSE over every
model version (the reproduction's :mod:`clients.reproduction.rdauc` would need each version's
predictions on the feasible domain).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass

import numpy as np

from clients.client import FbgpClient
from clients.errors import ApiError
from clients.runner import run_simulator
from clients.simulators import SIMULATORS, Simulator, get_simulator

FRACTION = 0.15  # of the domain that fails (a region of 5 to 30% is the case to measure)
SIMULATORS_FAILING = ("gramacy1d", "branin", "ishigami")
TEST_POINTS = 2000


@dataclass(frozen=True)
class Region:
    """A failure region: a box of the unit cube (``lower``, ``upper``) around ``centre``, the
    steepest point found, covering ``fraction`` of the domain."""

    centre: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    fraction: float

    def contains(self, u: np.ndarray) -> np.ndarray:
        """Whether each row of ``u`` (``m x d``, the unit cube) is inside."""
        u = np.atleast_2d(u)
        return np.all((u >= self.lower) & (u <= self.upper), axis=1)


def steepest(sim: Simulator, samples: int = 4096, seed: int = 0) -> np.ndarray:
    """The point of the unit cube where the mean's gradient (central differences of step 1e-4
    in unit-cube units, one-sided at the bounds) is largest, among ``samples`` seeded points."""
    u = np.random.default_rng(seed).random((samples, sim.dim))
    grad = np.zeros_like(u)
    h = 1e-4
    for j in range(sim.dim):
        up, down = u.copy(), u.copy()
        up[:, j] = np.minimum(u[:, j] + h, 1.0)
        down[:, j] = np.maximum(u[:, j] - h, 0.0)
        rise = sim.mean(sim.from_unit(up)) - sim.mean(sim.from_unit(down))
        grad[:, j] = rise / (up[:, j] - down[:, j])
    return u[int(np.argmax((grad * grad).sum(1)))]


def region(sim: Simulator, fraction: float = FRACTION, seed: int = 0) -> Region:
    """The failure region of ``sim``: a cube around :func:`steepest`'s point, clipped to the
    unit cube, whose half-width makes it cover ``fraction`` of the domain (bisection on a
    Monte Carlo estimate from 65,536 seeded points)."""
    centre = steepest(sim, seed=seed)
    probe = np.random.default_rng([seed, 1]).random((65_536, sim.dim))
    low, high = 0.0, 1.0
    for _ in range(40):
        half = 0.5 * (low + high)
        inside = np.all(np.abs(probe - centre) <= half, axis=1).mean()
        low, high = (half, high) if inside < fraction else (low, half)
    half = 0.5 * (low + high)
    lower, upper = np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)
    covered = float(np.prod(upper - lower))
    return Region(centre, lower, upper, covered)


def run_one(url: str, sim: Simulator, where: Region, model: str, labels: int, seed: int,
            token: str | None = None) -> dict:  # fmt: skip
    """One campaign of ``sim`` failing in ``where``, failure model ``model``, to ``labels``
    labels: its runs, failures (all, and after the design) and final feasible RMSE."""
    rng = np.random.default_rng([seed, 7])
    runs: list[bool] = []  # per run in order: whether it failed

    def simulate(x: list) -> float:
        inside = bool(where.contains(sim.to_unit(np.array([x], dtype=float)))[0])
        runs.append(inside)
        if inside:
            raise RuntimeError("the solver diverged (inside the failure region)")
        return float(sim.sample(np.array([x], dtype=float), rng)[0])

    body = {"name": f"failures-{sim.name}-{model}-{seed}", "inputs": sim.inputs(),
            "pool": sim.pool, "max_labels": labels, "seed": seed,
            "failures": {"model": model}, "max_failures": 100 * labels}  # fmt: skip
    with FbgpClient(url, token) as api:
        campaign = api.create_campaign(body)
        design = int(campaign.spec["initial_design"]["size"])
        ended = "done"
        try:
            run_simulator(url, campaign.id, simulate, token=token)
        except ApiError as error:  # stalled: no point left that the failure model allows
            ended = f"HTTP {error.status_code}"
        test = np.random.default_rng([seed, 11]).random((4 * TEST_POINTS, sim.dim))
        test = test[~where.contains(test)][:TEST_POINTS]
        x = sim.from_unit(test)
        mean = np.asarray(api.predict(campaign.id, x.tolist()).mean)
        rmse = float(np.sqrt(np.mean((mean - sim.mean(x)) ** 2)))
        api.delete_campaign(campaign.id, missing_ok=True)
    after = runs[design:]
    return {"simulator": sim.name, "model": model, "seed": seed, "runs": len(runs),
            "failed": int(sum(runs)), "runs_after_design": len(after),
            "failed_after_design": int(sum(after)), "rmse_feasible": rmse,
            "region_fraction": where.fraction, "ended": ended}  # fmt: skip


def table(records: list[dict]) -> str:
    """Markdown: per simulator and model, the share of runs failed (all; after the design), as
    the median over repetitions and pooled, and the median feasible RMSE."""
    lines = ["| simulator | region | model | reps | runs failed (pooled) | after the design, "
             "median share | feasible RMSE, median |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    keys = sorted({(r["simulator"], r["model"]) for r in records})
    for name, model in keys:
        rs = [r for r in records if r["simulator"] == name and r["model"] == model]
        failed, runs = sum(r["failed"] for r in rs), sum(r["runs"] for r in rs)
        share = statistics.median(r["failed_after_design"] / max(1, r["runs_after_design"])
                                  for r in rs)  # fmt: skip
        rmse = statistics.median(r["rmse_feasible"] for r in rs)
        lines.append(f"| {name} | {rs[0]['region_fraction']:.0%} | {model} | {len(rs)} | "
                     f"{failed}/{runs} | {share:.1%} | {rmse:.4g} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="fbgp-al bench-failures", description=__doc__.split(
        "\n\n")[0])  # fmt: skip
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", default=None)
    parser.add_argument("--simulators", nargs="+", default=list(SIMULATORS_FAILING),
                        choices=sorted(SIMULATORS))  # fmt: skip
    parser.add_argument("--labels", type=int, default=30)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--fraction", type=float, default=FRACTION,
                        help="the share of each domain that fails [0.15]")  # fmt: skip
    parser.add_argument("--out", default=None, help="append each run's record here (JSONL)")
    args = parser.parse_args(argv)
    records = []
    for seed in range(args.repetitions):
        for name in args.simulators:
            sim = get_simulator(name)
            where = region(sim, args.fraction)
            for model in ("classifier", "none"):
                record = run_one(args.url, sim, where, model, args.labels, seed, args.token)
                records.append(record)
                print(json.dumps(record), file=sys.stderr, flush=True)
                if args.out:
                    with open(args.out, "a") as f:
                        f.write(json.dumps(record) + "\n")
    print(table(records))
