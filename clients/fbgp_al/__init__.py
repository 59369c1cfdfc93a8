"""fbgp-al's Python SDK: label a campaign of the fbgp-al service from Python, and predict from
its exported model without the service.

```python
from fbgp_al import Client, Metamodel, run_simulator

with Client("http://127.0.0.1:8000") as api:   # token: argument or FBGP_API_TOKEN
    campaign = api.create_campaign({
        "inputs": [{"name": "x", "lower": 0, "upper": 1}],
        "pool": {"type": "grid", "points_per_dim": 100},
        "max_labels": 20,
    })
    run_simulator("http://127.0.0.1:8000", campaign.id, my_simulation, token=campaign.token)
    api.predict(campaign.id, [[0.5]])["mean"]
    api.export_model(campaign.id, "model.json")
Metamodel.load("model.json").predict([[0.5]])["mean"]
```

It needs httpx and numpy only (``pip install`` of the repository, no extras): no torch, no
service.

- :class:`Client`: a typed HTTP client for the whole API (retries where they are safe,
  long-polling ``/next``, ``wait_for_model``, ``export_model``);
- :func:`run_simulator`: a remote simulator in one call, from a Python function;
- :class:`Metamodel`: a campaign's exported model, predicting as ``/predict`` does;
- :class:`Prediction`: what ``Client.predict`` and ``Metamodel.predict`` answer;
- :func:`get_simulator`: the paper's seven built-in test simulators (and a two-output one).
"""

from clients.client import FbgpClient as Client
from clients.errors import ApiError, RefitFailed
from clients.metamodel import Metamodel
from clients.prediction import Prediction
from clients.responses import Campaign, CampaignStatus, Evaluation, Model, NextPoint
from clients.runner import run_simulator
from clients.simulators import get_simulator

__all__ = [
    "ApiError",
    "Campaign",
    "CampaignStatus",
    "Client",
    "Evaluation",
    "Metamodel",
    "Model",
    "NextPoint",
    "Prediction",
    "RefitFailed",
    "get_simulator",
    "run_simulator",
]
