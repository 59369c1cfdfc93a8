"""Chain groups of one refit on several workers give the draws of one process running every
chain, bit for bit: each chain's numbers do not depend on its group (its own random streams, a
potential computed row by row), and the groups judge the sampling target at each check on all
the chains together (:meth:`worker.convergence.Target.more_of`), telling each other where they are
through Redis (:class:`worker.jobs.fanout.Peers`, a real redis-server)."""

import threading
import time

import numpy as np
import pytest
from redis import Redis

from tests.worker.test_mcmc import DATASETS, _data
from worker import fitting
from worker.jobs import fanout
from worker.mcmc import Target, assemble, run_chains
from worker.nuts import Draws

SPEC = {"inputs": [{"name": "x", "lower": 0.0, "upper": 1.0}], "pool_subsample": 20,
        "pool": {"type": "grid", "points_per_dim": 21}, "acquisition": "qb-mgp", "seed": 3,
        "mcmc": {"chains": 5, "warmup": 60, "samples": 20, "thinning": 2, "draws": 150,
                 "max_samples": 400, "warm_start": True, "init": "grid"}}  # fmt: skip
GROUPINGS = {1: [[0, 1, 2, 3, 4]], 2: [[0, 1, 2], [3, 4]], 3: [[0, 1], [2, 3], [4]]}


@pytest.fixture
def connection(redis_url):
    with Redis.from_url(redis_url) as r:
        yield r


def _prepared(n=None):
    u, z = _data(*DATASETS["one-mode"])
    labels = [{"x": [float(a)], "y": float(b)} for a, b in zip(u[:, 0], z, strict=True)]
    return fitting.prepare(SPEC, labels[:n] if n else labels)


def _grouped(connection, data, groups, warm=None, delays=None) -> Draws:
    """The refit's chains run as ``groups``, each in a thread of its own (as on workers: each
    with its :class:`worker.jobs.fanout.Peers`), started ``delays`` seconds apart; their draws put
    together as the merge does."""
    token = f"t{time.time_ns()}"
    results, errors = {}, []

    def run(i, ids):
        time.sleep((delays or [0.0] * len(groups))[i])
        try:
            peers = fanout.Peers(connection, token, ids, SPEC["mcmc"]["chains"], poll=0.01)
            results[i] = fitting.chains(SPEC, data, ids, warm, peers=peers)[0]
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i, ids)) for i, ids in enumerate(groups)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not errors, errors
    return Draws.concatenate([results[i] for i in range(len(groups))])


def _same(a: Draws, b: Draws) -> None:
    for name in Draws.ARRAYS:
        assert getattr(a, name).tobytes() == getattr(b, name).tobytes(), name


@pytest.mark.parametrize("start", ["cold", "warm"])
def test_a_refit_split_over_1_2_and_3_groups_gives_the_same_bytes(connection, start):
    """One process, and 1, 2 and 3 groups: the same draws, adaptation and mode, to the bit,
    with the chains run on past their first 20 draws to the target (judged together)."""
    data = _prepared()
    warm = None
    if start == "warm":
        previous = fitting.posterior(SPEC, _prepared(len(data.z) - 1), None)
        warm = previous.adaptation
    alone, how = fitting.chains(SPEC, data, warm=warm)
    assert how == start and alone.theta.shape[1] > SPEC["mcmc"]["samples"]
    mode = assemble(alone, 1, 0.0, how, data.seed)
    for k, groups in GROUPINGS.items():
        merged = _grouped(connection, data, groups, warm)
        _same(merged, alone)
        post = assemble(merged, 1, 0.0, how, data.seed)
        assert post.mode_lengthscale.numpy().tobytes() == mode.mode_lengthscale.numpy().tobytes()
        assert post.mode_noise == mode.mode_noise, k


def test_groups_that_start_apart_still_give_one_process_draws(connection):
    """A group that starts late (its worker was busy): the others wait for it at their first
    check, and the draws are the same."""
    data = _prepared()
    alone, _ = fitting.chains(SPEC, data)
    _same(_grouped(connection, data, GROUPINGS[3], delays=[0.0, 1.5, 0.5]), alone)


def test_a_group_gives_up_when_another_never_starts_or_stops_short(connection):
    """The merge runs every chain itself when a group cannot judge the target on them all: a
    group that never started (after the patience) or one that stopped short of the check."""
    data = _prepared()
    token = f"t{time.time_ns()}"
    lonely = fanout.Peers(connection, token, [0, 1, 2], 5, poll=0.01, patience=0.2)
    lonely.started = time.monotonic()  # its patience: 0.2 s, or twice its time so far
    with pytest.raises(fanout.PeersLost, match="started"):
        fitting.chains(SPEC, data, [0, 1, 2], peers=lonely)
    token = f"t{time.time_ns()}"
    failed = fanout.Peers(connection, token, [3, 4], 5)
    failed.publish(np.zeros((2, 5, 2)), stopped=False)
    failed.abandon()  # its sampling failed at 5 draws
    with pytest.raises(fanout.PeersLost, match="short"):
        fitting.chains(SPEC, data, [0, 1, 2], peers=fanout.Peers(connection, token, [0, 1, 2], 5))


def test_together_puts_every_chain_in_order_once_all_have_as_many(connection):
    token = f"t{time.time_ns()}"
    a = fanout.Peers(connection, token, [0, 1], chains=5, poll=0.01)
    b = fanout.Peers(connection, token, [2, 3, 4], chains=5, poll=0.01)
    own, theirs = np.full((2, 30, 2), 1.0), np.full((3, 45, 2), 2.0)
    a.publish(own, stopped=False)
    b.publish(theirs, stopped=True)  # ahead and done: its first 30 draws count
    together = a.together(own)
    assert together.shape == (5, 30, 2)
    assert (together[:2] == 1.0).all() and (together[2:] == 2.0).all()
    assert all(0 < connection.ttl(k) <= fanout.PEERS_TTL for k in fanout.peers_keys(token))


def test_run_chains_takes_its_stopping_rule_from_more_when_given():
    u, z = _data(*DATASETS["one-mode"])
    calls = []

    def more(draws):
        calls.append(draws.theta.shape[1])
        return 10 if len(calls) == 1 else 0

    draws, _ = run_chains(u, z, [0, 1], 30, 20, 0, target=Target(draws=10**6), more=more)
    assert calls == [20, 30] and draws.theta.shape[1] == 30
