"""A campaign's known constraints (:mod:`worker.vocabulary.constraints`): what parses and how it
reads, every mistake named with its constraint, character and reason, the vectorized evaluation
against Python's own evaluation of the same text on random points, and the boundaries."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fbgp_al.worker.vocabulary.constraints import ConstraintError, Constraints, of_spec, pool_codes
from fbgp_al.worker.vocabulary.space import Space

INPUTS = [
    {"name": "load", "lower": -2.0, "upper": 3.0},
    {"name": "mesh", "type": "int", "lower": 0, "upper": 10},
    {"name": "rate", "type": "log", "lower": 1e-3, "upper": 1e2},
    {"name": "material", "type": "choice", "values": ["steel", "al", "ti"]},
    {"name": "order", "type": "choice", "values": [1, 2.5, 4]},
]
SPACE = Space.of(INPUTS)


def holds(text: str, points) -> list[bool]:
    return Constraints.of([text], SPACE).holds_for(points)


P = [-1.0, 3, 0.5, "steel", 1]  # a point


@pytest.mark.parametrize(
    "text, point, expected",
    [
        ("load <= 0", P, True),
        ("2*load + mesh - 0.5*rate <= 0.75", P, True),  # -2 + 3 - 0.25 = 0.75: on it
        ("2*load + mesh - 0.5*rate < 0.75", P, False),
        ("(load + mesh) / 2 >= 1", P, True),
        ("-load > 0.5 and mesh >= 3", P, True),
        ("0 <= mesh <= 2", P, False),  # chained
        ("-(load - 1) * 2 == 4", P, True),
        ("mesh != 3", P, False),
        ("material == 'steel'", P, True),
        ('material == "al"', P, False),
        ("material != 'steel' or load < -0.5", P, True),
        ("material in ('al', 'ti',)", P, False),
        ("material not in ('al', 'ti')", P, True),
        ("not material == 'steel'", P, False),
        ("not (load <= 0 and mesh >= 3) or rate > 1", P, False),
        ("(material in ('steel')) and (order == 1 or order == 4)", P, True),
        ("order in (2.5, 4)", P, False),
        ("order == 1.0", P, True),  # a number matches an equal number
        ("mesh in (1, 3, 5)", P, True),
        ("mesh not in (1, 3, 5)", P, False),
        ("rate <= 1e-1 or rate >= .5", P, True),  # a log input in its own units
        ("1E0 * load <= -1", P, True),
        ("1 <= 2", P, True),
        ("ｌｏａｄ <= 0", P, True),  # NFKC, as the names are stored
    ],
)
def test_what_parses_and_how_it_reads(text, point, expected):
    assert holds(text, [point]) == [expected]


def test_a_name_that_is_no_identifier_goes_in_backquotes():
    space = Space.of(
        [{"name": "load case", "lower": 0, "upper": 1}, {"name": "and", "lower": 0, "upper": 1}]
    )
    c = Constraints.of(["`load case` + `and` <= 1"], space)
    assert c.holds_for([[0.25, 0.5], [0.75, 0.5]]) == [True, False]


@pytest.mark.parametrize(
    "text, why, at",
    [
        ("lod <= 3", "unknown input 'lod' (the inputs: load, mesh, rate, material, order)", 1),
        ("load <=", "expected an input, a number or '(', found the end", 8),
        ("load", "expected a comparison (<, <=, >, >=, ==, !=) after 'load', found the end", 5),
        ("load 3", "expected a comparison (<, <=, >, >=, ==, !=) after 'load', found '3'", 6),
        ("", "the constraint is empty", None),
        ("   ", "the constraint is empty", None),
        ("load <= 1 mesh", "expected and, or, or the end, found 'mesh'", 11),
        ("(load <= 1", "expected ')', found the end", 11),
        ("load = 1", "unexpected character '=' (== compares)", 6),
        ("load <= 1 && mesh > 2", "unexpected character '&' (use and)", 11),
        ("load <= 1 || mesh > 2", "unexpected character '|' (use or)", 11),
        ("load # 1", "unexpected character '#'", 6),
        ("load * mesh <= 3", "not linear: a product of two inputs", 6),
        ("2 * (load + 1) * (mesh - 1) <= 3", "not linear: a product of two inputs", 16),
        ("load / mesh <= 3", "not linear: a division by an input", 6),
        ("load ** 2 <= 3", "powers (**) are not linear", 6),
        ("load / (2 - 2) <= 3", "a division by zero", 6),
        ("load <= 1e999", "1e999 is not a finite number", 9),
        (
            "material <= 3",
            "'material' is a choice input: it compares only with its values "
            "('steel', 'al', 'ti') by ==, != or in",
            10,
        ),
        (
            "material + 1 == 2",
            "'material' is a choice input: it compares only with its values "
            "('steel', 'al', 'ti') by ==, != or in",
            10,
        ),
        (
            "material == 3",
            "3 (a number) is not one of the values of choice input 'material' "
            "('steel', 'al', 'ti')",
            13,
        ),
        (
            "material in ('steel', 'iron')",
            "'iron' (a text) is not one of the values of choice "
            "input 'material' ('steel', 'al', 'ti')",
            23,
        ),
        (
            "order == '1'",
            "'1' (a text) is not one of the values of choice input 'order' (1, 2.5, 4)",
            10,
        ),
        ("material", "expected ==, != or in after a choice input, found the end", 9),
        ("'steel' == material", "write the choice input first (material == 'steel')", 1),
        (
            "load == 'steel'",
            "'steel' is a text: only a choice input compares with a text, and "
            "the other side is a number",
            9,
        ),
        ("load in ('steel')", "'steel' is a text: a number input compares with numbers", 10),
        ("2 * load in (1, 2)", "in takes one input on its left", 1),
        ("material not == 'al'", "expected in after not, found '=='", 14),
        ("material == 'al", "the text opened here is not closed", 13),
        ("`load <= 1", "the name opened here is not closed", 1),
        ("material in 'al'", "expected '(' and the values, found \"'al'\"", 13),
        ("load < -'a'", "'a' is a text, not a number", 9),
        (
            "-material == 'al'",
            "'material' is a choice input: it compares only with its values "
            "('steel', 'al', 'ti') by ==, != or in",
            1,
        ),
    ],
)
def test_every_mistake_names_its_constraint_character_and_reason(text, why, at):
    with pytest.raises(ConstraintError) as caught:
        Constraints.of(["load <= 2", text], SPACE)
    error = caught.value
    assert (error.index, error.why, error.at) == (1, why, None if at is None else at - 1)
    where = "" if at is None else f" at character {at}"
    assert str(error) == f"constraints[1] {text!r}: {why}{where}"


def test_a_constraint_too_long_is_refused():
    with pytest.raises(ConstraintError, match=r"longer than 1000 characters"):
        Constraints.of(["load <= 1 and " * 80 + "load <= 1"], SPACE)


@pytest.mark.parametrize(
    "text",
    [
        "(" * 400 + "load <= 1" + ")" * 400,
        "-" * 900 + "load <= 1",
        "not " * 240 + "load <= 1",
        "(" * 300 + "load" + ")" * 300 + " <= 1",
    ],
)
def test_nesting_is_bounded_not_a_recursion_error(text):
    with pytest.raises(
        ConstraintError,
        match=r"nested deeper than 32 levels \(parentheses, "
        r"not, signs\) at character",
    ):
        Constraints.of([text], SPACE)
    assert holds("(" * 31 + "load <= 0" + ")" * 31, [P]) == [True]


def test_the_comparisons_of_all_constraints_are_bounded():
    """Each is evaluated at every point drawn: 100 in all, at most."""
    forty = " or ".join(["load <= 1"] * 40)
    Constraints.of([forty, forty, " and ".join(["mesh >= 2"] * 20)], SPACE)
    with pytest.raises(ConstraintError) as caught:
        Constraints.of([forty, forty, "material in ('al', 'ti') and " + forty[:-13]], SPACE)
    why = "the constraints hold 120 comparisons up to this one, more than 100 in all"
    assert (caught.value.index, caught.value.why) == (2, why)


# -- the vectorized evaluation against Python's on random points ------------------------------
# coefficients and constants that float arithmetic sums exactly with integers (so that an int
# input on a boundary is on it in Python's arithmetic too), in JSON's spellings and Python's
NUMBERS = ["2", "-0.5", "0.25", "1e0", "3", ".5", "-1.5e0", "0", "4.0", "1E1"]
NUMERIC = ["load", "mesh", "rate"]


@st.composite
def linear(draw) -> str:
    names = draw(st.lists(st.sampled_from(NUMERIC), min_size=1, max_size=3))
    terms = [f"{draw(st.sampled_from(NUMBERS))}*{n}" for n in names]
    sides = [" + ".join(terms), draw(st.sampled_from(NUMBERS))]
    if draw(st.booleans()):
        sides.reverse()
    ops = st.sampled_from(["<", "<=", ">", ">=", "==", "!="])
    text = f"{sides[0]} {draw(ops)} {sides[1]}"
    if draw(st.booleans()):  # chained
        text += f" {draw(st.sampled_from(['<', '<=']))} {draw(st.sampled_from(NUMBERS))}"
    return text


@st.composite
def choice(draw) -> str:
    if draw(st.booleans()):
        values = draw(st.lists(st.sampled_from(["'steel'", '"al"', "'ti'"]), min_size=1))
        name = "material"
    else:
        values = draw(st.lists(st.sampled_from(["1", "2.5", "4", "4.0"]), min_size=1))
        name = "order"
    if len(values) == 1 and draw(st.booleans()):
        return f"{name} {draw(st.sampled_from(['==', '!=']))} {values[0]}"
    return f"{name} {draw(st.sampled_from(['in', 'not in']))} ({', '.join(values)},)"


def expressions():
    atoms = st.one_of(linear(), choice())
    return st.recursive(
        atoms,
        lambda inner: st.one_of(
            st.builds(lambda a, b: f"({a}) and ({b})", inner, inner),
            st.builds(lambda a, b: f"{a} or {b}", inner, inner),
            st.builds(lambda a: f"not ({a})", inner),
            st.builds(lambda a, b: f"not {a} and {b}", inner, inner),
        ),
        max_leaves=6,
    )


def random_points(rng: np.random.Generator, m: int) -> list[list]:
    return [
        [
            float(rng.uniform(-2, 3)),
            int(rng.integers(0, 11)),
            float(10 ** rng.uniform(-3, 2)),
            str(rng.choice(["steel", "al", "ti"])),
            [1, 2.5, 4][int(rng.integers(0, 3))],
        ]
        for _ in range(m)
    ]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=expressions(), seed=st.integers(0, 2**32 - 1))
def test_the_vectorized_evaluation_agrees_with_python(text, seed):
    points = random_points(np.random.default_rng(seed), 200)
    expected = [
        bool(eval(text, {}, dict(zip([i["name"] for i in INPUTS], p, strict=True)))) for p in points
    ]
    assert holds(text, points) == expected


# -- boundaries, units and the stored spec -----------------------------------------------------
def test_a_grid_level_on_a_boundary_is_on_it_despite_rounding():
    space = Space.of(
        [
            {"name": "x", "lower": 0, "upper": 3},
            {"name": "rate", "type": "log", "lower": 1e-3, "upper": 1e2},
        ]
    )
    u = np.array([[0.1, 0.4]])  # x = 0.30000000000000004, rate = 0.10000000000000006
    assert pool_codes(space, u).tolist() == [[0.30000000000000004, 0.10000000000000006]]
    assert space.from_pool(u) == [[0.3, 0.1]]  # as /next writes them: their shortest decimals
    for text, expected in [
        ("x <= 0.3", True),
        ("x >= 0.3", True),
        ("x < 0.3", False),
        ("x > 0.3", False),
        ("x == 0.3", True),
        ("x != 0.3", False),
        ("rate <= 0.1", True),
        ("rate < 0.1", False),
        ("rate >= 0.1", True),
        ("10 * x - 3 <= 0", True),
        ("10 * x - 3 < 0", False),
    ]:
        assert Constraints.of([text], space).holds_at(u).tolist() == [expected], text
    # beyond the tolerance, the comparison is strict
    assert Constraints.of(["x <= 0.3"], space).holds_at([[0.1 + 1e-8, 0.5]]).tolist() == [False]


def test_every_constraint_must_hold():
    c = Constraints.of(["load <= 0", "mesh >= 3"], SPACE)
    points = [[-1.0, 3, 1.0, "al", 1], [-1.0, 2, 1.0, "al", 1], [1.0, 3, 1.0, "al", 1]]
    assert c.holds_for(points) == [True, False, False]
    assert [e.tolist() for e in c.each(SPACE.codes(points))] == [
        [True, True, False],
        [True, False, True],
    ]


def test_a_spec_without_constraints_has_none():
    assert of_spec({"inputs": INPUTS}) is None  # stored before constraints existed
    assert of_spec({"inputs": INPUTS, "constraints": []}) is None
    assert of_spec({"inputs": INPUTS, "constraints": ["load <= 0"]}).texts == ("load <= 0",)
