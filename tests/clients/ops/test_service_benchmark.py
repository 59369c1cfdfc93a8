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
