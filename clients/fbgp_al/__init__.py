"""fbgp-al's Python SDK: label a campaign of the fbgp-al service from Python, and predict from
its exported model without the service.

```python
from fbgp_al import Client, Metamodel, run_simulator

with Client("http://127.0.0.1:8000") as api:  # token: argument or FBGP_API_TOKEN
    campaign = api.create_campaign(
        {
            "inputs": [{"name": "x", "lower": 0, "upper": 1}],
            "pool": {"type": "grid", "points_per_dim": 100},
            "max_labels": 20,
        }
    )
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

import importlib
from typing import TYPE_CHECKING

# The SDK's names load when first used (__getattr__), so that importing one of the packages
# below (fbgp_al.service, fbgp_al.worker), which runs this file first, loads nothing of the
# SDK. Each public name: the module it lives in, and its name there.
_SDK = {
    "ApiError": ("fbgp_al.clients.errors", "ApiError"),
    "Campaign": ("fbgp_al.clients.responses", "Campaign"),
    "CampaignStatus": ("fbgp_al.clients.responses", "CampaignStatus"),
    "Client": ("fbgp_al.clients.client", "FbgpClient"),
    "Evaluation": ("fbgp_al.clients.responses", "Evaluation"),
    "Metamodel": ("fbgp_al.clients.metamodel", "Metamodel"),
    "Model": ("fbgp_al.clients.responses", "Model"),
    "NextPoint": ("fbgp_al.clients.responses", "NextPoint"),
    "Prediction": ("fbgp_al.clients.prediction", "Prediction"),
    "RefitFailed": ("fbgp_al.clients.errors", "RefitFailed"),
    "get_simulator": ("fbgp_al.clients.simulators", "get_simulator"),
    "run_simulator": ("fbgp_al.clients.runner", "run_simulator"),
}
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

if TYPE_CHECKING:  # for type checkers and editors: the names as they are loaded
    from fbgp_al.clients.client import FbgpClient as Client
    from fbgp_al.clients.errors import ApiError, RefitFailed
    from fbgp_al.clients.metamodel import Metamodel
    from fbgp_al.clients.prediction import Prediction
    from fbgp_al.clients.responses import Campaign, CampaignStatus, Evaluation, Model, NextPoint
    from fbgp_al.clients.runner import run_simulator
    from fbgp_al.clients.simulators import get_simulator


def __getattr__(name: str):
    """One of the SDK's names (:data:`__all__`), imported on first use and kept."""
    if name not in _SDK:
        raise AttributeError(f"module 'fbgp_al' has no attribute {name!r}")
    module, attribute = _SDK[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_SDK])
