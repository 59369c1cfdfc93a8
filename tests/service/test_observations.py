"""An import's story (:mod:`service.observations`) on a store no worker serves: the points and
values checked before anything is stored, a key's first answer given again, the stack's
``limit_labels`` and the campaign's ``max_labels`` and repeats refused, all or none."""

import pytest

from fbgp_al.service.observations import Arrived, arrive
from fbgp_al.service.refusals import Conflict, Unprocessable
from fbgp_al.service.schemas.campaigns import CampaignCreate
from fbgp_al.service.settings import Settings


@pytest.fixture
def settings(redis_url):
    return Settings(redis_url=redis_url, limit_labels=5)


def _campaign(store, make_body, **changes) -> str:
    return store.campaigns.create(CampaignCreate(**make_body(**changes)).model_dump())["id"]


def test_an_import_is_stored_once_under_its_key(bare_store, make_body, settings):
    campaign = _campaign(bare_store, make_body, max_labels=6)
    first = arrive(bare_store, settings, campaign, [[1.1], [1.3]], [1.0, 2.0], None, "k1", 1.0)
    assert first == Arrived(2, 2)
    again = arrive(bare_store, settings, campaign, [[1.1], [1.3]], [1.0, 2.0], None, "k1", 2.0)
    assert again == Arrived(2, 2, again=True)
    with pytest.raises(Unprocessable, match="other observations"):
        arrive(bare_store, settings, campaign, [[1.5]], [3.0], None, "k1", 3.0)
    assert bare_store.campaigns.n_labeled(campaign) == 2


def test_values_that_do_not_fit_are_refused_before_anything_is_stored(
    bare_store, make_body, settings
):
    campaign = _campaign(bare_store, make_body)
    for x, y, noise in (
        ([[9.0]], [1.0], None),  # outside the box
        ([[1.0, 2.0]], [1.0], None),  # of another dimension
        ([[1.0]], [1.0], [0.1]),  # noise for a campaign whose noise is learned
    ):
        with pytest.raises(Unprocessable):
            arrive(bare_store, settings, campaign, x, y, noise, None, 1.0)
    assert bare_store.campaigns.n_labeled(campaign) == 0


def test_limits_and_repeats_refuse_the_whole_import(bare_store, make_body, settings):
    campaign = _campaign(bare_store, make_body, max_labels=4)
    with pytest.raises(Unprocessable, match="limit_labels"):  # 6 > the stack's 5
        arrive(bare_store, settings, campaign, [[1.0]] * 6, [1.0] * 6, None, None, 1.0)
    with pytest.raises(Conflict, match="max_labels"):  # 5 > the campaign's 4
        arrive(
            bare_store,
            settings,
            campaign,
            [[1.0 + i / 10] for i in range(5)],
            [1.0] * 5,
            None,
            None,
            1.0,
        )
    arrive(bare_store, settings, campaign, [[0.5]], [1.0], None, None, 1.0)  # a pool point
    with pytest.raises(Conflict, match="allow_repeats"):
        arrive(bare_store, settings, campaign, [[0.5]], [2.0], None, None, 2.0)
    assert bare_store.campaigns.n_labeled(campaign) == 1
