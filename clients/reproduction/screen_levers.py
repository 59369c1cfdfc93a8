"""``fbgp-al bench-core --cases screen|repro-screen``: what scoring costs, in full or screened
(:func:`worker.fitting.ranking.scored`), side by side, on data sets of the simulators and on the
reproduction's own campaigns, state by state. See :mod:`clients.reproduction.core_benchmark`;
the other levers are :mod:`clients.reproduction.speed_levers`.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from fbgp_al.clients.reproduction.core_data import RESULTS, campaign_data, data, fit
from fbgp_al.clients.reproduction.protocol import grid_pool
from fbgp_al.clients.simulators import get_simulator
from fbgp_al.worker.fitting import ranking
from fbgp_al.worker.laplace import laplace_posterior
from fbgp_al.worker.scoring import Output, Scoring
from fbgp_al.worker.transforms import OutputStandardization
from fbgp_al.worker.vocabulary.defaults import (
    MCMC_DEFAULTS,
    MCMC_PRESETS,
    POOL_SUBSAMPLE,
    RANKING_SIZE,
)


def ranking_against(scores: np.ndarray, reference: np.ndarray, k: int = 10) -> dict:
    """How a ranking's ``scores`` agree with the ``reference`` scores of the same candidates:
    the reference's rank of the point chosen (0: the reference's best), the overlap of the two
    top-``k``, and the reference's score of the point chosen relative to its best."""
    order = np.argsort(-reference, kind="stable")
    where = np.empty_like(order)
    where[order] = np.arange(len(order))
    chosen = int(np.argmax(scores))
    top = set(np.argsort(-scores, kind="stable")[:k].tolist())
    return {
        "rank": int(where[chosen]),
        "overlap": len(top & set(order[:k].tolist())) / k,
        "relative": float(reference[chosen] / reference[order[0]]),
    }


def _above(rough: np.ndarray, best: int) -> int:
    """How many candidates the screen's rough scores rank above candidate ``best`` (ties in
    candidate order, as the screen's stable sort breaks them)."""
    return int(np.sum(rough > rough[best]) + np.sum(rough[:best] == rough[best]))


def compare_screening(
    simulator: str,
    n: int,
    source: str,
    seeds=(0, 1, 2),
    acquisitions=("qb-mgp", "b-alm", "bald"),
    candidates: int = 10_000,
) -> list[dict]:
    """What scoring costs (issue 40's second lever): each acquisition's ranking of
    ``candidates`` seeded uniform candidates by the defaults' refit at ``n`` labels, scored in
    full and screened (:func:`worker.fitting.ranking.scored`, forced on), side by side: the
    seconds of each, whether the point chosen is the same, and the overlap of the two kept
    rankings (their ``RANKING_SIZE`` best)."""
    u, z = campaign_data(simulator, n) if source == "campaign" else data(simulator, n)
    case = f"{simulator} n={n} {source}"
    rows = []
    for seed in seeds:
        post = (
            laplace_posterior(u, z, seed=30 + seed)
            if n >= MCMC_DEFAULTS["laplace_from"]
            else fit(u, z, MCMC_DEFAULTS, seed=30 + seed)
        )
        thin = post.for_scoring(MCMC_DEFAULTS)
        cand = torch.from_numpy(np.random.default_rng(seed).random((candidates, u.shape[1])))
        for name in acquisitions:
            fn = Scoring(name, (Output(1.0, thin, u, z, None, seed),))
            t = time.perf_counter()
            full = fn(cand).numpy()
            full_s = time.perf_counter() - t
            saved = ranking.SCREEN_WORK
            ranking.SCREEN_WORK = 0  # screen whatever the size
            try:
                t = time.perf_counter()
                screened = ranking.here(ranking.scored(name, fn, cand)).numpy()
                screened_s = time.perf_counter() - t
            finally:
                ranking.SCREEN_WORK = saved
            best_full = np.argsort(-full, kind="stable")[:RANKING_SIZE]
            best_screened = np.argsort(-screened, kind="stable")[:RANKING_SIZE]
            rough = fn.with_draws(ranking.screen_draws(fn))(cand).numpy()
            needed = _above(rough, int(best_full[0]))  # the least the screen must keep, less 1
            row = {
                "case": case,
                "seed": seed,
                "acquisition": name,
                "full_s": full_s,
                "screened_s": screened_s,
                "same_point": bool(best_full[0] == best_screened[0]),
                "overlap": len(set(best_full) & set(best_screened)) / RANKING_SIZE,
                "best_in_screen": needed,
                "exact_where_kept": bool(
                    np.allclose(
                        full[np.isfinite(screened)],
                        screened[np.isfinite(screened)],
                        rtol=1e-9,
                        atol=0,
                    )
                ),
            }
            rows.append(row)
            print(
                f"{case} seed {seed} {name:<6}: full {full_s:5.2f} s, screened "
                f"{screened_s:5.2f} s ({full_s / screened_s:.1f}x); same point: "
                f"{row['same_point']}, top-{RANKING_SIZE} overlap {row['overlap']:.2f}, "
                f"{needed} candidates above the exact best in the screen's order, "
                f"exact where kept: {row['exact_where_kept']}",
                flush=True,
            )
    return rows


def compare_reproduction_screening(
    simulator: str,
    sizes,
    runs=(0, 1, 2),
    acquisitions=("qb-mgp", "b-alm", "bald"),
    preset="paper",
    results=RESULTS,
) -> list[dict]:
    """Whether the screen changes the reproduction's campaigns: at each of ``sizes`` labels of
    each stored campaign of ``simulator`` (``docs/reproduction/results.jsonl``: its labels in
    the order it chose them), the ``preset`` refit on those labels, and the acquisition's
    scores of a seeded 10,000-point subsample of the pool less the labeled points, in full
    and as a campaign scores them (:func:`worker.fitting.ranking.scores_of`, screened where
    the work calls for it): the same next point or not, where the exact best stands in the
    screen's order, and the top-10 overlap. A campaign whose every choice is the same follows
    the same path, and so scores the same RD-AUC."""
    from fbgp_al.clients.reproduction.results import labeled_points, read_results

    sim = get_simulator(simulator)
    pool = grid_pool(sim)
    records = [r for r in read_results(results) if r["simulator"] == simulator]
    mcmc = MCMC_PRESETS[preset]
    rows = []
    for run in runs:
        for name in acquisitions:
            x, y = labeled_points(records, simulator, name, run)
            for n in sizes:
                if y is None or len(y) < n:
                    print(
                        f"{simulator} run {run} {name}: {0 if y is None else len(y)} labels "
                        f"stored, not {n}",
                        flush=True,
                    )
                    continue
                unit = sim.to_unit(x[:n])
                u = torch.from_numpy(unit)
                z = OutputStandardization.from_labels(y[:n]).to_z(y[:n])
                rng = np.random.default_rng([run, n])
                index = pool.subsample(POOL_SUBSAMPLE, rng, exclude=pool.index_of(unit))
                cand = torch.from_numpy(pool.points(index))
                t = time.perf_counter()
                post = fit(u, z, mcmc, seed=1000 * run + n)
                refit_s = time.perf_counter() - t
                fn = Scoring(name, (Output(1.0, post.for_scoring(mcmc), u, z, None, run),))
                t = time.perf_counter()
                full = fn(cand).numpy()
                full_s = time.perf_counter() - t
                t = time.perf_counter()
                served = ranking.here(ranking.scores_of(name, fn, cand)).numpy()
                served_s = time.perf_counter() - t
                rough = fn.with_draws(ranking.screen_draws(fn))(cand).numpy()
                best = int(np.argmax(full))
                row = {
                    "simulator": simulator,
                    "run": run,
                    "acquisition": name,
                    "n": n,
                    "screened": ranking.screens(name, fn, cand),
                    "same_point": best == int(np.argmax(served)),
                    "best_in_screen": _above(rough, best),
                    "overlap": ranking_against(served, full)["overlap"],
                    "refit_s": refit_s,
                    "full_s": full_s,
                    "served_s": served_s,
                }
                rows.append(row)
                print(
                    f"{simulator} run {run} {name:<6} n={n}: screened {row['screened']}, "
                    f"same point {row['same_point']}, {row['best_in_screen']} candidates "
                    f"above the exact best in the screen's order, top-10 overlap "
                    f"{row['overlap']:.1f}; refit {refit_s:.1f} s, scoring {full_s:.1f} s "
                    f"in full, {served_s:.1f} s as served",
                    flush=True,
                )
    same = sum(r["same_point"] for r in rows if r["screened"])
    screened = sum(r["screened"] for r in rows)
    print(
        f"{simulator}: the same next point in {same} of {screened} screened states "
        f"(at most {max((r['best_in_screen'] for r in rows), default=0)} candidates above "
        f"the exact best in the screen's order, kept: "
        f"{ranking.SCREEN_KEEP})",
        flush=True,
    )
    return rows
