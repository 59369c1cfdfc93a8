"""The campaign vocabulary, one definition each: acquisition names, MCMC settings and presets,
pool and batch rules. The schemas, the math and the tooling all read them from here.

Plain Python (no torch, no numpy), so the API imports it without the math's dependencies.
"""

from __future__ import annotations

# every acquisition a campaign may name (CONTRACT.md), and `bald-std`, BALD as the paper's code
# computes it (log of the mean predictive standard deviation)
ACQUISITIONS: tuple[str, ...] = ("alm", "b-alm", "bald", "b-qbc", "qb-mgp", "random", "bald-std")
# the five the paper compares, and the one its RD-AUC is relative to
PAPER_ACQUISITIONS: tuple[str, ...] = ("alm", "b-alm", "bald", "b-qbc", "qb-mgp")
BASELINE = "alm"
DEFAULT_ACQUISITION = "qb-mgp"

# a campaign's `mcmc` settings when it names none: the paper's chains, warm-up and draws (5 x 300
# kept draws, every 10th used for scoring), warm-started refits, chains started from the grid
MCMC_DEFAULTS: dict = {
    "chains": 5,
    "warmup": 200,
    "samples": 300,
    "thinning": 10,
    "warm_start": True,
    "warm_warmup": 50,
    "init": "grid",
}
# the paper's settings, every refit from a cold start with the full warm-up and Pyro's default
# initialization, as it ran them
_PAPER = {"chains": 5, "warmup": 200, "samples": 300, "thinning": 10, "warm_start": False}
MCMC_PRESETS: dict[str, dict] = {
    "paper": {**_PAPER, "init": "uniform"},
    # the paper's settings with the chains started where the service starts them by default:
    # spread over the modes of a coarse posterior grid (worker.mcmc), not in Pyro's [-2, 2] box
    "paper-grid": {**_PAPER, "init": "grid"},
    # quick checks: a rough posterior in a fraction of the time
    "fast": {"chains": 2, "warmup": 50, "samples": 50, "thinning": 5},
    # the demo campaign of `fbgp-al up --demo`: seconds per refit
    "demo": {"chains": 4, "warmup": 100, "samples": 100, "thinning": 5},
}

INITIAL_DESIGN_SIZE = 3  # a maximin Latin hypercube of this many points, snapped to the pool
POOL_SUBSAMPLE = 10_000  # each scoring ranks a fresh random subset of a larger pool
RANKING_SIZE = 64  # ranked points kept with a model, best first (sequential mode)
MAX_BATCH = 32  # the longest greedy batch of a parallel-mode campaign
