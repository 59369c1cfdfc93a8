"""``fbgp-al bench-failures --url URL [...]``: simulators with a failure region each, run with
the failure model and without it.

A case (:mod:`.failure_cases`, :func:`case_region`) is a simulator and its failure region. A
simulator's own case fails in a box around the steepest part of its mean function, where active
learning wants to go: the point of largest gradient (central differences in unit-cube units)
among 4,096 seeded uniform points, and a cube around it (clipped to the unit cube) whose
half-width is chosen by bisection so that it covers ``FRACTION`` of the domain (estimated on
65,536 seeded points; :func:`region`). ``SIMULATOR-face`` and ``SIMULATOR-corner`` put it at the
face or the corner of the box nearest that point, where the acquisitions like to go, and
``mixed`` is a beam of float, int and choice inputs failing in its steepest corner. A run there
raises, and the runner reports it failed.

For each repetition x case x failure model (``classifier`` with its defaults, and
``none``), a campaign of the simulator's inputs and grid pool, its repetition as its seed, is
labeled by the noisy simulator to ``--labels`` labels (the noise at a point drawn from the
repetition and the point alone, :func:`noise_at`, so that the arms of a repetition see the same
label wherever they both put one; ``mode`` sequential, the paper's;
``max_failures`` high enough that a campaign without the model is never ``failing``). It
reports the runs wasted in the region (failed runs over all runs, and after the initial design)
and the RMSE of the model's mean against the noise-free function over 2,000 seeded uniform
points of the feasible domain: of the final model, and of every model version, as a curve over
its number of labels (:func:`run_one`); the runs lost after the design against random
sampling's expected loss on as many runs, and the final failure model's Brier score over the
whole domain (:func:`brier`). :mod:`.failure_report` reads the records: the table, the RD-AUC
of the areas under the RMSE curves of ``classifier`` against ``none``, and each classifier
arm against the failure model's two goals (the runs lost after the design against a third of random
sampling's, the final error against ``none``'s on the same seeds). ``--table FILE ...``
prints them for records written before, by one run or by several.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from dataclasses import dataclass

import numpy as np

from fbgp_al.clients.client import FbgpClient
from fbgp_al.clients.errors import ApiError, RefitFailed
from fbgp_al.clients.reproduction.failure_cases import (
    WHERES,
    MixedBeam,
    corner,
    face,
    mixed_region,
    pool_share,
)
from fbgp_al.clients.reproduction.failure_refit import spread_table, with_spread
from fbgp_al.clients.reproduction.failure_report import goals, read_records, table
from fbgp_al.clients.reproduction.failure_trace import TRACED_RUNS, report
from fbgp_al.clients.runner import run_simulator
from fbgp_al.clients.simulators import SIMULATORS, Simulator, get_simulator
from fbgp_al.worker.vocabulary.defaults import MCMC_PRESETS

FRACTION = 0.15  # of the domain that fails (a region of 5 to 30% is the case to measure)
SIMULATORS_FAILING = ("gramacy1d", "branin", "ishigami")
# the default cases: the steepest part of three simulators, a face, a corner, mixed inputs
CASES = (*SIMULATORS_FAILING, "branin-face", "ishigami-corner", "mixed")
TEST_POINTS = 2000
FINAL_MODEL_WAIT = 600.0  # seconds to wait for the model of a campaign's last label


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


def case_region(name: str, fraction: float = FRACTION, seed: int = 0):
    """The simulator and failure region of case ``name`` (:mod:`.failure_cases`): a simulator's
    name (:func:`region`), ``SIMULATOR-corner`` or ``SIMULATOR-face``, or ``mixed``. The
    region's ``fraction`` is its share of the pool (:func:`.failure_cases.pool_share`)."""
    if name == "mixed":
        sim = MixedBeam()
        centre, lower, upper = mixed_region()
        return sim, Region(centre, lower, upper, pool_share(sim, lower, upper))
    base, _, where = name.partition("-")
    sim = get_simulator(base)
    if not where:
        box = region(sim, fraction, seed)
        return sim, Region(box.centre, box.lower, box.upper, pool_share(sim, box.lower, box.upper))
    if where not in WHERES:
        raise ValueError(f"case {name!r}: the region must be one of {WHERES}")
    centre = steepest(sim, seed=seed)
    lower, upper = (corner if where == "corner" else face)(centre, fraction)
    return sim, Region(centre, lower, upper, pool_share(sim, lower, upper))


def test_points(sim, seed: int) -> np.ndarray:
    """``4 x TEST_POINTS`` seeded uniform points of the unit cube, snapped to the pool where
    the simulator has inputs other than floats (``snap``)."""
    u = np.random.default_rng([seed, 11]).random((4 * TEST_POINTS, sim.dim))
    return sim.snap(u) if hasattr(sim, "snap") else u


def feasible_points(sim, where: Region, seed: int) -> np.ndarray:
    """Repetition ``seed``'s feasible test points (pool coordinates): those of
    :func:`test_points` outside the region ``where``, the first ``TEST_POINTS``."""
    test = test_points(sim, seed)
    return test[~where.contains(test)][:TEST_POINTS]


def feasible_test(name: str, seed: int):
    """Case ``name``'s simulator and repetition ``seed``'s feasible test points."""
    sim, where = case_region(name)
    return sim, feasible_points(sim, where, seed)


def brier(p_success, failing: np.ndarray) -> float | None:
    """The Brier score of probabilities of success against the outcomes (``failing``: the points
    that fail): ``mean((p - success)^2)``. None without probabilities (no failure model)."""
    if p_success is None:
        return None
    p = np.asarray(p_success, dtype=float)
    return float(np.mean((p - (~np.asarray(failing, dtype=bool)).astype(float)) ** 2))


def run_one(
    url: str,
    sim: Simulator,
    where: Region,
    model: str,
    labels: int,
    seed: int,
    token: str | None = None,
    mcmc=None,
    case: str | None = None,
) -> dict:
    """One campaign of ``sim`` failing in ``where``, failure model ``model``, to ``labels``
    labels: its runs, failures (all, and after the design: after the run that brought the
    design's last label, :func:`design_end`), the feasible RMSE of its models,
    random sampling's expected loss and the failure model's Brier score.

    ``rmse_curve``: ``[[n_labeled, rmse], ...]``, one per model version, the RMSE over the
    feasible test points of the latest model with that many labels seen here. It is measured
    before every run that succeeds (a sequential campaign hands out a point only once the model
    of the previous label is in place; before the first model ``/predict`` answers 404) and
    once at the end, after waiting for the model of the last label; ``rmse_feasible`` is that
    final model's. ``random_loss``: the runs after the design times the region's share of the
    pool, what as many uniform draws from the pool would lose on average. ``design_runs``: the
    runs the design took (its labels and its points' failed runs). ``failed_at``: the
    first 100 failed runs' indices among the runs and their pool coordinates; ``runs_at``: the
    first ``TRACED_RUNS`` runs' pool coordinates and whether each failed
    (:mod:`.failure_trace`). ``brier``: of the
    final model's ``p_success`` at ``TEST_POINTS`` seeded points of the whole domain (snapped to
    the pool where it has int or choice inputs; None without a failure model)."""
    runs: list[bool] = []  # per run in order: whether it failed
    labeled_at: list[list] = []  # per label in order: its pool coordinates
    failed_at: list[list] = []  # per failed run: its index among the runs and its pool coordinates
    runs_at: list[list] = []  # per run in order: its pool coordinates and whether it failed
    test = test_points(sim, seed)
    x_test = sim.from_unit(feasible_points(sim, where, seed))
    x_all = sim.from_unit(test[:TEST_POINTS])
    failing = where.contains(test[:TEST_POINTS])
    truth = sim.mean(x_test)
    curve: dict[int, float] = {}  # model version (its labels) -> feasible RMSE

    def measure(api: FbgpClient, campaign_id: str) -> float | None:
        try:
            prediction = api.predict(campaign_id, x_test.tolist())
        except ApiError as error:
            if error.status_code == 404:  # no model yet (the initial design)
                return None
            raise
        rmse = float(np.sqrt(np.mean((np.asarray(prediction.mean) - truth) ** 2)))
        if prediction.model_version is not None:
            curve[int(prediction.model_version)] = rmse
        return rmse

    body = {
        "name": f"failures-{case or sim.name}-{model}-{seed}",
        "inputs": sim.inputs(),
        "pool": sim.pool,
        "max_labels": labels,
        "seed": seed,
        "failures": failures_option(model),
        "max_failures": 100 * labels,
    }
    if mcmc is not None:
        body["mcmc"] = dict(MCMC_PRESETS[mcmc])
    with FbgpClient(url, token) as api:
        campaign = api.create_campaign(body)
        design = int(campaign.spec["initial_design"]["size"])

        def simulate(x: list) -> float:
            unit = sim.to_unit([x])
            inside = bool(where.contains(unit)[0])
            runs.append(inside)
            if len(runs_at) < TRACED_RUNS:
                runs_at.append([np.round(unit[0], 4).tolist(), inside])
            if inside:
                if len(failed_at) < 100:
                    failed_at.append([len(runs) - 1, np.round(unit[0], 4).tolist()])
                raise RuntimeError("the solver diverged (inside the failure region)")
            measure(api, campaign.id)
            labeled_at.append(np.round(unit[0], 4).tolist())
            return float(sim.sample([x], noise_at(seed, unit[0]))[0])

        ended = "done"
        try:
            run_simulator(url, campaign.id, simulate, token=token)
        except ApiError as error:  # stalled: no point left that the failure model allows
            ended = f"HTTP {error.status_code}"
        n_labeled = api.campaign(campaign.id).n_labeled
        with contextlib.suppress(TimeoutError, RefitFailed):
            api.wait_for_model(campaign.id, n_labeled, timeout=FINAL_MODEL_WAIT)
        rmse = measure(api, campaign.id)
        score = None
        with contextlib.suppress(ApiError):
            score = brier(api.predict(campaign.id, x_all.tolist()).p_success, failing)
        api.delete_campaign(campaign.id, missing_ok=True)
    ended = design_end(runs, design)
    after = runs[ended:]
    return {
        "simulator": case or sim.name,
        "model": model,
        "seed": seed,
        "runs": len(runs),
        "failed": int(sum(runs)),
        "design_runs": ended,
        "runs_after_design": len(after),
        "failed_after_design": int(sum(after)),
        "rmse_feasible": rmse,
        "region_fraction": where.fraction,
        "ended": ended,
        "design": design,
        "labels": labels,
        "n_labeled": n_labeled,
        "random_loss": len(after) * where.fraction,
        "brier": score,
        "rmse_curve": [[n, curve[n]] for n in sorted(curve)],
        "failed_at": failed_at,
        "runs_at": runs_at,
        "labeled_at": labeled_at,
        "noise": "per point",
    }


def noise_at(seed: int, unit) -> np.random.Generator:
    """The noise of a run at pool coordinates ``unit`` in repetition ``seed``: a generator seeded
    by both, so that every arm of a repetition that labels a point gets the same label there
    (common random numbers: two arms' errors then differ by where they put their labels, not by
    their labels' noise, which alone moves a final RMSE by about 18% on gramacy1d and branin)."""
    return np.random.default_rng([seed, 7, *np.round(np.asarray(unit) * 1e4).astype(np.int64)])


def design_end(failed: list[bool], design: int) -> int:
    """The number of runs the initial design took: up to its ``design``-th success (a design
    point whose run fails is replaced by the next of the design's reserve, a run that is still
    the design's, not the model's choice); all runs when the design never ended."""
    if design <= 0:
        return 0
    successes = np.cumsum(~np.asarray(failed, dtype=bool))
    ended = np.flatnonzero(successes >= design)
    return int(ended[0]) + 1 if len(ended) else len(failed)


ARM_OPTIONS = ("weight_quantile", "bracket")  # what an arm ``classifier@KEY=VALUE`` may set


def failures_option(model: str) -> dict:
    """A campaign's ``failures`` for a benchmark's model: ``none``, ``classifier`` (the
    defaults), ``classifier@Q`` (the classifier with ``weight_quantile`` Q), or
    ``classifier@KEY=VALUE,...`` (``KEY`` one of ``ARM_OPTIONS``; ``classifier@bracket=0``)."""
    kind, _, options = model.partition("@")
    if kind not in ("classifier", "none") or (options and kind != "classifier"):
        raise ValueError(f"unknown model {model!r}: none, classifier or classifier@OPTIONS")
    body: dict = {"model": kind}
    for option in filter(None, options.split(",")):
        key, _, value = option.rpartition("=")
        key = key or "weight_quantile"
        if key not in ARM_OPTIONS:
            raise ValueError(f"unknown option {key!r} in {model!r}: one of {ARM_OPTIONS}")
        body[key] = float(value)
    return body


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="fbgp-al bench-failures", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--url", help="the service (required but with --later)")
    parser.add_argument("--token", default=None)
    parser.add_argument(
        "--simulators",
        nargs="+",
        default=None,
        choices=sorted(SIMULATORS),
        help="cases failing around each simulator's steepest point",
    )
    parser.add_argument(
        "--cases",
        nargs="+",
        default=None,
        help=f"cases: SIMULATOR, SIMULATOR-corner, SIMULATOR-face or mixed [{' '.join(CASES)}]",
    )
    parser.add_argument("--labels", type=int, default=30)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument(
        "--fraction",
        type=float,
        default=FRACTION,
        help="the share of each domain that fails [0.15]",
    )
    parser.add_argument(
        "--mcmc",
        default=None,
        choices=sorted(MCMC_PRESETS),
        help="the campaigns' mcmc preset (e.g. fast) [the service's default]",
    )
    parser.add_argument(
        "--models",
        nargs="+",
        default=["classifier", "none"],
        help="classifier (the defaults), classifier@Q (weight_quantile Q), "
        "classifier@KEY=VALUE,... (weight_quantile, bracket: classifier@bracket=0) or none "
        "[classifier none]",
    )
    parser.add_argument("--out", default=None, help="append each run's record here (JSONL)")
    parser.add_argument(
        "--later",
        metavar="FILE",
        help="print where the later failures of FILE's records fell (clients.reproduction."
        "failure_trace) and run nothing",
    )
    parser.add_argument(
        "--table",
        nargs="+",
        metavar="FILE",
        help="print the table and the goals (clients.reproduction.failure_report) of the "
        "records in these JSONL files and run nothing",
    )
    parser.add_argument(
        "--spread",
        nargs="+",
        metavar="FILE",
        help="refit each record's labels under 8 other draws of their noise (clients."
        "reproduction.failure_refit), print their RMSEs and the goals, append the records "
        "with them (rmse_noise) to --out; run nothing",
    )
    args = parser.parse_args(argv)
    if args.spread:
        records = with_spread(read_records(args.spread), feasible_test)
        if args.out:
            with open(args.out, "a") as f:
                f.writelines(json.dumps(record) + "\n" for record in records)
        print(f"{spread_table(records)}\n\n{goals(records)}")
        return
    if args.table:
        records = read_records(args.table)
        print(f"{table(records)}\n\n{goals(records)}")
        return
    if args.later:
        print(report(args.later, case_region, failures_option))
        return
    if not args.url:
        parser.error("--url is required")
    cases = [*(args.simulators or []), *(args.cases or [])] or list(CASES)
    for model in args.models:
        failures_option(model)  # an unknown model fails here, before any campaign
    records = []
    for seed in range(args.first_seed, args.first_seed + args.repetitions):
        for name in cases:
            sim, where = case_region(name, args.fraction)
            for model in args.models:
                record = run_one(
                    args.url, sim, where, model, args.labels, seed, args.token, args.mcmc, name
                )
                records.append(record)
                print(json.dumps(record), file=sys.stderr, flush=True)
                if args.out:
                    with open(args.out, "a") as f:
                        f.write(json.dumps(record) + "\n")
    print(f"{table(records)}\n\n{goals(records)}")
