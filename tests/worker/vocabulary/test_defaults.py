"""The campaign vocabulary's rules (:mod:`worker.vocabulary.defaults`): which noise a campaign's
labels carry, and a multi-output campaign as one single-output campaign per output (its names,
weights, seeds and labels), and its search."""

from fbgp_al.worker.vocabulary import defaults
from fbgp_al.worker.vocabulary.defaults import (
    known_noise,
    output_labels,
    output_names,
    output_spec,
    output_weights,
)

SPEC = {
    "inputs": [{"name": "x", "lower": 0.0, "upper": 1.0}],
    "seed": 7,
    "outputs": [{"name": "stress", "weight": 3.0}, {"name": "disp"}],
}


def test_only_a_known_noise_campaign_has_labels_with_their_noise():
    assert known_noise({"noise": {"type": "known", "nugget": True}})
    assert not known_noise({"noise": {"type": "learned"}})
    assert not known_noise({}) and not known_noise({"noise": None})  # specs from before


def test_each_output_is_a_single_output_campaign_of_its_own_seed():
    assert output_names(SPEC) == ["stress", "disp"] and output_names({"outputs": None}) is None
    assert output_weights(SPEC) == [3.0, 1.0]  # a weight not given is 1
    first, second = output_spec(SPEC, 0), output_spec(SPEC, 1)
    assert "outputs" not in first and first["inputs"] == SPEC["inputs"]
    assert (first["seed"], second["seed"]) == (7, 8)
    assert output_spec(dict(SPEC, seed=2**32 - 1), 1)["seed"] == 0  # seeds stay 32-bit
    assert "outputs" in SPEC  # the campaign's own spec is left as it was


def test_an_outputs_labels_carry_its_value_and_its_noise():
    labels = [
        {"x": [0.1], "y": {"stress": 1.5, "disp": 0.2}, "ticket": "t1"},
        {
            "x": [0.7],
            "y": {"stress": 2.5, "disp": 0.4},
            "ticket": "t2",
            "noise": {"stress": 0.01, "disp": 0.0},
        },
    ]
    disp = output_labels(labels, "disp")
    assert [label["y"] for label in disp] == [0.2, 0.4]
    assert "noise" not in disp[0] and disp[1]["noise"] == 0.0
    assert [label["ticket"] for label in disp] == ["t1", "t2"]
    assert output_labels(labels, "stress")[1]["noise"] == 0.01
    assert labels[0]["y"] == {"stress": 1.5, "disp": 0.2}  # the campaign's labels unchanged


def test_a_campaign_polishes_only_when_its_search_says_so():
    assert defaults.search_options({}) == (False, defaults.SEARCH_STARTS)
    assert defaults.search_options({"search": None}) == (False, defaults.SEARCH_STARTS)
    assert defaults.search_options({"search": {"polish": True}}) == (True, defaults.SEARCH_STARTS)
    assert defaults.search_options({"search": {"polish": True, "starts": 2}}) == (True, 2)
    box = {"pool": {"type": "continuous"}}
    assert defaults.search_options(box) == (True, defaults.SEARCH_STARTS)
    assert defaults.search_options(dict(box, search={"polish": False}))[0] is False
    assert defaults.search_options(dict(box, search={"polish": None, "starts": 2})) == (True, 2)
