"""The SDK when simulations fail, over real HTTP (a real API server, Redis and worker): an
exception in ``f`` reports the ticket failed and the campaign still reaches ``done``;
``on_error="raise"`` stops after reporting; Ctrl-C abandons the ticket held; a long run keeps
its lease; a refused label is logged (409: the runner goes on; 422: the ticket is given back);
a stop ends the wait for a point; SIGTERM stops ``fbgp-al simulate`` as Ctrl-C does."""

import logging
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clients.client import ApiError, FbgpClient
from clients.runner import run_simulator

ROOT = Path(__file__).resolve().parents[2]
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


def test_a_run_longer_than_its_lease_keeps_its_point(api, api_url, make_body):
    """The runner renews the lease while ``f`` runs: past ``lease_seconds`` the ticket is still
    out (nobody else is offered its point), and its label is stored."""
    campaign = _campaign(api, make_body, initial_design={"type": "maximin-lhs", "size": 1},
                         lease_seconds=2.0, max_labels=1)  # fmt: skip
    seen = []

    def f(x):
        time.sleep(3.5)  # past the lease: renewed at about 0.7, 1.3, 2.0, 2.7 and 3.3 s
        seen.append(api.campaign(campaign).n_pending)
        return 0.5

    assert run_simulator(api_url, campaign, f, token="") == 1
    assert seen == [1]
    assert api.campaign(campaign).n_labeled == 1


def test_a_label_whose_point_was_labeled_meanwhile_is_logged_and_the_runner_goes_on(
    api, api_url, make_body, caplog
):
    """Its point got a label under another ticket while ``f`` ran (here an import): the label
    is refused (409), the ticket ends, and the runner labels the next points."""
    campaign = _campaign(api, make_body, max_labels=4)
    calls = []

    def f(x):
        calls.append(x)
        if len(calls) == 1:
            api.import_observations(campaign, [x], [0.25])  # labeled under no ticket
        return math.sin(3 * x[0])

    with caplog.at_level(logging.WARNING, logger="fbgp.runner"):
        posted = run_simulator(api_url, campaign, f, token="", wait=30)
    assert posted == 3 and len(calls) == 4
    assert any("was not stored (409" in r.getMessage() for r in caplog.records)
    status = api.campaign(campaign)
    assert status.state == "done" and status.n_pending == 0 and status.n_labeled == 4


def test_a_malformed_label_gives_the_ticket_back_and_raises(api, api_url, make_body, caplog):
    """A campaign with known noise refuses a bare y (422): the ticket is abandoned (no lease
    holds the campaign up) and the error raised, the label logged."""
    campaign = _campaign(api, make_body, noise={"type": "known"})
    with caplog.at_level(logging.ERROR, logger="fbgp.runner"), pytest.raises(ApiError) as raised:
        run_simulator(api_url, campaign, lambda x: 0.5, token="")
    assert raised.value.status_code == 422
    status = api.campaign(campaign)
    assert status.n_abandoned == 1 and status.n_pending == 0 and status.n_labeled == 0
    assert any("was not stored" in r.getMessage() for r in caplog.records)


def test_a_stop_ends_the_wait_for_a_point(api, api_url, make_body):
    """``should_stop`` is looked at while the runner waits for a point (202s), not only once one
    comes: a runner told to stop returns within a poll, holding no ticket."""
    campaign = _campaign(api, make_body, initial_design={"type": "maximin-lhs", "size": 1})
    held = api.next_point(campaign, wait=0)  # the only design point is out: others wait
    stop_at = time.monotonic() + 1.0
    started = time.monotonic()
    posted = run_simulator(api_url, campaign, lambda x: 0.5, token="", wait=1.0,
                           should_stop=lambda: time.monotonic() > stop_at)  # fmt: skip
    assert posted == 0 and time.monotonic() - started < 30
    status = api.campaign(campaign)
    assert status.n_pending == 1 and status.n_abandoned == 0  # only the ticket held here
    api.abandon(campaign, held.ticket)


SLOW_SIMULATE = """
import sys, time
from clients.ops import simulate

real = simulate.get_simulator


class Slow:  # the built-in simulator, one run taking a minute
    def __init__(self, sim):
        self.sim = sim

    def __getattr__(self, name):
        return getattr(self.sim, name)

    def sample(self, x, rng):
        time.sleep(60)
        return self.sim.sample(x, rng)


simulate.get_simulator = lambda name: Slow(real(name))
simulate.main(sys.argv[1:])
"""


def test_sigterm_stops_fbgp_al_simulate_and_gives_its_ticket_back(api, api_url, make_body):
    """``fbgp-al simulate`` stopped by SIGTERM (docker stop, a job scheduler) during a run: its
    ticket is abandoned, not left out for its lease, and it exits 143."""
    campaign = _campaign(api, make_body, initial_design={"type": "maximin-lhs", "size": 1})
    env = {k: v for k, v in os.environ.items() if k != "FBGP_API_TOKEN"}
    process = subprocess.Popen(
        [sys.executable, "-c", SLOW_SIMULATE, "gramacy1d", "--url", api_url, "--campaign",
         campaign, "--token", "", "--quiet"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while api.campaign(campaign).n_pending == 0:
            assert process.poll() is None and time.monotonic() < deadline, process.stdout.read()
            time.sleep(0.1)
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 143, out
    assert "stopped by SIGTERM" in out
    status = api.campaign(campaign)
    assert status.n_abandoned == 1 and status.n_pending == 0 and status.n_labeled == 0
