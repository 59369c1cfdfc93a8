"""The SDK when simulations fail, over real HTTP (a real API server, Redis and worker): an
exception in ``f`` reports the ticket failed and the campaign still reaches ``done``;
``on_error="raise"`` stops after reporting; Ctrl-C abandons the ticket held."""

import math

import pytest

from clients.client import FbgpClient
from clients.runner import run_simulator

FAST = {"chains": 2, "warmup": 30, "samples": 20, "thinning": 2}


@pytest.fixture
def api(api_url):
    with FbgpClient(api_url, token="") as client:
        yield client


def _campaign(api, make_body, **changes):
    return api.create_campaign(make_body(name="runner-failures", mcmc=FAST, **changes)).id


def test_an_exception_in_f_reports_a_failure_and_the_campaign_still_reaches_done(
    api, api_url, make_body
):
    campaign = _campaign(api, make_body, max_labels=4)
    calls, failed = [], []

    def f(x):
        calls.append(x)
        if len(calls) == 2:
            raise RuntimeError("solver diverged")
        return math.sin(3 * x[0]) + x[0]

    posted = run_simulator(api_url, campaign, f, token="", wait=30,
                           on_failure=lambda x, reason: failed.append((x, reason)))  # fmt: skip
    assert posted == 4 and len(calls) == 5
    assert failed == [(calls[1], "RuntimeError: solver diverged")]
    status = api.campaign(campaign)
    assert status.state == "done" and status.n_failed == 1 and status.n_pending == 0
    data = api.observations(campaign)
    assert [f["reason"] for f in data.failures] == ["RuntimeError: solver diverged"]
    assert calls[1] not in data.x and len(data.y) == 4


def test_on_error_raise_reports_the_failure_then_stops(api, api_url, make_body):
    campaign = _campaign(api, make_body)

    def f(x):
        raise ValueError("bad mesh")

    with pytest.raises(ValueError, match="bad mesh"):
        run_simulator(api_url, campaign, f, token="", on_error="raise")
    status = api.campaign(campaign)
    assert status.n_failed == 1 and status.n_pending == 0
    report = api.fail(campaign, api.observations(campaign).failures[0]["ticket"],
                      "ValueError: bad mesh")  # fmt: skip
    assert report.status == "failed" and not report.created  # the same report: idempotent


def test_ctrl_c_abandons_the_ticket_held(api, api_url, make_body):
    campaign = _campaign(api, make_body, initial_design={"type": "maximin-lhs", "size": 1})
    held = []

    def f(x):
        held.append(x)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_simulator(api_url, campaign, f, token="")
    status = api.campaign(campaign)
    assert status.n_abandoned == 1 and status.n_pending == 0 and status.n_failed == 0
    point = api.next_point(campaign, wait=0)
    assert point.x == held[0]  # offered again at once
    expiry = api.renew(campaign, point.ticket)
    assert expiry >= point.expires_at
    assert api.abandon(campaign, point.ticket).created
