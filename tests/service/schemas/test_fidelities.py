"""A campaign body's ``fidelities`` and ``max_cost``: each mistake a 422 that names its field
(checked here on the body's model, as the API answers them), the defaults a campaign with
fidelities gets (``ivr``, a design of 3 runs per level), and a campaign without them written as
before (no new field in its stored spec)."""

import pytest
from pydantic import ValidationError

from fbgp_al.service.schemas.campaigns import CampaignCreate

LEVELS = [{"name": "coarse", "cost": 1}, {"name": "fine", "cost": 10}]


def body(**changes) -> dict:
    out = {
        "inputs": [{"name": "x", "lower": 0.0, "upper": 1.0}],
        "pool": {"type": "grid", "points_per_dim": 21},
        "max_labels": 20,
        "fidelities": LEVELS,
    }
    out.update(changes)
    return out


def refused(**changes) -> str:
    with pytest.raises(ValidationError) as caught:
        CampaignCreate.model_validate(body(**changes))
    return str(caught.value)


def test_a_campaign_with_fidelities_defaults_to_ivr_and_three_runs_per_level():
    campaign = CampaignCreate.model_validate(body(max_cost=60))
    assert campaign.acquisition == "ivr" and campaign.initial_design.size == 6
    dumped = campaign.model_dump()
    assert dumped["fidelities"] == [{"name": "coarse", "cost": 1.0}, {"name": "fine", "cost": 10.0}]
    assert dumped["max_cost"] == 60
    chosen = CampaignCreate.model_validate(body(acquisition="qb-mgp", initial_design={"size": 5}))
    assert chosen.acquisition == "qb-mgp" and chosen.initial_design.size == 5


def test_a_campaign_without_fidelities_is_written_as_before():
    plain = body()
    del plain["fidelities"]
    dumped = CampaignCreate.model_validate(plain).model_dump()
    assert "fidelities" not in dumped and "max_cost" not in dumped
    assert dumped["acquisition"] == "qb-mgp" and dumped["initial_design"]["size"] == 3


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"fidelities": LEVELS[:1]}, "fidelities"),
        ({"fidelities": [{"name": "a", "cost": 0}, {"name": "b", "cost": 2}]}, "cost"),
        ({"fidelities": [{"name": "a", "cost": -1}, {"name": "b", "cost": 2}]}, "cost"),
        (
            {"fidelities": [{"name": "a", "cost": 3}, {"name": "b", "cost": 2}]},
            "costs must increase",
        ),
        (
            {"fidelities": [{"name": "a", "cost": 2}, {"name": "b", "cost": 2}]},
            "costs must increase",
        ),
        (
            {"fidelities": [{"name": "a", "cost": 1}, {"name": "a", "cost": 2}]},
            "two levels are named 'a'",
        ),
        ({"max_cost": 0}, "max_cost"),
        ({"max_cost": -5}, "max_cost"),
        ({"acquisition": "bald"}, "acquisition: with fidelities one of"),
        ({"initial_design": {"size": 3}}, "initial_design.size"),
        ({"inputs": [{"name": "fidelity", "lower": 0, "upper": 1}]}, "inputs: 'fidelity'"),
        ({"noise": {"type": "known"}}, "learns each level's noise"),
        (
            {"pool": {"type": "points", "points": [[0.1], [0.2], [0.3], [0.4]]}},
            "pool.points: with fidelities each point ends with its level's name",
        ),
        (
            {"pool": {"type": "points", "points": [[0.1, "coarse"], [0.2, "medium"]]}},
            "'medium' is not one of its values",
        ),
    ],
)
def test_each_mistake_is_refused_naming_its_field(changes, says):
    assert says in refused(**changes)


def test_max_cost_and_ivr_need_fidelities():
    assert "max_cost: a budget in cost needs fidelities" in refused(fidelities=None, max_cost=5)
    assert "acquisition: ivr weighs fidelity levels" in refused(fidelities=None, acquisition="ivr")


def test_an_explicit_pool_gives_each_points_level():
    points = [[v / 20, lv] for v in range(20) for lv in ("coarse", "fine")]
    campaign = CampaignCreate.model_validate(body(pool={"type": "points", "points": points}))
    assert campaign.pool.points[1] == [0.0, "fine"]


def test_fidelities_refuse_a_continuous_pool_and_polishing():
    """The multi-fidelity ranking scores pool points: a continuous pool or search.polish with
    fidelities is a 422 that says so; a grid pool with search absent or off is taken."""
    for changes in ({"pool": {"type": "continuous"}}, {"search": {"polish": True}}):
        assert "a campaign with fidelities chooses among its pool's points" in refused(**changes)
    assert CampaignCreate.model_validate(body(search={"polish": False})).search.polish is False
