"""The remote-simulator runner (:mod:`clients.runner`), over real HTTP (a real API server, Redis
and worker). When simulations fail: an exception in ``f`` reports the ticket failed and the
campaign still reaches ``done``; ``on_error="raise"`` stops after reporting; Ctrl-C abandons the
ticket held; a long run keeps its lease; a refused label is logged (409: the runner goes on; 422:
the ticket is given back); a stop ends the wait for a point; SIGTERM stops ``fbgp-al simulate``
as Ctrl-C does. What ``f`` may return (``label_of``), with known noise and several outputs, and
campaigns of known noise and of several outputs with mixed inputs labeled through the SDK."""

import logging
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from fbgp_al.clients.client import ApiError, FbgpClient
from fbgp_al.clients.metamodel import Metamodel
from fbgp_al.clients.runner import label_of, run_simulator
from fbgp_al.clients.simulators import get_simulator

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

    posted = run_simulator(
        api_url,
        campaign,
        f,
        token="",
        wait=30,
        on_failure=lambda x, reason: failed.append((x, reason)),
    )
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
    report = api.fail(
        campaign, api.observations(campaign).failures[0]["ticket"], "ValueError: bad mesh"
    )
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
    campaign = _campaign(
        api,
        make_body,
        initial_design={"type": "maximin-lhs", "size": 1},
        lease_seconds=2.0,
        max_labels=1,
    )
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
    posted = run_simulator(
        api_url,
        campaign,
        lambda x: 0.5,
        token="",
        wait=1.0,
        should_stop=lambda: time.monotonic() > stop_at,
    )
    assert posted == 0 and time.monotonic() - started < 30
    status = api.campaign(campaign)
    assert status.n_pending == 1 and status.n_abandoned == 0  # only the ticket held here
    api.abandon(campaign, held.ticket)


SLOW_SIMULATE = """
import os, sys, time
from fbgp_al.clients.ops import simulate

real = simulate.get_simulator


class Slow:  # the built-in simulator, one run taking a minute
    def __init__(self, sim):
        self.sim = sim

    def __getattr__(self, name):
        return getattr(self.sim, name)

    def sample(self, x, rng):
        open(os.environ["RUNNING_MARK"], "w").close()  # the run has begun
        time.sleep(60)
        return self.sim.sample(x, rng)


simulate.get_simulator = lambda name: Slow(real(name))
simulate.main(sys.argv[1:])
"""


def test_sigterm_stops_fbgp_al_simulate_and_gives_its_ticket_back(
    api, api_url, make_body, tmp_path
):
    """``fbgp-al simulate`` stopped by SIGTERM (docker stop, a job scheduler) during a run: its
    ticket is abandoned, not left out for its lease, and it exits 143. (The signal is sent once
    the run has begun: between the service handing a ticket out and the runner holding it, the
    ticket is left to its lease.)"""
    campaign = _campaign(api, make_body, initial_design={"type": "maximin-lhs", "size": 1})
    running = tmp_path / "running"
    env = {k: v for k, v in os.environ.items() if k != "FBGP_API_TOKEN"}
    env["RUNNING_MARK"] = str(running)
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            SLOW_SIMULATE,
            "gramacy1d",
            "--url",
            api_url,
            "--campaign",
            campaign,
            "--token",
            "",
            "--quiet",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not running.exists():
            assert process.poll() is None and time.monotonic() < deadline, process.stdout.read()
            time.sleep(0.1)
        assert api.campaign(campaign).n_pending == 1
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


def _body(**changes) -> dict:
    sim = get_simulator("motorcycle")
    body = {
        "name": "known-noise",
        "inputs": sim.inputs(),
        "pool": sim.pool,
        "max_labels": 8,
        "mcmc": FAST,
        "seed": 2,
        "noise": {"type": "known"},
    }
    return dict(body, **changes)


def test_label_of_reads_what_a_simulator_returns():
    assert label_of(1.5) == {"y": 1.5}
    assert label_of(np.float64(2.0)) == {"y": 2.0}
    assert label_of((1.0, 0.25)) == {"y": 1.0, "noise": 0.25}
    assert label_of({"y": 1.0, "noise": 0.5}) == {"y": 1.0, "noise": 0.5}
    assert label_of({"y": 1.0}) == {"y": 1.0}
    assert label_of({"y_replicates": [1.0, 2.0]}) == {"replicates": [1.0, 2.0]}
    for bad in (
        (1.0, 2.0, 3.0),
        {"y": 1.0, "sd": 2.0},
        {"noise": 1.0},
        (1.0, -0.5),
        (1.0, math.nan),
        {"y_replicates": [1.0, 2.0], "y": 1.5},
        math.inf,
    ):
        with pytest.raises(ValueError):
            label_of(bad)


def test_a_known_noise_campaign_through_the_sdk(api, api_url):
    sim = get_simulator("motorcycle")
    campaign = api.create_campaign(_body())
    assert campaign.spec["noise"] == {"type": "known", "nugget": True}
    point = api.next_point(campaign.id)
    with pytest.raises(ApiError) as missing:
        api.label(campaign.id, point.ticket, 1.0)
    assert missing.value.status_code == 422
    result = api.label(campaign.id, point.ticket, replicates=[1.0, 1.4, 0.9])
    assert result.created and result.y == pytest.approx(1.1)
    assert result.noise == pytest.approx(np.var([1.0, 1.4, 0.9], ddof=1) / 3)
    assert not api.label(campaign.id, point.ticket, replicates=[1.0, 1.4, 0.9]).created

    rng = np.random.default_rng(0)
    returns = iter(["pair", "dict", "replicates"])

    def f(x):
        sd = float(sim.noise_std(np.array([x]))[0])
        y = float(sim.mean(np.array([x]))[0]) + sd * rng.standard_normal()
        kind = next(returns)
        if kind == "pair":
            return y, sd**2
        if kind == "dict":
            return {"y": y, "noise": sd**2}
        return {"y_replicates": list(y + sd * rng.standard_normal(3))}

    seen = []
    posted = run_simulator(
        api_url,
        campaign.id,
        f,
        token="",
        wait=10,
        max_labels=3,
        on_label=lambda x, y, n: seen.append((y, n)),
    )
    assert posted == 3 and [n for _, n in seen] == [2, 3, 4]
    n = api.import_observations(campaign.id, [[10.0], [50.0]], [0.1, -0.2], noise=[0.01, 0.3])
    assert n == 6
    observed = api.observations(campaign.id)
    assert len(observed.noise) == 6 and observed.noise[0] == pytest.approx(result.noise)
    assert observed.noise[4:] == [0.01, 0.3] and all(v > 0 for v in observed.noise)
    assert '"noise"' in api.observations_csv(campaign.id).splitlines()[0].split(",")
    api.wait_for_model(campaign.id, 6, timeout=120)
    x = [[20.0], [60.0]]
    y = [float(v) for v in sim.mean(np.array(x))]
    noise = [float(v) ** 2 for v in sim.noise_std(np.array(x))]
    with_noise = api.evaluate(campaign.id, x, y, noise=noise)
    without = api.evaluate(campaign.id, x, y)
    assert math.isfinite(with_noise.nlml) and with_noise.nlml != without.nlml


def test_label_of_reads_several_outputs():
    assert label_of({"stress": 1.0, "disp": 2}) == {"y": {"stress": 1.0, "disp": 2.0}}
    assert label_of({"y": {"a": 1.0, "b": 2.0}, "noise": {"a": 0.1, "b": 0.0}}) == {
        "y": {"a": 1.0, "b": 2.0},
        "noise": {"a": 0.1, "b": 0.0},
    }
    assert label_of({"y_replicates": {"a": [1.0, 2.0]}}) == {"replicates": {"a": [1.0, 2.0]}}
    for bad in (
        {"a": float("nan")},
        {"y": {"a": 1.0}, "noise": {"a": -1.0}},
        {"y": {}},
        {"a": "x"},
    ):
        with pytest.raises(ValueError):
            label_of(bad)


def test_run_simulator_with_several_outputs_and_mixed_inputs(api, api_url):
    inputs = [
        {"name": "load", "lower": 0.0, "upper": 1.0},
        {"name": "layers", "type": "int", "lower": 1, "upper": 4},
        {"name": "alloy", "type": "choice", "values": ["steel", "titanium"]},
    ]
    body = {
        "name": "beam",
        "inputs": inputs,
        "pool": {"type": "grid", "points_per_dim": 6},
        "outputs": [{"name": "stress"}, {"name": "disp", "weight": 0.5}],
        "max_labels": 5,
        "mcmc": FAST,
        "seed": 3,
    }
    campaign = api.create_campaign(body)

    def beam(x):
        load, layers, alloy = x
        stiffness = 200.0 if alloy == "steel" else 110.0
        return {"stress": 1e6 * load / layers, "disp": load / (layers * stiffness)}

    seen = []
    posted = run_simulator(
        api_url, campaign.id, beam, token="", on_label=lambda x, y, n: seen.append(y)
    )
    assert posted == 5 and all(set(y) == {"stress", "disp"} for y in seen)
    api.wait_for_model(campaign.id, 5, timeout=120)
    model = api.model(campaign.id)
    assert set(model.outputs) == {"stress", "disp"} and model.samples is None
    x = [[0.5, 2, "steel"], [0.9, 1, "titanium"]]
    predicted = api.predict(campaign.id, x)
    assert set(predicted) == {"stress", "disp"} and len(predicted["disp"].mean) == 2
    truth = [beam(p) for p in x]
    scores = api.evaluate(campaign.id, x, {k: [t[k] for t in truth] for k in ("stress", "disp")})
    assert set(scores) == {"stress", "disp"} and scores["stress"].model_version == 5
    taken = Metamodel.load(api.export_model(campaign.id))
    assert taken.dim == 3 and set(taken.outputs) == {"stress", "disp"} and "disp" in repr(taken)
    home = taken.predict(x)
    for name in ("stress", "disp"):
        np.testing.assert_allclose(home[name]["mean"], predicted[name].mean, rtol=1e-10)
    observed = api.observations(campaign.id)
    assert observed.y == seen
    api.delete_campaign(campaign.id)


def test_a_campaign_with_fidelities_passes_each_runs_level_to_f(api, api_url, make_body):
    body = make_body(
        name="runner-fidelity",
        inputs=[{"name": "x", "lower": 0.0, "upper": 1.0}],
        mcmc=FAST,
        fidelities=[{"name": "coarse", "cost": 1}, {"name": "fine", "cost": 10}],
        initial_design={"size": 4},
        max_labels=6,
    )
    campaign = api.create_campaign(body).id

    def blind(x):
        return x[0]

    with pytest.raises(TypeError, match="fidelity"):
        run_simulator(api_url, campaign, blind, token="", wait=5)
    assert api.campaign(campaign).n_pending == 0  # its ticket given back
    calls = []

    def f(x, fidelity):
        calls.append((x[0], fidelity))
        return math.sin(6 * x[0]) * (2.0 if fidelity == "fine" else 1.0)

    assert run_simulator(api_url, campaign, f, token="", wait=30) == 6
    data = api.observations(campaign)
    assert [(x[0], level) for x, level in zip(data.x, data.fidelity, strict=True)] == calls
    assert api.campaign(campaign).raw["labels_per_fidelity"]["fine"] >= 2
    assert {level for _, level in calls} == {"coarse", "fine"}


def test_takes_fidelity_reads_the_functions_signature():
    from fbgp_al.clients.runner import takes_fidelity

    assert takes_fidelity(lambda x, fidelity: 0) and takes_fidelity(lambda x, **kw: 0)
    assert takes_fidelity(lambda x, *, fidelity="fine": 0)
    assert not takes_fidelity(lambda x: 0) and not takes_fidelity(lambda x, *args: 0)
