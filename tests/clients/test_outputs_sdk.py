"""The SDK with several outputs, over real HTTP: run_simulator with a function that returns
``{name: value}`` on a campaign of mixed inputs, the model, predictions, evaluations and the
exported Metamodel; ``fbgp-al simulate`` and the demo on the two-output ``branin2``; what
``f`` and a command may return."""

import numpy as np
import pytest

from clients.client import FbgpClient
from clients.metamodel import Metamodel
from clients.ops.cli import main as cli
from clients.ops.http_demo import run_demo
from clients.ops.run import CommandFailed, parse_y
from clients.runner import label_of, run_simulator
from clients.simulators import MULTI_SIMULATORS, SIMULATORS, MultiSimulator, get_simulator
from tests.clients.ops.test_run import _run_command

FAST = {"chains": 2, "warmup": 30, "samples": 20, "thinning": 2}


@pytest.fixture
def api(api_url):
    with FbgpClient(api_url, token="") as client:
        yield client


def test_label_of_reads_several_outputs():
    assert label_of({"stress": 1.0, "disp": 2}) == {"y": {"stress": 1.0, "disp": 2.0}}
    assert label_of({"y": {"a": 1.0, "b": 2.0}, "noise": {"a": 0.1, "b": 0.0}}) == {
        "y": {"a": 1.0, "b": 2.0}, "noise": {"a": 0.1, "b": 0.0}}  # fmt: skip
    assert label_of({"y_replicates": {"a": [1.0, 2.0]}}) == {"replicates": {"a": [1.0, 2.0]}}
    for bad in ({"a": float("nan")}, {"y": {"a": 1.0}, "noise": {"a": -1.0}}, {"y": {}},
                {"a": "x"}):  # fmt: skip
        with pytest.raises(ValueError):
            label_of(bad)


def test_a_command_may_print_several_outputs():
    assert parse_y("log\nstress=1.5 disp=2e-3\n") == {"stress": 1.5, "disp": 0.002}
    assert parse_y('{"stress": 1.5, "disp": 0.002}') == {"stress": 1.5, "disp": 0.002}
    assert parse_y("1.5") == 1.5 and parse_y("1.5 0.1") == (1.5, 0.1)
    for bad in ("stress=a", "{not json", "[1, 2]"):
        with pytest.raises(CommandFailed):
            parse_y(bad)


def test_the_two_output_simulator():
    sim = get_simulator("branin2")
    assert isinstance(sim, MultiSimulator) and "branin2" in MULTI_SIMULATORS
    assert "branin2" not in SIMULATORS  # not among the paper's benchmarks
    x = np.array([[1.0, 2.0], [9.0, 14.0]])
    means = sim.means(x)
    np.testing.assert_array_equal(means["branin"], get_simulator("branin").mean(x))
    assert np.abs(means["wave"]).max() < 0.011
    label = sim.label([1.0, 2.0], np.random.default_rng(0), known_noise=True)
    assert set(label["y"]) == set(label["noise"]) == {"branin", "wave"}
    assert label["noise"]["branin"] == pytest.approx(11.32**2)


def test_run_simulator_with_several_outputs_and_mixed_inputs(api, api_url):
    inputs = [{"name": "load", "lower": 0.0, "upper": 1.0},
              {"name": "layers", "type": "int", "lower": 1, "upper": 4},
              {"name": "alloy", "type": "choice", "values": ["steel", "titanium"]}]  # fmt: skip
    body = {"name": "beam", "inputs": inputs, "pool": {"type": "grid", "points_per_dim": 6},
            "outputs": [{"name": "stress"}, {"name": "disp", "weight": 0.5}],
            "max_labels": 5, "mcmc": FAST, "seed": 3}  # fmt: skip
    campaign = api.create_campaign(body)

    def beam(x):
        load, layers, alloy = x
        stiffness = 200.0 if alloy == "steel" else 110.0
        return {"stress": 1e6 * load / layers, "disp": load / (layers * stiffness)}

    seen = []
    posted = run_simulator(api_url, campaign.id, beam, token="",
                           on_label=lambda x, y, n: seen.append(y))  # fmt: skip
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


def test_simulate_and_the_demo_drive_the_two_output_simulator(api, api_url, capsys):
    args = ["--url", api_url, "--mcmc", "fast", "--iterations", "1", "--known-noise"]
    cli(["simulate", "branin2", *args])
    out = capsys.readouterr().out
    campaign = out.split("created campaign ")[1].split()[0]
    assert "posted 4 labels" in out and "'wave'" in out
    status = api.campaign(campaign)
    assert status.state == "done"
    observed = api.observations(campaign)
    assert set(observed.y[0]) == {"branin", "wave"} and set(observed.noise[0]) == {"branin", "wave"}
    api.delete_campaign(campaign)
    result = run_demo(api_url, "branin2", labels=4)
    assert set(result["outputs"]) == {"branin", "wave"}
    assert all(np.isfinite(e["nlml"]) for e in result["outputs"].values())
    api.delete_campaign(result["campaign"])


def test_fbgp_al_run_reads_several_outputs_from_a_command(api_url, make_body):
    body = make_body(name="run-outputs", outputs=[{"name": "stress"}, {"name": "disp"}],
                     max_labels=4, mcmc=FAST)  # fmt: skip
    with FbgpClient(api_url, token="") as api:
        campaign = api.create_campaign(body).id
        process = _run_command(
            api_url,
            campaign,
            "sh",
            "-c",
            'echo working; echo "stress={x} disp=$(echo {x} | cut -c1-3)"',
        )
        out, _ = process.communicate(timeout=300)
        assert process.returncode == 0, out
        observed = api.observations(campaign)
    assert len(observed.y) == 4 and not observed.failures
    for x, y in zip(observed.x, observed.y, strict=True):
        assert y["stress"] == x[0] and y["disp"] == float(repr(x[0])[:3])
