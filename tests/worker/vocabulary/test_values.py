"""A label's values against its campaign (:mod:`worker.vocabulary.values`): what is stored, and the
field and output each refusal names; an output declared ``"transform": "log"`` takes values > 0
only (its label, each replicate, each row of an import or a test set)."""

import pytest

from fbgp_al.worker.vocabulary.defaults import log_outputs, output_spec, output_transform
from fbgp_al.worker.vocabulary.values import (
    LabelValues,
    check_noise,
    check_outputs,
    check_positive,
    checked_rows,
)

ONE = {"noise": {"type": "learned"}}
TWO = {"noise": {"type": "known"}, "outputs": [{"name": "stress"}, {"name": "strain"}]}


def test_one_output_takes_a_number_and_several_an_object_in_the_campaigns_order():
    assert check_outputs(ONE, 1.5, "y") == 1.5
    assert list(check_outputs(TWO, {"strain": 2, "stress": 1}, "y").items()) == [
        ("stress", 1.0),
        ("strain", 2.0),
    ]
    with pytest.raises(ValueError, match="^y: this campaign has one output"):
        check_outputs(ONE, {"stress": 1.0}, "y")
    with pytest.raises(ValueError, match=r"^y\[3\]: output 'strain' is missing"):
        check_outputs(TWO, {"stress": 1.0}, "y[3]")
    with pytest.raises(ValueError, match="^noise: unknown output 'heat'"):
        check_outputs(TWO, {"stress": 1.0, "strain": 1.0, "heat": 0.0}, "noise")
    with pytest.raises(ValueError, match="^y: this campaign has several outputs"):
        check_outputs(TWO, 1.0, "y")


def test_noise_is_required_exactly_where_the_campaign_knows_it():
    check_noise(TWO, True, "noise", "noise")
    check_noise(ONE, False, "noise", "noise")
    with pytest.raises(ValueError, match="^noise is required"):
        check_noise(TWO, False, "noise", "noise")
    with pytest.raises(ValueError, match="^noise: this campaign learns one noise level"):
        check_noise(ONE, True, "noise", "noise")


def test_rows_name_the_row_that_does_not_fit():
    y, noise = checked_rows(ONE, [1.0, 2.0], None)
    assert (y, noise) == ([1.0, 2.0], None)
    row = {"stress": 1.0, "strain": 2.0}
    with pytest.raises(ValueError, match=r"^noise\[1\]: output 'strain' is missing"):
        checked_rows(TWO, [row, row], [row, {"stress": 0.1}])


def test_a_label_is_checked_when_the_spec_is_known_and_keeps_what_it_stored():
    values = LabelValues({"stress": 1, "strain": 2}, {"stress": 0.5, "strain": 0.25})
    assert values.y is None
    assert values(TWO) == ({"stress": 1.0, "strain": 2.0}, {"stress": 0.5, "strain": 0.25})
    assert values.y == {"stress": 1.0, "strain": 2.0}
    with pytest.raises(ValueError, match="^y_replicates is required"):
        LabelValues({"stress": 1, "strain": 2}, replicates=True)(TWO)


def test_the_outputs_declared_log_and_their_labels():
    single = {"seed": 0, "transform": "log"}
    assert output_transform(single) == "log" and log_outputs(single) == [None]
    assert output_transform({"seed": 0}) == "none" and log_outputs({"seed": 0}) == []
    check_positive(single, 0.5, "y")
    for bad in (0.0, -1e-3):
        with pytest.raises(
            ValueError,
            match=r'y: this campaign\'s output is declared "transform": '
            r'"log".* > 0; got',
        ):
            check_positive(single, bad, "y")
    with pytest.raises(ValueError, match=r"y_replicates: .* got -0.5"):
        check_positive(single, [1.0, -0.5], "y_replicates")
    check_positive({"seed": 0}, -3.0, "y")  # modeled as it is: any value
    several = {"seed": 7, "outputs": [{"name": "stress"}, {"name": "disp", "transform": "log"}]}
    assert log_outputs(several) == ["disp"]
    check_positive(several, {"stress": -5.0, "disp": 2.0}, "y")
    with pytest.raises(ValueError, match=r"y\[3\]\['disp'\]: output 'disp' is declared .* got 0.0"):
        check_positive(several, {"stress": 1.0, "disp": 0.0}, "y[3]")
    with pytest.raises(ValueError, match=r"'disp'.* got -2"):
        check_positive(several, {"stress": [1.0, 2.0], "disp": [3.0, -2]}, "y_replicates")
    # each output's single-output campaign carries its transform
    assert "transform" not in output_spec(several, 0)
    assert output_spec(several, 1)["transform"] == "log"
    assert output_spec(several, 1)["seed"] == 8
    # every path a label enters by: a posted label, its replicates, an import's or a test's rows
    with pytest.raises(ValueError, match=r"^y: this campaign's output .* got -1.0$"):
        LabelValues(-1.0)(single)
    with pytest.raises(ValueError, match=r"^y_replicates\['disp'\]: .* got -1.0$"):
        replicates = {"stress": [1.0, 1.0], "disp": [2.0, -1.0]}
        LabelValues({"stress": 1.0, "disp": 0.5}, replicates=replicates)(several)
    with pytest.raises(ValueError, match=r"^y\[1\]\['disp'\]: output 'disp'"):
        checked_rows(several, [{"stress": 1.0, "disp": 1.0}, {"stress": 1.0, "disp": -3.0}], None)
    assert LabelValues(2.0, replicates=[1.0, 3.0])(single) == (2.0, None)
