"""``fbgp-al demo``: the paper's active-learning loop on a built-in simulator, in process.

Each iteration refits the fully Bayesian GP by NUTS on every label so far, scores a pool
subsample with the chosen acquisition, labels the best candidate with the simulator, and prints
the RMSE of the posterior-mode GP against the simulator's true mean, with the refit's R-hat and
seconds. At the end it draws the simulator with the labeled points (1-D and 2-D).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from fbgp_al.clients.ops import described
from fbgp_al.clients.reproduction.plots import plot_simulator
from fbgp_al.clients.reproduction.protocol import grid_pool, run_setup
from fbgp_al.clients.simulators import get_simulator
from fbgp_al.worker.acquisition import evaluate
from fbgp_al.worker.gp import predict
from fbgp_al.worker.mcmc import sample_posterior
from fbgp_al.worker.transforms import OutputStandardization
from fbgp_al.worker.vocabulary.defaults import ACQUISITIONS, MCMC_PRESETS, POOL_SUBSAMPLE


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="fbgp-al demo", description=described(__doc__))
    parser.add_argument("--simulator", default="gramacy1d")
    parser.add_argument("--acquisition", default="qb-mgp", choices=ACQUISITIONS)
    parser.add_argument("--iterations", type=int, default=12)
    for setting in ("chains", "warmup", "samples", "thinning"):  # the demo preset's by default
        parser.add_argument(f"--{setting}", type=int, default=MCMC_PRESETS["demo"][setting])
    parser.add_argument("--run", type=int, default=0, help="which seeded run of the protocol")
    parser.add_argument("--out", default="results/demo.png")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    sim = get_simulator(args.simulator)
    setup = run_setup(sim, args.run)
    pool = grid_pool(sim)
    rng = np.random.default_rng(setup.seed)
    labeled = list(setup.initial_index)
    y = list(setup.initial_y)
    truth_u = torch.from_numpy(sim.to_unit(setup.rmse_x))
    nuts = f"NUTS {args.chains} x ({args.warmup} + {args.samples})"
    print(f"{args.simulator}: {args.acquisition}, {len(labeled)} initial points, {nuts}")
    for it in range(args.iterations + 1):
        u = torch.from_numpy(pool.points(labeled))
        scale = OutputStandardization.from_labels(y)
        z = scale.to_z(y)
        started = time.perf_counter()
        post = sample_posterior(u, z, args.chains, args.warmup, args.samples, seed=setup.seed + it)
        mean, _ = predict(
            u, z, post.mode_lengthscale[None], torch.tensor([post.mode_noise]), truth_u
        )
        rmse = float(np.sqrt(np.mean((scale.mean_from_z(mean[0]).numpy() - setup.rmse_mean) ** 2)))
        line = (
            f"n={len(labeled):3d}  rmse {rmse:8.4f}  R-hat {post.diagnostics['max_rhat']:.3f}  "
            f"refit {post.diagnostics['seconds']:.2f} s"
        )
        if it == args.iterations:
            print(line)
            break
        candidates = pool.subsample(POOL_SUBSAMPLE, rng, exclude=labeled)
        cand_u = torch.from_numpy(pool.points(candidates))
        acquisition_post = post.thinned(args.thinning)
        scores = evaluate(args.acquisition, acquisition_post, u, z, cand_u, seed=setup.seed + it)
        best = int(candidates[int(torch.argmax(scores))])
        x_best = sim.from_unit(pool.points([best]))
        labeled.append(best)
        y.append(float(sim.sample(x_best, rng)[0]))
        took = time.perf_counter() - started
        print(f"{line}  next x = {np.round(x_best[0], 4).tolist()}  ({took:.2f} s in all)")
    if sim.dim <= 2:
        path = Path(args.out)
        path.parent.mkdir(parents=True, exist_ok=True)
        x_all = sim.from_unit(pool.points(labeled))
        plot_simulator(sim, path, X=x_all, y=np.array(y), title=f"{sim.name}, {args.acquisition}")
        print(f"plot: {path}")
