"""A campaign without ``fidelities`` chooses the same points, bit for bit, as before campaigns
could declare them: a seeded campaign's initial design and reserve (stored by the store), and a
refit's ranking and draws on its design's labels, against the values the commit before
fidelities (3c98892) gave (recorded by running :func:`snapshot` there).

The points are integers and compared exactly. The draws are compared to a relative 1e-4: their
last bits depend on the machine's BLAS and NUTS kernels (AVX-512 or AVX2) and on BLAS's threads,
which moved them by at most 2.3e-6 relative among those settings on one machine, where 3c98892
and this tree gave the same bits; a change of the sampler's path moves them by order one."""

import json
from pathlib import Path

import numpy as np

from fbgp_al.service.schemas.campaigns import CampaignCreate
from fbgp_al.worker import fitting
from fbgp_al.worker.vocabulary import pools

BODY = {
    "inputs": [
        {"name": "x", "lower": 0.0, "upper": 2.0},
        {"name": "alloy", "type": "choice", "values": ["steel", "al"]},
    ],
    "pool": {"type": "grid", "points_per_dim": 15},
    "initial_design": {"size": 5},
    "max_labels": 12,
    "mcmc": {"chains": 2, "warmup": 20, "samples": 20, "thinning": 2, "warm_start": False},
    "seed": 7,
}
# snapshot(store) at 3c98892
BEFORE = {
    "design_index": [23, 0, 9, 12, 24],
    "design_reserve": [4, 17, 25, 8, 26, 1, 16, 11, 15, 5, 7, 2, 20, 18, 28, 22, 13, 21, 6, 27]
    + [29, 19, 10, 3, 14],
    "ranking": [13, 29, 15, 17, 3, 16, 18, 5, 28, 27, 19, 4, 1, 14, 2, 6, 20, 10, 11, 21, 7, 26]
    + [8, 25, 22],
}
# the refit's draws at 3c98892 (:func:`snapshot`'s ``samples``)
SAMPLES_BEFORE = json.loads(
    (Path(__file__).parents[1] / "data" / "single_fidelity_3c98892.json").read_text()
)["samples"]


def snapshot(store) -> dict:
    """The campaign's design and reserve, and the ranking (pool indices) and the draws of one
    refit on the design's labels."""
    spec = store.campaigns.create(CampaignCreate.model_validate(BODY).model_dump())
    pool = store.campaigns.pool(spec["id"], spec)
    x = pools.to_original(spec, pool.points(spec["design_index"]))
    labels = [
        {"x": p, "y": (p[0] - 1.0) ** 2 + (0.5 if p[1] == "al" else 0.0), "index": i}
        for p, i in zip(x, spec["design_index"], strict=True)
    ]
    model, ranking = fitting.fit(spec, pool, labels, set(spec["design_index"]))
    return {
        "design_index": spec["design_index"],
        "design_reserve": spec["design_reserve"],
        "ranking": [r["index"] for r in ranking],
        "samples": model["samples"],
    }


def test_a_campaign_without_fidelities_chooses_as_before(bare_store):
    now = snapshot(bare_store)
    samples = now.pop("samples")
    assert now == BEFORE
    assert sorted(samples) == sorted(SAMPLES_BEFORE)
    for name, before in SAMPLES_BEFORE.items():
        np.testing.assert_allclose(samples[name], before, rtol=1e-4, err_msg=name)
