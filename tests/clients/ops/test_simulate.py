"""``fbgp-al simulate`` over real HTTP: a real API server (``api_url``), Redis and worker."""

import pytest

from fbgp_al.clients.client import FbgpClient
from fbgp_al.clients.ops.cli import main as cli


@pytest.fixture
def api(api_url):
    with FbgpClient(api_url, token="") as client:
        yield client


def test_simulate_creates_a_campaign_and_labels_it(api, api_url, capsys):
    args = ["--url", api_url, "--mcmc", "fast", "--iterations", "1", "--acquisition", "alm"]
    cli(["simulate", "gramacy1d", *args])
    out = capsys.readouterr().out
    campaign = out.split("created campaign ")[1].split()[0]
    assert "posted 4 labels" in out and out.count("label ") >= 4
    status = api.campaign(campaign)
    assert status.state == "done" and status.max_labels == 4
    api.delete_campaign(campaign)
