"""``fbgp-al report`` over real HTTP (a real API server, Redis and worker): a 2-output campaign
of mixed inputs with a failed run, written as one HTML file that loads nothing (its pictures
``data:`` URIs, no script, no link out but the campaign's page) and names each output, its
Sobol indices with their intervals, the inputs, the labels and the failed run."""

import base64
import math
import re

import pytest

from fbgp_al.clients.client import FbgpClient
from fbgp_al.clients.ops import cli

INPUTS = [
    {"name": "load", "lower": 0.0, "upper": 10.0},
    {"name": "thickness", "type": "int", "lower": 1, "upper": 4},
    {"name": "material", "type": "choice", "values": ["steel", "aluminium"]},
]
OUTPUTS = [{"name": "stress", "units": "MPa"}, {"name": "disp"}]


def beam(x: list) -> dict:
    load, thickness, material = x
    stiff = 1.0 if material == "steel" else 0.4
    return {
        "stress": 100 * load / thickness**2 + 20 * math.sin(load),
        "disp": 0.01 * load / (thickness * stiff),
    }


@pytest.fixture(scope="module")
def campaign(api_url):
    """A labeled 2-output campaign with one failed run; its id."""
    with FbgpClient(api_url, token="") as api:
        body = {
            "name": "beam <report>",
            "inputs": INPUTS,
            "outputs": OUTPUTS,
            "pool": {"type": "grid", "points_per_dim": 6},
            "max_labels": 8,
            "seed": 4,
            "mcmc": {"chains": 2, "warmup": 30, "samples": 20, "thinning": 2},
        }
        created = api.create_campaign(body)
        first = api.next_point(created.id)
        api.fail(created.id, first.ticket, "mesh did not converge")
        for _ in range(6):
            point = api.next_point(created.id, wait=30)
            api.label(created.id, point.ticket, beam(point.x))
        api.wait_for_model(created.id, 6, timeout=120)
        yield created.id


def test_the_report_is_self_contained_and_complete(api_url, campaign, tmp_path, capsys):
    out = tmp_path / "report.html"
    cli.main(["report", campaign, "--url", api_url, "-o", str(out)])
    assert "pictures" in capsys.readouterr().err
    document = out.read_text()
    # nothing loaded: the pictures inline, no script, no stylesheet or font from elsewhere
    sources = re.findall(r"\bsrc=['\"]([^'\"]*)", document)
    assert sources and all(s.startswith("data:image/png;base64,") for s in sources)
    for s in sources:
        assert base64.b64decode(s.split(",", 1)[1]).startswith(b"\x89PNG")
    assert "<script" not in document.lower() and "<link" not in document.lower()
    assert "url(" not in document and "@import" not in document
    page = f"{api_url}/campaigns/{campaign}/view"
    assert re.findall(r"\bhref=['\"]([^'\"]*)", document) == [page]
    assert re.findall(r"https?://[^'\"<\s]+", document) == [page]
    # what it says: the outputs, each one's indices with their intervals, the data
    assert "beam &lt;report&gt;" in document
    alts = re.findall(r"<img alt='([^']*)'", document)
    for title in ("stress [MPa]", "disp"):
        for what in ("main effects", "Sobol indices", "hyperparameter posterior"):
            assert f"{title}: {what}" in alts
        assert f"{title} over load and thickness" in alts
    assert "accuracy estimates, model after model" in alts
    with FbgpClient(api_url, token="") as api:
        indices = api.sensitivity(campaign)["outputs"]
        model = api.model(campaign)
    for name, s in indices.items():
        title = "stress [MPa]" if name == "stress" else name
        table = document.split(f"<h3 class='sobol'>{title} (")[1].split("</table>")[0]
        for j, inp in enumerate(s["inputs"]):
            first, total = s["first"], s["total"]
            row = (
                f"<td>{inp}</td><td>{first['mean'][j]:.3f}</td><td>{first['low'][j]:.3f} to "
                f"{first['high'][j]:.3f}</td><td>{total['mean'][j]:.3f}</td>"
                f"<td>{total['low'][j]:.3f} to {total['high'][j]:.3f}</td>"
            )
            assert row in table, (row, table)
    assert f"Model {model.version} (" in document and "largest R-hat" in document
    assert "LOO RMSE" in document and "divergences" in document
    assert "<td>thickness</td><td>int</td><td>1 to 4 (integers)</td>" in document
    assert "<td>MPa</td>" in document and "6 labels</summary>" in document
    assert re.search(
        r"<td>load=[0-9.]+, thickness=\d, material=\w+</td><td>mesh did not "
        r"converge</td>",
        document,
    )


def test_a_report_of_an_unknown_campaign_says_why(api_url, tmp_path):
    with pytest.raises(SystemExit, match="fbgp-al report: HTTP 404"):
        cli.main(["report", "nope", "--url", api_url, "-o", str(tmp_path / "r.html")])


def test_a_diagnostic_that_does_not_apply_is_an_empty_cell():
    """A Laplace mixture's R-hat and bulk ESS are null: blank cells, not "None"."""
    from fbgp_al.clients.ops.report import _table

    row = _table(["sampler", "largest R-hat", "Pareto k"], [["laplace", None, -0.1]])
    assert "None" not in row and "<td></td>" in row and "<td>laplace</td>" in row


def test_the_data_of_a_campaign_with_fidelities_give_each_labels_level_and_the_cost():
    from fbgp_al.clients.ops.report import _data_parts
    from fbgp_al.clients.responses import CampaignStatus, Observations

    raw = {
        "id": "c",
        "state": "done",
        "n_labeled": 2,
        "n_pending": 0,
        "max_labels": 9,
        "model_version": 2,
        "last_error": None,
        "fidelities": [{"name": "coarse", "cost": 1.0}, {"name": "fine", "cost": 10.0}],
        "max_cost": 20.0,
        "cost_spent": 11.0,
        "labels_per_fidelity": {"coarse": 1, "fine": 1},
    }
    data = {
        "status": CampaignStatus.from_json(raw),
        "inputs": [{"name": "x", "lower": 0.0, "upper": 1.0}],
        "outputs": None,
        "observations": Observations([[0.25], [0.75]], [1.5, -2.0], fidelity=["coarse", "fine"]),
    }
    text = re.sub(r"<[^>]+>", " ", "".join(_data_parts(data)))
    assert re.search(r"0\.25\s+coarse\s+1\.5", text) and re.search(r"0\.75\s+fine\s+-2", text)
    assert "cost spent 11.0 of max_cost 20.0" in text
