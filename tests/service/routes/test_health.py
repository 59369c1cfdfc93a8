"""Liveness and readiness (:mod:`service.routes.health`): no token needed."""


def test_health_and_readiness(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["workers"] >= 1
