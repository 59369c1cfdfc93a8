"""`pip install fbgp-al` (no extras) is the SDK alone (:mod:`fbgp_al`): in a fresh virtual
environment it brings httpx and numpy but not torch; ``from fbgp_al import Client,
run_simulator, Metamodel`` labels a campaign on a running service to the end (``api_url``: a real
API server, Redis and worker), and the exported model's ``Metamodel`` predicts what ``/predict``
answers, in the same shape."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[3]
# what the package is built from (a copy: pip would write build/ and *.egg-info into the checkout)
SOURCES = ("pyproject.toml", "README.md", "clients", "service", "worker")

LABEL = """
import json, math, sys
import fbgp_al
from fbgp_al import Client, Metamodel, Prediction, run_simulator

url, campaign = sys.argv[1:]
posted = run_simulator(url, campaign, lambda x: math.sin(3 * x[0]) + x[0], token="", wait=10)
with Client(url, token="") as api:
    status = api.campaign(campaign)
    api.wait_for_model(campaign, 5, timeout=120)
    import numpy as np

    model = Metamodel.load(api.export_model(campaign, "model.json"))
    x = [[0.5], [0.8], [1.3], [2.5]]
    served, local = api.predict(campaign, x), Metamodel.load("model.json").predict(x)
    # one shape: a Prediction, read by key or by attribute alike
    same = isinstance(served, Prediction) and isinstance(local, Prediction)
    same = same and sorted(served) == sorted(local) and served.mean is served["mean"]
    error = max(float(np.max(np.abs(local[k] - served[k]) / np.abs(served[k])))
                for k in ("mean", "variance", "mixture_mean", "mixture_variance"))
print(json.dumps({"posted": posted, "state": status.state, "n_labeled": status.n_labeled,
                  "torch": "torch" in sys.modules, "file": fbgp_al.__file__,
                  "exported": model.n_labeled, "error": error, "same_shape": same}))
"""


def _sdk_venv(tmp_path: Path) -> Path:
    """A fresh virtual environment with the checkout installed without extras; its python."""
    source = tmp_path / "source"
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(
                ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )
        else:
            source.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    return python


def test_the_package_without_extras_is_the_sdk_and_labels_a_campaign(tmp_path, api_url, make_body):
    python = _sdk_venv(tmp_path)

    def run(*args, **kw):
        return subprocess.run(
            [str(python), *args], cwd=tmp_path, capture_output=True, text=True, **kw
        )

    no_torch = run("-c", "import torch")
    assert no_torch.returncode != 0 and "No module named 'torch'" in no_torch.stderr
    installed = run("-m", "pip", "list", "--format=json")
    names = {p["name"].lower() for p in json.loads(installed.stdout)}
    assert {"httpx", "numpy", "fbgp-al"} <= names
    assert not names & {"torch", "scipy", "redis", "rq", "fastapi", "pyro-ppl", "gpytorch"}

    body = make_body(name="sdk-install", max_labels=5)
    r = httpx.post(f"{api_url}/campaigns", json=body, timeout=30)
    assert r.status_code == 201, r.text
    campaign = r.json()["id"]
    try:
        labeled = run("-c", LABEL, api_url, campaign, timeout=300)
        assert labeled.returncode == 0, labeled.stdout + labeled.stderr
        result = json.loads(labeled.stdout.strip().splitlines()[-1])
        assert result == dict(
            result, posted=5, state="done", n_labeled=5, torch=False, exported=5, same_shape=True
        )
        assert result["error"] < 1e-10  # the exported model predicts as /predict does
        # the installed SDK ran, not the checkout's
        assert Path(result["file"]).is_relative_to(tmp_path / "venv")
    finally:
        httpx.delete(f"{api_url}/campaigns/{campaign}", timeout=30)
