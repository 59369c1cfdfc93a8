"""The parser of a campaign's constraints (:mod:`worker.vocabulary.constraint_parser`): the tree it
builds (precedence, chains, groups against sums in parentheses, choices and membership), each
comparison reduced to a linear form whose coefficients Python's own arithmetic on the text
gives, and the limits on a constraint's length and nesting."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fbgp_al.worker.vocabulary.constraint_parser import MAX_DEPTH, MAX_TEXT, parse
from fbgp_al.worker.vocabulary.constraint_syntax import (
    All,
    Among,
    Any,
    ConstraintError,
    Linear,
    Not,
)
from fbgp_al.worker.vocabulary.space import Space

SPACE = Space.of(
    [
        {"name": "load", "lower": -2.0, "upper": 3.0},
        {"name": "mesh", "type": "int", "lower": 0, "upper": 10},
        {"name": "rate", "type": "log", "lower": 1e-3, "upper": 1e2},
        {"name": "material", "type": "choice", "values": ["steel", "al", "ti"]},
        {"name": "order", "type": "choice", "values": [1, 2.5, 4]},
    ]
)
LOAD, MESH, RATE, MATERIAL, ORDER = range(5)


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        ("load <= 1", Linear((LOAD,), (1.0,), -1.0, "<=")),
        # > and >= turn around: rate / 4 - 2 (load - 1) <= 0
        ("2 * (load - 1) >= rate / 4", Linear((LOAD, RATE), (-2.0, 0.25), 2.0, "<=")),
        ("load > mesh", Linear((LOAD, MESH), (-1.0, 1.0), 0.0, "<")),
        ("load - load + mesh != 3", Linear((MESH,), (1.0,), -3.0, "!=")),  # terms that cancel
        ("(load + mesh) / 2 == 1", Linear((LOAD, MESH), (0.5, 0.5), -1.0, "==")),
        ("-(-load) < 0", Linear((LOAD,), (1.0,), 0.0, "<")),
        (
            "0 <= mesh < 4",
            All((Linear((MESH,), (-1.0,), 0.0, "<="), Linear((MESH,), (1.0,), -4.0, "<"))),
        ),
        (
            "load < 0 or mesh < 1 and rate < 2",
            Any(
                (
                    Linear((LOAD,), (1.0,), 0.0, "<"),
                    All((Linear((MESH,), (1.0,), -1.0, "<"), Linear((RATE,), (1.0,), -2.0, "<"))),
                )
            ),
        ),
        (
            "(load < 0 or mesh < 1) and rate < 2",
            All(
                (
                    Any((Linear((LOAD,), (1.0,), 0.0, "<"), Linear((MESH,), (1.0,), -1.0, "<"))),
                    Linear((RATE,), (1.0,), -2.0, "<"),
                )
            ),
        ),
        ("not not load <= 0", Not(Not(Linear((LOAD,), (1.0,), 0.0, "<=")))),
        ("material in ('ti', 'al', 'ti')", Among(MATERIAL, (1, 2))),
        ("material != 'steel'", Not(Among(MATERIAL, (0,)))),
        ("order == 2.5", Among(ORDER, (1,))),
        ("order not in (1, 4.0)", Not(Among(ORDER, (0, 2)))),
        (
            "mesh in (1, -2)",
            Any((Linear((MESH,), (1.0,), -1.0, "=="), Linear((MESH,), (1.0,), 2.0, "=="))),
        ),
    ],
)
def test_the_tree_of_a_constraint(text, tree):
    assert parse(text, SPACE) == tree


NAMES = {"load": LOAD, "mesh": MESH, "rate": RATE}
numbers = st.integers(-9, 9).map(str) | st.sampled_from(["0.5", "2.25", "1e1", ".75", "3E-1"])


def sums():
    """Linear arithmetic over the number inputs: sums and differences, products with a
    constant and divisions by a non-zero one, unary signs and parentheses."""
    atoms = st.sampled_from(list(NAMES)) | numbers
    divisors = st.sampled_from(["2", "4", "0.5", "-8"])
    return st.recursive(
        atoms,
        lambda inner: st.one_of(
            st.builds(lambda a, b: f"{a} + {b}", inner, inner),
            st.builds(lambda a, b: f"{a} - ({b})", inner, inner),
            st.builds(lambda c, a: f"{c} * ({a})", numbers, inner),
            st.builds(lambda a, c: f"({a}) * {c}", inner, numbers),
            st.builds(lambda a, c: f"({a}) / {c}", inner, divisors),
            st.builds(lambda a: f"-({a})", inner),
        ),
        max_leaves=8,
    )


@settings(max_examples=200, deadline=None)
@given(left=sums(), right=sums(), op=st.sampled_from(["<=", "<", "==", "!=", ">=", ">"]))
def test_a_comparison_is_the_linear_form_python_s_arithmetic_gives(left, right, op):
    """``left op right`` reads ``sum_j c_j x_j + c_0 op' 0``: ``c_0`` is the difference of the
    sides at 0 and ``c_j`` its change for ``x_j = 1`` (Python evaluating the text), the sides
    swapped for > and >=."""
    node = parse(f"{left} {op} {right}", SPACE)
    assert isinstance(node, Linear)
    if op in (">", ">="):
        left, right = right, left

    def diff(**values):
        scope = {name: float(values.get(name, 0.0)) for name in NAMES}
        return eval(f"({left}) - ({right})", {}, scope)

    assert node.op == op.replace(">", "<")
    assert node.const == pytest.approx(diff(), abs=1e-9)
    coefs = dict(zip(node.columns, node.coefs, strict=True))
    for name, column in NAMES.items():
        assert coefs.get(column, 0.0) == pytest.approx(diff(**{name: 1.0}) - diff(), abs=1e-9)
    assert 0.0 not in node.coefs and list(node.columns) == sorted(node.columns)


def test_the_text_is_read_in_nfkc_form_and_its_length_and_nesting_are_bounded():
    assert parse("ｌｏａｄ <= 1", SPACE) == parse("load <= 1", SPACE)
    with pytest.raises(ConstraintError, match=f"longer than {MAX_TEXT} characters"):
        parse("load <= " + "1" * MAX_TEXT, SPACE)
    deep = "(" * MAX_DEPTH + "load" + ")" * MAX_DEPTH + " <= 0"  # at the bound: parsed
    assert parse(deep, SPACE) == parse("load <= 0", SPACE)
    with pytest.raises(ConstraintError, match="nested deeper than") as error:
        parse("(" + deep.replace(" <=", ") <="), SPACE, index=3)
    assert error.value.index == 3 and error.value.at == MAX_DEPTH


@pytest.mark.parametrize(
    ("text", "why", "at"),
    [
        ("load * mesh <= 1", "a product of two inputs", 5),
        ("1 / load <= 1", "a division by an input", 2),
        ("load / (2 - 2) <= 1", "a division by zero", 5),
        ("1e308 * 1e308 * load <= 1", "overflows", 0),
        ("'steel' == material", "write the choice input first", 0),
        ("material < 'ti'", "compares only with its values", 9),
        ("material == 'iron'", "is not one of the values", 12),
        ("order == '1'", "is not one of the values", 9),  # a text is never a number's value
        ("2 * load in (1, 2)", "in takes one input", 0),
        ("mesh in ('a')", "a number input compares with numbers", 9),
    ],
)
def test_what_is_not_a_linear_comparison_is_named_where_it_is(text, why, at):
    with pytest.raises(ConstraintError, match=why) as error:
        parse(text, SPACE)
    assert error.value.at == at and error.value.text == text
