"""``fbgp-al bench-service``'s ``--label-to-next``: its data set is the one ``--seed`` draws, and
it measures the campaign it is asked for against the stack at ``--url``."""

import numpy as np

from fbgp_al.clients.ops import service_benchmark as bench


def test_label_to_next_draws_the_data_set_of_its_seed(monkeypatch):
    seen = []

    def label_to_next(client, sim, rng, rounds, n, mcmc, wait):
        seen.append((str(client.base_url), sim.name, rng.random(3), rounds, n, mcmc))

    monkeypatch.setattr(bench, "label_to_next", label_to_next)
    for seed in (0, 3):
        bench.main(
            ["--label-to-next", "--url", "http://127.0.0.1:9", "--simulator", "hartmann6"]
            + ["--labels", "200", "--rounds", "2", "--seed", str(seed)]
        )
    for (url, name, draws, rounds, n, mcmc), seed in zip(seen, (0, 3), strict=True):
        assert (url, name, rounds, n, mcmc) == ("http://127.0.0.1:9", "hartmann6", 2, 200, None)
        np.testing.assert_array_equal(draws, np.random.default_rng(seed).random(3))
    assert not np.array_equal(seen[0][2], seen[1][2])


def test_a_campaign_the_stack_refuses_ends_the_run_saying_why():
    """A stack whose limits refuse the campaign (``max_labels`` past ``FBGP_LIMIT_LABELS``):
    the run ends with the stack's answer, not a ``KeyError``; the campaign asks for one label
    more than the import and the rounds, so that a point follows the last."""
    import httpx
    import pytest

    from fbgp_al.clients.simulators import get_simulator

    bodies = []

    def refuse(request):
        bodies.append(request.read())
        return httpx.Response(422, json={"detail": "max_labels 5,001 is past limit_labels"})

    client = httpx.Client(base_url="http://stack", transport=httpx.MockTransport(refuse))
    sim, rng = get_simulator("hartmann6"), np.random.default_rng(0)
    with pytest.raises(SystemExit, match="422 .*limit_labels"):
        bench.label_to_next(client, sim, rng, 1, 5000, None)
    assert b'"max_labels":5001' in bodies[0].replace(b" ", b"")
