"""The paper's experimental protocol as data, and the seeded per-run setup.

Riis et al. (2022), section 5: an initial design of 3 points (maximin Latin hypercube snapped to
the pool), one label per iteration, a pool subsample of 10,000 candidates per iteration when the
pool is larger, 10 runs per (simulator, acquisition) that differ in their initial design.
Evaluation: NLML on a test set of 1,000 random pool points with noisy labels, RMSE against the
true mean over the pool, or over a fixed 10,000-point subset of it when the pool is larger.

Run ``r`` of a simulator gets one seed, :func:`run_seed`, from which its initial design, test set
and RMSE subset follow; none depends on the acquisition, so every acquisition of run ``r`` starts
from the same data and is scored on the same points.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from fbgp_al.clients.simulators import Simulator, get_simulator
from fbgp_al.worker.vocabulary.defaults import INITIAL_DESIGN_SIZE, MCMC_PRESETS, POOL_SUBSAMPLE
from fbgp_al.worker.vocabulary.design import GridPool, initial_design, maximin_lhs

ITERATIONS: dict[str, int] = {
    "gramacy1d": 90,
    "higdon": 60,
    "gramacy2d": 40,
    "branin": 40,
    "ishigami": 200,
    "hartmann6": 60,
    "motorcycle": 40,
}
TEST_SIZE = 1_000
RMSE_SUBSET = 10_000
RUNS = 10

# What defines a protocol beyond the simulator, acquisition and repetition (``fbgp-al bench
# --protocol``; each setting is also an option of its own). ``paper``: the paper as written;
# ``paper-code``: what its public code (CoRiis/active-learning-fbgp) does where it differs.
# ``allow_repeats``: pool points may be labeled again; ``bald``: the service acquisition that
# the table's ``bald`` column runs; ``mcmc``: the MCMC preset
# (worker.vocabulary.defaults.MCMC_PRESETS); ``input_scaling``: the campaign's ``input_scaling``
# (``box``: by the declared bounds; ``labels``: min-max by the labeled inputs at each refit);
# ``initial_design``: ``pool`` (the maximin LHS snapped to the pool) or ``continuous`` (the same
# LHS, not snapped).
PROTOCOLS: dict[str, dict] = {
    "paper": {
        "allow_repeats": False,
        "bald": "bald",
        "mcmc": "paper",
        "input_scaling": "box",
        "initial_design": "pool",
    },
    "paper-code": {
        "allow_repeats": True,
        "bald": "bald-code",
        "mcmc": "paper-code",
        "input_scaling": "labels",
        "initial_design": "continuous",
    },
}
INITIAL_DESIGNS = ("pool", "continuous")
INPUT_SCALINGS = ("box", "labels")


@dataclass(frozen=True)
class RunSetup:
    """What run ``run`` of ``simulator`` shares across acquisitions (original units).

    ``initial_index`` ``[3]`` flat pool indices (``[0]``: a continuous design), ``initial_x``
    ``[3, d]``, ``initial_y`` ``[3]`` noisy labels; ``test_x`` ``[T, d]``, ``test_y`` ``[T]``
    noisy (T = 1000);
    ``rmse_x`` ``[S, d]``, ``rmse_mean`` ``[S]`` noise-free (S = min(pool size, 10000)).
    """

    simulator: str
    run: int
    seed: int
    iterations: int
    initial_index: np.ndarray
    initial_x: np.ndarray
    initial_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    rmse_x: np.ndarray
    rmse_mean: np.ndarray

    @property
    def max_labels(self) -> int:
        return len(self.initial_index) + self.iterations


def grid_pool(sim: Simulator) -> GridPool:
    """``sim``'s pool as a :class:`worker.vocabulary.design.GridPool` over the unit cube."""
    return GridPool(sim.dim, sim.points_per_dim)


def pool_points(sim: Simulator, index) -> np.ndarray:
    """``sim``'s pool points at flat indices ``index`` (``[m]``) as ``[m, d]``, original units."""
    return sim.from_unit(grid_pool(sim).points(index))


def run_seed(simulator: str, run: int, base_seed: int = 0) -> int:
    """A 32-bit seed for run ``run`` of ``simulator``, stable across machines and Python runs.

    crc32 rather than ``hash()``: Python salts string hashes per process.
    """
    key = [base_seed, zlib.crc32(simulator.encode()), run]
    return int(np.random.SeedSequence(key).generate_state(1)[0])


def run_setup(
    simulator: str | Simulator, run: int, base_seed: int = 0, design: str = "pool"
) -> RunSetup:
    """The initial design, test set and RMSE points of run ``run`` (deterministic in its args).

    ``design``: ``pool``, the run seed's maximin LHS snapped to the pool (``initial_index``: its
    flat pool indices); ``continuous``, the same LHS not snapped (the paper's code: skopt's
    classic maximin Lhs on the continuous box, utils/initial_design.py; ``initial_index`` is
    empty). Either way its labels, the test set and the RMSE points come from the same seeded
    streams, and nothing depends on the acquisition.
    """
    if design not in INITIAL_DESIGNS:
        raise ValueError(f"initial design {design!r}: one of {INITIAL_DESIGNS}")
    sim = get_simulator(simulator) if isinstance(simulator, str) else simulator
    seed = run_seed(sim.name, run, base_seed)
    pool = grid_pool(sim)
    init_rng, test_rng, rmse_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3)
    )

    if design == "continuous":
        # the points initial_design would snap to the pool
        initial_index = np.empty(0, dtype=np.int64)
        initial_x = sim.from_unit(maximin_lhs(INITIAL_DESIGN_SIZE, sim.dim, seed))
    else:
        initial_index = initial_design(pool, INITIAL_DESIGN_SIZE, seed)
        initial_x = pool_points(sim, initial_index)

    if pool.size > TEST_SIZE:
        test_index = pool.subsample(TEST_SIZE, test_rng)
    else:
        # a 101-point pool cannot hold 1000 distinct test points: draw with replacement, as the
        # paper's code does, so the noisy labels still average over 1000 draws
        test_index = test_rng.integers(0, pool.size, size=TEST_SIZE)
    test_x = pool_points(sim, test_index)

    if pool.size > RMSE_SUBSET:
        rmse_index = pool.subsample(RMSE_SUBSET, rmse_rng)
    else:
        rmse_index = np.arange(pool.size)
    rmse_x = pool_points(sim, rmse_index)

    return RunSetup(
        simulator=sim.name,
        run=run,
        seed=seed,
        iterations=ITERATIONS.get(sim.name, 0),  # a problem beyond the paper's: its caller's
        initial_index=initial_index,
        initial_x=initial_x,
        initial_y=sim.sample(initial_x, init_rng),
        test_x=test_x,
        test_y=sim.sample(test_x, test_rng),
        rmse_x=rmse_x,
        rmse_mean=sim.mean(rmse_x),
    )


def campaign_body(simulator: str, acquisition: str, run: int, base_seed: int = 0) -> dict:
    """The ``POST /campaigns`` body (the OpenAPI document's) for one run of the paper's protocol.

    The ``seed`` is :func:`run_seed`, the seed :func:`run_setup` draws its initial design with.
    """
    sim = get_simulator(simulator)
    return {
        "name": f"{simulator}-{acquisition}-run{run}",
        "inputs": sim.inputs(),
        "pool": sim.pool,
        "pool_subsample": POOL_SUBSAMPLE,
        "acquisition": acquisition,
        "initial_design": {"type": "maximin-lhs", "size": INITIAL_DESIGN_SIZE},
        "max_labels": INITIAL_DESIGN_SIZE + ITERATIONS[simulator],
        "mcmc": dict(MCMC_PRESETS["paper"]),
        "mode": "sequential",
        "seed": run_seed(simulator, run, base_seed),
    }
