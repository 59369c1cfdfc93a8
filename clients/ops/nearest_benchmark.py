"""Nearest pool points of an explicit pool (``worker.vocabulary.design.PointPool.index_of``): a scan
of the pool per row against one k-d tree for all rows, side by side in one run, on the same rows.

``python -m clients.ops.nearest_benchmark [--pool 1000000] [--dim 2] [--rows 1,10,50,200,2000]
[--scan-max 200]``: seconds of each, and their ratio; rows above ``--scan-max`` are looked up by
the tree alone (a scan of them takes minutes). The service scans while rows x pool points is at
most ``worker.vocabulary.design.BRUTE_FORCE_PAIRS``, and builds the tree beyond.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fbgp_al.worker.vocabulary import design
from fbgp_al.worker.vocabulary.design import PointPool


def _timed(pool: PointPool, rows: np.ndarray, pairs: int) -> tuple[float, np.ndarray]:
    design.BRUTE_FORCE_PAIRS = pairs
    start = time.perf_counter()
    index = pool.index_of(rows)
    return time.perf_counter() - start, index


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=2)
    parser.add_argument("--rows", default="1,10,50,200,2000")
    parser.add_argument("--scan-max", type=int, default=200)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    pool = PointPool(rng.random((args.pool, args.dim)))
    default = design.BRUTE_FORCE_PAIRS
    print(f"pool {args.pool} x {args.dim}; the service scans up to {default:,} rows x points")
    print("| rows | scan s | tree s | scan / tree | the service's |")
    print("|---|---|---|---|---|")
    for m in (int(r) for r in args.rows.split(",")):
        rows = pool.points(rng.integers(0, pool.size, m)) + 1e-12  # near, not exact, hits
        tree, by_tree = _timed(pool, rows, 0)
        mode = "scan" if m * pool.size <= default else "tree"
        if m > args.scan_max:
            print(f"| {m} | - | {tree:.3f} | - | {mode} |")
            continue
        scan, by_scan = _timed(pool, rows, 2**62)
        assert np.array_equal(by_scan, by_tree), "the tree and the scan disagree"
        print(f"| {m} | {scan:.3f} | {tree:.3f} | {scan / tree:.1f} | {mode} |")
    design.BRUTE_FORCE_PAIRS = default


if __name__ == "__main__":
    main()
