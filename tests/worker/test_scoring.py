"""A refit's scoring as data (:mod:`worker.scoring`): arrays packed to JSON and back to the same
bits; a scoring sent as plain JSON scores the same candidates to the same bits (one output,
several combined, a greedy batch's); the combined score is each output's weighted; what is not
a scoring is refused."""

import json
import math

import numpy as np
import pytest
import torch

from fbgp_al.worker.acquisition import evaluate
from fbgp_al.worker.mcmc import Posterior
from fbgp_al.worker.scoring import Output, Scoring, combined_scores, pack, unpack


def test_an_array_packs_to_json_and_back_to_the_same_bits():
    values = np.array([[0.0, -0.0, math.nan], [math.inf, -math.inf, 5e-324], [1 / 3, -1e308, 2]])
    plain = json.loads(json.dumps(pack(values)))
    again = unpack(plain)
    assert again.shape == (3, 3) and again.dtype == np.float64 and again.flags.writeable
    assert again.tobytes() == values.tobytes()
    assert unpack(pack(torch.arange(4.0, dtype=torch.float64))).tolist() == [0, 1, 2, 3]
    assert unpack(pack(2.5)).shape == ()
    with pytest.raises(ValueError):
        unpack({"shape": [1], "float64": "not base64!"})


def _output(seed: int, weight: float, draws: int = 6) -> Output:
    rng = np.random.default_rng(seed)
    u = torch.from_numpy(rng.random((8, 2)))
    z = torch.sin(4 * u[:, 0]) + u[:, 1]
    z = (z - z.mean()) / z.std()
    post = Posterior(
        lengthscale=torch.from_numpy(rng.uniform(0.2, 1.0, (draws, 2))),
        noise=torch.from_numpy(rng.uniform(1e-3, 1e-2, draws)),
        chains=2,
        mode_lengthscale=torch.tensor([0.5, 0.5], dtype=torch.float64),
        mode_noise=5e-3,
    )
    return Output(weight, post, u, z, None, seed)


CANDIDATES = torch.from_numpy(np.random.default_rng(9).random((30, 2)))


@pytest.mark.parametrize(
    ("name", "kind", "outputs"),
    [("qb-mgp", "single", 1), ("alm", "combined", 2), ("b-qbc", "batch", 2)],
)
def test_a_scoring_sent_as_json_scores_to_the_same_bits(name, kind, outputs):
    pending = torch.tensor([[0.5, 0.5]], dtype=torch.float64) if kind == "batch" else None
    scoring = Scoring(name, tuple(_output(s, 1.0 + s) for s in range(outputs)), kind, pending)
    again = Scoring.from_plain(json.loads(json.dumps(scoring.to_plain())))
    assert torch.equal(again(CANDIDATES), scoring(CANDIDATES))
    assert again.draws == 6 and again.labels == 8 + (1 if kind == "batch" else 0)


def test_the_combined_score_is_each_output_s_weighted():
    first, second = _output(0, 0.3), _output(1, 0.7)
    parts = [(0.3, first.post, first), (0.7, second.post, second)]
    got = combined_scores("alm", parts, CANDIDATES)
    expected = sum(
        w * evaluate("alm", post, o.u, o.z, CANDIDATES, seed=o.seed) for w, post, o in parts
    )
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-14)
    random = combined_scores("random", parts, CANDIDATES, version_seed=4)
    assert torch.equal(random, evaluate("random", parts[0][1], None, None, CANDIDATES, seed=4))


def test_fewer_draws_spread_over_the_chains_and_an_unknown_kind_is_refused():
    scoring = Scoring("qb-mgp", (_output(0, 1.0, draws=10),))
    assert scoring.with_draws(4).draws == 4 and scoring.draws == 10
    plain = {**scoring.to_plain(), "kind": "pairwise"}
    with pytest.raises(ValueError, match="no scoring of kind 'pairwise'"):
        Scoring.from_plain(plain)
