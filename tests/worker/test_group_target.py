"""Chain groups of one refit on several workers judge the sampling target on all their chains
together (:meth:`worker.mcmc.Target.more_together`), telling each other where they are through
Redis (:class:`worker.jobs.fanout.Peers`, a real redis-server)."""

import time

import numpy as np
import pytest
from redis import Redis

from tests.worker.test_mcmc import DATASETS, _data
from worker import fitting
from worker.jobs import fanout
from worker.mcmc import Target, convergence, run_chains


def _iid(chains, samples, shift=0.0, seed=0):
    return np.random.default_rng(seed).standard_normal((chains, samples, 2)) + shift


def test_the_target_is_judged_on_all_chains_over_the_draws_every_group_has():
    target = Target(draws=150, max_samples=500)
    own, peer = _iid(2, 100), _iid(3, 100, seed=1)
    assert target.more_together(own, [(peer, False)]) == 0  # together: ESS about 1,000
    # a peer whose chains sit elsewhere: R-hat far above 1.01, so more, as projected together
    apart = _iid(3, 100, shift=3.0, seed=1)
    together = np.concatenate([own, apart])
    assert Target(draws=150).more_together(own, [(apart, False)]) == Target(draws=150).more(
        _draws(together)
    )
    # only the draws every group has count: a peer at 20 draws judges the first 20 of own
    short = _iid(3, 20, seed=1)
    expected = Target(draws=150)._more(np.concatenate([own[:, :20], short]))
    assert expected > 0
    assert 20 + expected <= 40  # a check asks for at most as many again: 100 is ahead of that
    # a group ahead of what the chains together are projected to need waits (None) for the
    # others to catch up, rather than stopping on a projection
    assert target.more_together(own, [(short, False)]) is None
    assert target.more_together(_iid(2, 400), [(short, False)]) is None
    # a group behind runs on to the projection
    behind = Target(draws=150)._more(np.concatenate([own[:, :10], short[:, :10]]))
    assert target.more_together(own[:, :10], [(short, False)]) == behind > 0
    # no group runs past one that has stopped: the merge keeps no more than its draws
    assert target.more_together(own, [(apart[:, :80], True)]) == 0
    assert target.more_together(own[:, :60], [(apart[:, :80], True)]) == 20  # to 80, no further
    # and none past the cap
    assert Target(draws=150, max_samples=100).more_together(own, [(apart, False)]) == 0


def _draws(theta):
    from worker import nuts

    c, s = theta.shape[:2]
    return nuts.Draws(theta=theta, accept_stat=np.ones((c, s)), diverging=np.zeros((c, s), bool),
                      tree_depth=np.ones((c, s), int), n_leapfrog=np.ones((c, s)),
                      step_size=np.ones(c), inverse_mass=np.ones((c, 2)),
                      warmup_divergences=np.zeros(c, int))  # fmt: skip


@pytest.fixture
def connection(redis_url):
    with Redis.from_url(redis_url) as r:
        yield r


def test_groups_see_each_others_latest_draws_once_every_chain_has_published(connection):
    token = f"t{time.time_ns()}"
    a = fanout.Peers(connection, token, [0, 1], chains=5)
    b = fanout.Peers(connection, token, [2, 3, 4], chains=5)
    assert a.latest() is None and b.latest() is None  # nobody has said anything
    a.publish(_iid(2, 30), stopped=False)
    assert b.latest() is not None and a.latest() is None  # b's chains are not there yet
    theta = _iid(3, 45, seed=4)
    b.publish(theta, stopped=True)
    [(seen, stopped)] = a.latest()
    assert np.array_equal(seen, theta) and stopped
    [(seen, stopped)] = b.latest()
    assert seen.shape == (2, 30, 2) and not stopped
    # a group whose sampling failed says it has stopped: nobody waits for it
    a.abandon()
    [(seen, stopped)] = b.latest()
    assert seen.shape == (2, 30, 2) and stopped
    # a group silent for longer than `stale` counts as stopped (its worker may be gone)
    time.sleep(0.05)
    [(_, stopped)] = fanout.Peers(connection, token, [2, 3, 4], chains=5, stale=0.01).latest()
    assert stopped
    assert all(0 < connection.ttl(k) <= fanout.PEERS_TTL for k in fanout.peers_keys(token))


SPEC = {"inputs": [{"name": "x", "lower": 0.0, "upper": 1.0}], "pool_subsample": 20,
        "pool": {"type": "grid", "points_per_dim": 21}, "acquisition": "qb-mgp", "seed": 3,
        "mcmc": {"chains": 5, "warmup": 60, "samples": 20, "thinning": 2, "draws": 150,
                 "max_samples": 400, "warm_start": True}}  # fmt: skip


def test_a_group_stops_with_the_other_groups_chains_not_on_its_own_share(connection):
    """Group [2, 3, 4] runs first, alone (the other group has not started: its share of the
    target); group [0, 1] then runs until the five chains together meet the target,
    or to the first group's length (the merge keeps no more)."""
    u, z = _data(*DATASETS["one-mode"])
    labels = [{"x": [float(a)], "y": float(b)} for a, b in zip(u[:, 0], z, strict=True)]
    data = fitting.prepare(SPEC, labels)
    token = f"t{time.time_ns()}"
    first, _ = fitting.chains(
        SPEC, data, [2, 3, 4], peers=fanout.Peers(connection, token, [2, 3, 4], 5)
    )
    # no peer yet: its own share of the target (90 of 150 draws' ESS), in short steps
    rhat, ess = convergence(first.theta)
    assert max(rhat.values()) <= 1.01 and min(ess.values()) >= 90
    [(published, stopped)] = fanout.Peers(connection, token, [0, 1], 5).latest()
    assert stopped and np.array_equal(published, first.theta)
    second, _ = fitting.chains(SPEC, data, [0, 1], peers=fanout.Peers(connection, token, [0, 1], 5))
    have, length = second.theta.shape[1], first.theta.shape[1]
    together = np.concatenate([second.theta[:, :have], first.theta[:, :have]])
    rhat, ess = convergence(together)
    assert have == length or (max(rhat.values()) <= 1.01 and min(ess.values()) >= 150)
    assert have <= length
    # the same chains as on their own, up to the first check
    on_its_own, _ = fitting.chains(SPEC, data, [0, 1])
    first_check = SPEC["mcmc"]["samples"]
    assert np.array_equal(second.theta[:, :first_check], on_its_own.theta[:, :first_check])
    # what it was told it published, stopped
    [(published, stopped)] = fanout.Peers(connection, token, [2, 3, 4], 5).latest()
    assert stopped and np.array_equal(published, second.theta)


def test_run_chains_takes_its_stopping_rule_from_more_when_given():
    u, z = _data(*DATASETS["one-mode"])
    calls = []

    def more(draws):
        calls.append(draws.theta.shape[1])
        return 10 if len(calls) == 1 else 0

    draws, _ = run_chains(u, z, [0, 1], 30, 20, 0, target=Target(draws=10**6), more=more)
    assert calls == [20, 30] and draws.theta.shape[1] == 30


def test_a_group_ahead_waits_for_the_others_then_judges_them_together(connection):
    """Group [0, 1] reaches its first check (20 draws) while the other group has published 5:
    it waits, still saying it is there, and goes on only once that group has caught up or
    stopped; then no further than that group's draws."""
    import threading

    u, z = _data(*DATASETS["one-mode"])
    labels = [{"x": [float(a)], "y": float(b)} for a, b in zip(u[:, 0], z, strict=True)]
    data = fitting.prepare(SPEC, labels)
    other, _ = fitting.chains(SPEC, data, [2, 3, 4])  # the other group's chains, run alone
    token = f"t{time.time_ns()}"
    behind = fanout.Peers(connection, token, [2, 3, 4], 5)
    behind.publish(other.theta[:, :5], stopped=False)
    result = {}
    me = fanout.Peers(connection, token, [0, 1], 5, poll=0.01)
    thread = threading.Thread(
        target=lambda: result.update(draws=fitting.chains(SPEC, data, [0, 1], peers=me)[0])
    )
    thread.start()
    deadline = time.monotonic() + 120
    while not (seen := behind.latest()):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(1.0)
    [(theta, stopped)] = behind.latest()
    assert thread.is_alive() and theta.shape == (2, 20, 2) and not stopped  # waiting at 20
    assert seen[0][0].shape == (2, 20, 2)
    behind.publish(other.theta, stopped=True)  # caught up and stopped
    thread.join(120)
    assert not thread.is_alive()
    have = result["draws"].theta.shape[1]
    assert 20 <= have <= other.theta.shape[1]
    [(theta, stopped)] = behind.latest()
    assert stopped and np.array_equal(theta, result["draws"].theta)
