"""A model's calls (:mod:`service.jobs.calls`), run by an RQ worker in this process on a store
that no other worker serves: the Sobol picture and ``GET .../sensitivity`` share the indices of
a model version, computed once, and a new model's are computed again; a multi-output campaign's
picture of one output draws that output's indices."""

import numpy as np

from fbgp_al.service.jobs import calls
from fbgp_al.service.queues import enqueue_short, fetch_job
from fbgp_al.service.schemas.campaigns import CampaignCreate
from fbgp_al.worker.sensitivity import sensitivity_outputs
from tests.service.jobs.test_jobs import _import, _work

INPUTS = [{"name": "a", "lower": 0.0, "upper": 1.0}, {"name": "b", "lower": 0.0, "upper": 1.0}]


def _labels(n: int, seed: int = 0):
    x = np.random.default_rng(seed).random((n, 2))
    return x.tolist(), (np.sin(3 * x[:, 0]) + 0.3 * x[:, 1]).tolist()


def _stored(store, campaign: str):
    spec, model = store.campaigns.spec(campaign), store.models.latest(campaign)
    return spec, model, store.labels.all(campaign)


def _answer(store, *args):
    job = enqueue_short(store.r, *args)
    _work(store)
    return fetch_job(job.id, store.r).return_value()


def test_the_picture_and_the_indices_share_one_computation_per_model(
    bare_store, make_body, monkeypatch
):
    store = bare_store
    body = make_body(inputs=INPUTS, pool={"type": "grid", "points_per_dim": 11}, max_labels=20)
    campaign = store.campaigns.create(CampaignCreate(**body).model_dump())["id"]
    x, y = _labels(8)
    _import(store, campaign, x, y)
    _work(store)
    computed = []

    def counted(*args, **options):
        computed.append(options)
        return sensitivity_outputs(*args, **options)

    monkeypatch.setattr(calls, "sensitivity_outputs", counted)
    assert _answer(store, "plot", campaign, "sobol")  # a PNG, base64
    indices = _answer(store, "sensitivity", campaign, "closed-form", 0.95)
    assert len(computed) == 1
    expected = sensitivity_outputs(*_stored(store, campaign))
    assert indices["first"] == expected["first"] and indices["total"] == expected["total"]
    assert indices["model_version"] == 8
    # another level is other indices; the same again is kept
    wider = _answer(store, "sensitivity", campaign, "closed-form", 0.5)
    assert len(computed) == 2 and wider["first"]["mean"] == indices["first"]["mean"]
    assert wider["first"]["high"] != indices["first"]["high"]
    _answer(store, "sensitivity", campaign, "closed-form", 0.5)
    assert len(computed) == 2
    # a new model: its own indices
    x, y = _labels(1, seed=1)
    _import(store, campaign, x, y)
    _work(store)
    again = _answer(store, "sensitivity", campaign, "closed-form", 0.95)
    assert len(computed) == 3 and again["model_version"] == 9


def test_a_picture_of_one_output_draws_that_output_s_indices(bare_store, make_body, monkeypatch):
    store = bare_store
    outputs = [{"name": "up"}, {"name": "down"}]
    body = make_body(
        inputs=INPUTS, outputs=outputs, pool={"type": "grid", "points_per_dim": 11}, max_labels=20
    )
    campaign = store.campaigns.create(CampaignCreate(**body).model_dump())["id"]
    x, y = _labels(8)
    _import(store, campaign, x, [{"up": v, "down": -3 * v * v} for v in y])
    _work(store)
    drawn = []
    sobol_png = calls.effect_views.sobol_png
    monkeypatch.setattr(
        calls.effect_views,
        "sobol_png",
        lambda *args: drawn.append(args[-1]) or sobol_png(*args),
    )
    for name in ("down", "up"):
        assert _answer(store, "plot", campaign, "sobol", name)
    every = sensitivity_outputs(*_stored(store, campaign))["outputs"]
    assert [d["first"] for d in drawn] == [every["down"]["first"], every["up"]["first"]]
    assert every["down"]["first"] != every["up"]["first"]
