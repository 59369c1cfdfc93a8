"""The demo campaign of ``fbgp-al up --demo`` (:mod:`clients.ops.http_demo`) and ``fbgp-al
simulate`` on the two-output ``branin2``, over real HTTP."""

import numpy as np
import pytest

from fbgp_al.clients.client import FbgpClient
from fbgp_al.clients.ops.cli import main as cli
from fbgp_al.clients.ops.http_demo import run_demo


@pytest.fixture
def api(api_url):
    with FbgpClient(api_url, token="") as client:
        yield client


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
