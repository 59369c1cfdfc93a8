"""The Gramacy & Lee mode study of ``fbgp-al bench-core --modes`` (the grid it judges the two
modes on, and a tiny run of both samplers)."""

import numpy as np

from fbgp_al.clients.reproduction.core_benchmark import chain_modes, gramacy_data, mode_gap


def test_the_short_lengthscale_mode_wins_only_with_many_labels():
    u, z = gramacy_data(93, seed=0)
    assert u.shape == (93, 1) and len(np.unique(u)) == 93  # distinct pool points
    assert float(u.min()) >= 0 and float(u.max()) <= 1 and abs(float(z.std()) - 1) < 1e-9
    # few labels: the smooth explanation is as good or better; most of the pool: far worse
    assert mode_gap(*gramacy_data(10, seed=0)) < 0
    assert mode_gap(u, z) > 30


def test_chain_modes_counts_the_chains_of_both_samplers(capsys):
    totals = chain_modes(20, datasets=1, chains=2, warmup=20, samples=20)
    assert totals["chains"] == 2
    assert 0 <= totals["ours"] <= 2 and 0 <= totals["reference"] <= 2
    out = capsys.readouterr().out
    assert "n=20 data set 0: short mode more probable by" in out
    assert f"ours {totals['ours']} of 2, reference {totals['reference']} of 2" in out
