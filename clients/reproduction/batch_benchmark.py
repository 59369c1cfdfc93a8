"""A parallel campaign's refit as the labels grow: Hartmann 6-D at uniform random points (the
data of :mod:`fbgp_al.clients.reproduction.scale_benchmark`), a default campaign in
``"mode": "parallel"`` with ``max_pending`` points out, one label after the cold model at
``n``: the sampling's and the ranking's seconds, the process's CPU seconds and peak memory,
and the batch it chose, beside another tree's on the same cold model:

    python -m fbgp_al.clients.reproduction.batch_benchmark --sizes 800,2000 \\
        --python before=/path/to/other/tree/python

Each measurement runs in a process of its own on one thread, as a worker does; the cold model
at each size is fitted once, by this tree, and kept in ``--models`` so that every tree starts
from the same one. The other tree's interpreter runs this file by its path, so the other tree
needs ``scale_benchmark`` and ``worker.fitting`` only.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np


def one(n: int, out: int, seed: int, cold: str, mcmc: dict | None = None) -> dict:
    """The refit at ``n + 1`` labels with ``out`` pool points out (drawn from ``seed``), warm
    from the cold model at ``n`` in the file ``cold`` (fitted and written there if missing).
    ``mcmc``: the campaign's MCMC settings in place of the defaults."""
    from fbgp_al.clients.reproduction.scale_benchmark import labels_of, refit, spec_of
    from fbgp_al.worker import fitting
    from fbgp_al.worker.vocabulary.pools import pool_of

    spec = spec_of()
    spec.update(mode="parallel", max_pending=max(out, 1))
    if mcmc:
        spec["mcmc"] = {**spec["mcmc"], **mcmc}
    labels = labels_of(n + 1, seed)
    if not os.path.exists(cold):
        model, _ = refit(spec, labels[:n], None)
        with open(cold, "w") as f:
            json.dump(model, f)
    with open(cold) as f:
        model = json.load(f)
    pool = pool_of(spec)
    rng = np.random.default_rng([seed, 1])
    pending = sorted(rng.choice(pool.size, out, replace=False).tolist())
    started, cpu = time.perf_counter(), time.process_time()
    sampled = fitting.sample(spec, labels, model, 4000)
    sampled_at = time.perf_counter()
    fitted, ranking = fitting.rank(spec, sampled, pool, set(), pending, [], started)
    return {
        "n": n + 1,
        "out": out,
        "sample_s": sampled_at - started,
        "rank_s": time.perf_counter() - sampled_at,
        "cpu_s": time.process_time() - cpu,
        "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,  # kB to GB
        "pending": pending,
        "batch": [r["index"] for r in ranking],
        "scores": [r["score"] for r in ranking],
        "loo_rmse": fitted["accuracy"]["loo_rmse"],
    }


# runs a file as ``__main__`` without putting its folder first on ``sys.path``
RUN_FILE = (
    "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


def measure(python: str, n: int, out: int, seed: int, cold: str, mcmc: dict | None = None) -> dict:
    """:func:`one` in a process of its own, ``python`` running this file, on one thread."""
    args = ["--one", str(n), "--out", str(out), "--seed", str(seed), "--cold", cold]
    args += ["--mcmc", json.dumps(mcmc)] if mcmc else []
    return run_file(python, os.path.abspath(__file__), args, f"n = {n}")


def run_file(python: str, path: str, args: list[str], where: str) -> dict:
    """The file ``path`` run as ``__main__`` by ``python`` with ``args``, on one thread: the
    last line it prints, as JSON; its error (at ``where``) in a RuntimeError."""
    from fbgp_al.clients.ops.cli import THREAD_VARIABLES

    env = dict(os.environ, **{variable: "1" for variable in THREAD_VARIABLES})
    done = subprocess.run(
        [python, "-c", RUN_FILE, path, *args], capture_output=True, text=True, env=env
    )
    if done.returncode:
        raise RuntimeError(f"{python} failed at {where}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def row(name: str, r: dict, first: dict) -> str:
    """A table row of ``r``, its batch against ``first``'s (the first tree's)."""
    same = r["batch"] == first["batch"]
    apart = "-"
    if same:  # the largest relative difference of a pick's score
        pairs = zip(r["scores"], first["scores"], strict=True)
        apart = f"{max((abs(a - b) / max(abs(b), 1e-300) for a, b in pairs), default=0.0):.1g}"
    return (
        f"| {name} | {r['n']} | {r['out']} | {r['sample_s']:.1f} | {r['rank_s']:.1f} | "
        f"{r['cpu_s']:.1f} | {r['peak_gb']:.2f} | {len(r['batch'])}, "
        f"{'the same' if same else 'other'} | {apart} |"
    )


HEADER = (
    "| tree | n | points out | sampling (s) | ranking (s) | CPU (s) | peak memory (GB) | "
    "batch | scores apart |\n|---|---|---|---|---|---|---|---|---|"
)


def main(argv: list[str] | None = None) -> int:
    # this tree's: another tree's interpreter runs this file with its own scale_benchmark
    from fbgp_al.clients.reproduction.scale_benchmark import add_trees, trees_of

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="800,2000", help="labels, comma-separated")
    parser.add_argument("--out", type=int, default=20, help="points out (max_pending) [20]")
    parser.add_argument("--seed", type=int, default=0, help="the data set's seed")
    add_trees(parser)
    parser.add_argument("--models", default=None, help="where the cold models are kept")
    parser.add_argument("--mcmc", type=json.loads, default=None, help="MCMC settings (JSON)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cold", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one is not None:
        print(json.dumps(one(args.one, args.out, args.seed, args.cold, args.mcmc)))
        return 0
    models = args.models or tempfile.mkdtemp(prefix="batch-benchmark-")
    os.makedirs(models, exist_ok=True)
    trees = trees_of(args)
    print(HEADER)
    for n in (int(s) for s in args.sizes.split(",")):
        cold = os.path.join(models, f"cold-{n}-seed{args.seed}.json")
        first = None
        for name, python in trees:
            r = measure(python, n, args.out, args.seed, cold, args.mcmc)
            first = first or r
            print(row(name, r, first), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
