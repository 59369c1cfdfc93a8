"""What the campaign page's costliest pictures compute at ``n`` labels: the main effects, the
two-input picture's grid and the Sobol indices of Hartmann 6-D at uniform random points (the
data of :mod:`fbgp_al.clients.reproduction.scale_benchmark`), from the cold model at ``n``,
beside another tree's on the same model:

    python -m fbgp_al.clients.reproduction.picture_benchmark --sizes 2000 \\
        --python before=/path/to/other/tree/python

Each tree runs in a process of its own on one thread, as a worker does; the cold model at each
size is fitted once, by this tree, and kept in ``--models``. The other tree's interpreter runs
this file by its path, so it needs ``scale_benchmark`` and ``worker.effects``,
``worker.effect_views`` and ``worker.sensitivity`` only. The table gives each part's seconds,
the process's CPU seconds and peak memory, and how far its curves and indices lie from the
first tree's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time

import numpy as np


def one(n: int, seed: int, cold: str) -> dict:
    """The main effects, the two-input grid over the first two inputs and the Sobol indices
    of the cold model at ``n`` labels in the file ``cold`` (fitted and written there if
    missing): each one's seconds and values."""
    from fbgp_al.clients.reproduction.scale_benchmark import labels_of, refit, spec_of
    from fbgp_al.worker import effect_views, effects
    from fbgp_al.worker.sensitivity import sensitivity
    from fbgp_al.worker.vocabulary.space import Space

    spec, labels = spec_of(), labels_of(n, seed)
    if not os.path.exists(cold):
        model, _ = refit(spec, labels, None)
        with open(cold, "w") as f:
            json.dump(model, f)
    with open(cold) as f:
        model = json.load(f)
    space = Space.of(spec["inputs"])
    grid = np.meshgrid(*(effects.axis(space, j, effect_views.PAIR_POINTS) for j in (0, 1)))
    t = np.zeros((grid[0].size, space.dim))
    t[:, 0], t[:, 1] = grid[0].ravel(), grid[1].ravel()
    parts = {
        "effects": lambda: [c["center"] for c in effects.main_effects(spec, model, labels)],
        "pair": lambda: effects.averaged(spec, model, labels, [0, 1], t)["center"].tolist(),
        "sobol": lambda: sensitivity(spec, model, labels)["total"]["mean"],
    }
    out, cpu = {"n": n}, time.process_time()
    for name, part in parts.items():
        started = time.perf_counter()
        out[name] = part()
        out[f"{name}_s"] = time.perf_counter() - started
    out["cpu_s"] = time.process_time() - cpu
    out["peak_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB to GB
    return out


def apart(r: dict, first: dict, name: str) -> float:
    """The largest difference between ``r``'s values of part ``name`` and ``first``'s."""
    return float(np.abs(np.asarray(r[name]) - np.asarray(first[name])).max())


HEADER = (
    "| tree | n | main effects (s) | two-input grid (s) | Sobol indices (s) | CPU (s) | "
    "peak memory (GB) | curves apart | indices apart |\n|---|---|---|---|---|---|---|---|---|"
)


def row(name: str, r: dict, first: dict) -> str:
    curves = max(apart(r, first, "effects"), apart(r, first, "pair"))
    return (
        f"| {name} | {r['n']} | {r['effects_s']:.1f} | {r['pair_s']:.1f} | {r['sobol_s']:.1f} | "
        f"{r['cpu_s']:.1f} | {r['peak_gb']:.2f} | {curves:.1g} | {apart(r, first, 'sobol'):.1g} |"
    )


def main(argv: list[str] | None = None) -> int:
    # this tree's: another tree's interpreter runs this file with its own scale_benchmark
    from fbgp_al.clients.reproduction.scale_benchmark import add_trees, trees_of

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2000", help="labels, comma-separated")
    parser.add_argument("--seed", type=int, default=0, help="the data set's seed")
    add_trees(parser)
    parser.add_argument("--models", default=None, help="where the cold models are kept")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cold", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one is not None:
        print(json.dumps(one(args.one, args.seed, args.cold)))
        return 0
    from fbgp_al.clients.reproduction.batch_benchmark import run_file

    models = args.models or tempfile.mkdtemp(prefix="picture-benchmark-")
    os.makedirs(models, exist_ok=True)
    print(HEADER)
    for n in (int(s) for s in args.sizes.split(",")):
        cold = os.path.join(models, f"cold-{n}-seed{args.seed}.json")
        first = None
        for name, python in trees_of(args):
            more = ["--one", str(n), "--seed", str(args.seed), "--cold", cold]
            r = run_file(python, os.path.abspath(__file__), more, f"n = {n}")
            first = first or r
            print(row(name, r, first), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
