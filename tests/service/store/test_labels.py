"""Labels imported (:mod:`service.store.labels`), against the real Redis: an import sent again with
its ``Idempotency-Key`` is stored once (by the SDK's retry too), without one twice; an import does
not repeat a pool point unless the campaign allows it."""

from fbgp_al.clients.client import FbgpClient
from fbgp_al.service.loop import ImportOutcome
from fbgp_al.service.schemas.campaigns import CampaignCreate
from tests.service.store.test_tickets import LoseFirstAnswer

OFF_GRID = {"x": [[1.123], [1.456]], "y": [1.0, 2.0]}  # no pool points: repeats not refused


def _import(client, campaign: str, body: dict, key: str | None = "import-1"):
    headers = {} if key is None else {"Idempotency-Key": key}
    return client.post(f"/campaigns/{campaign}/observations", json=body, headers=headers)


def test_an_import_sent_again_with_its_key_is_stored_once(client, make_body):
    campaign = client.post("/campaigns", json=make_body(max_labels=4)).json()["id"]
    first = _import(client, campaign, OFF_GRID)
    assert first.status_code == 201 and first.json() == {"n_labeled": 2, "imported": 2}
    again = _import(client, campaign, OFF_GRID)
    assert again.status_code == 200 and again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert len(client.get(f"/campaigns/{campaign}/observations").json()["y"]) == 2
    # the key with other observations: refused, nothing stored
    other = _import(client, campaign, {"x": [[1.789]], "y": [3.0]})
    assert other.status_code == 422 and "other observations" in other.text
    # a new key fills the campaign; its repeat is still the first answer, not a 409
    full = _import(client, campaign, OFF_GRID, key="import-2")
    assert full.status_code == 201 and full.json()["n_labeled"] == 4
    assert _import(client, campaign, OFF_GRID, key="import-2").json() == full.json()
    assert _import(client, campaign, OFF_GRID, key="import-3").status_code == 409
    assert len(client.get(f"/campaigns/{campaign}/observations").json()["y"]) == 4


def test_without_a_key_an_import_sent_twice_is_stored_twice(client, make_body):
    """What the key is for: the service cannot tell a retry from a second import."""
    campaign = client.post("/campaigns", json=make_body(max_labels=10)).json()["id"]
    assert _import(client, campaign, OFF_GRID, key=None).status_code == 201
    assert _import(client, campaign, OFF_GRID, key=None).json()["n_labeled"] == 4


def test_the_client_s_import_retried_after_a_lost_answer_is_stored_once(api_url, make_body):
    with FbgpClient(api_url, token="", backoff=0.05) as api:
        lossy = LoseFirstAnswer(api._http._transport, "/observations")
        api._http._transport = lossy
        campaign = api.create_campaign(make_body(max_labels=10)).id
        assert api.import_observations(campaign, OFF_GRID["x"], OFF_GRID["y"]) == 2
        assert lossy.lost == 1 and len(lossy.keys) == 2 and lossy.keys[0] == lossy.keys[1]
        assert len(api.observations(campaign).y) == 2


def test_imports_do_not_repeat_a_pool_point_unless_allowed(client, make_body):
    """Without repeats, an import that holds a pool point labeled already, or one point twice,
    is a 409 and stores nothing; points off the pool may repeat; with repeats, all may."""
    url = "/campaigns/{}/observations"
    campaign = client.post("/campaigns", json=make_body(max_labels=10)).json()["id"]
    first = client.post(url.format(campaign), json={"x": [[0.6], [1.1]], "y": [0.1, 0.2]})
    assert first.status_code == 201
    for x in ([[1.3], [0.6]], [[1.3], [1.3]]):  # labeled already; twice in one import
        r = client.post(url.format(campaign), json={"x": x, "y": [0.0, 0.0]})
        assert r.status_code == 409 and "allow_repeats" in r.json()["detail"], r.text
    assert client.get(f"/campaigns/{campaign}").json()["n_labeled"] == 2  # nothing stored
    off_pool = {"x": [[1.301], [1.301]], "y": [0.0, 0.1]}
    assert client.post(url.format(campaign), json=off_pool).status_code == 201
    again = client.post("/campaigns", json=make_body(max_labels=10, allow_repeats=True)).json()
    twice = {"x": [[0.6], [0.6], [1.1]], "y": [0.1, 0.2, 0.3]}
    assert client.post(url.format(again["id"]), json=twice).status_code == 201
    assert client.post(url.format(again["id"]), json=twice).status_code == 201


def test_an_import_whose_key_was_stored_meanwhile_is_the_same_again_not_too_many(
    bare_store, make_body
):
    """The import sent again while its first was being stored: the route's look-up of its key
    came before the first was stored, and the first filled the campaign. Its key answers it
    (:func:`service.store.rules.import_outcome`: a held key before max_labels), not a 409."""
    store = bare_store
    spec = store.campaigns.create(CampaignCreate(**make_body(max_labels=3)).model_dump())
    x, y = [[1.123], [1.456], [1.789]], [1.0, 2.0, 3.0]
    first = store.labels.import_observations(spec["id"], x, y, 1.0, key="k", digest="d")
    assert first == (ImportOutcome.STORED, 3, True)
    again = store.labels.import_observations(spec["id"], x, y, 2.0, key="k", digest="d")
    assert again == (ImportOutcome.SAME_AGAIN, 3, False)
    other = store.labels.import_observations(spec["id"], x, y, 2.0, key="k", digest="e")
    assert other == (ImportOutcome.KEY_REUSED, 3, False)
    assert store.campaigns.n_labeled(spec["id"]) == 3
