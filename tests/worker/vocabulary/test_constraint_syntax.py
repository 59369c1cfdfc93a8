"""The tokens of a campaign's constraints (:mod:`worker.vocabulary.constraint_syntax`): each with
its kind, value and span; numbers as Python reads them; quoted texts with escapes and backquoted
names; keywords and symbols, the longest first; and what is no token, named where it is."""

import math

import pytest

from fbgp_al.worker.vocabulary.constraint_syntax import ConstraintError, Token, tokens


def _kinds(text: str) -> list[tuple[str, object]]:
    return [(t.kind, t.value) for t in tokens(text)][:-1]


def test_each_token_has_its_kind_value_and_span():
    text = "`max load` <= 2.5e-1 and not (mat != 'a\\'b')"
    toks = tokens(text)
    assert [(t.kind, t.value) for t in toks] == [
        ("name", "max load"),
        ("symbol", "<="),
        ("number", 0.25),
        ("keyword", "and"),
        ("keyword", "not"),
        ("symbol", "("),
        ("name", "mat"),
        ("symbol", "!="),
        ("text", "a'b"),
        ("symbol", ")"),
        ("end", None),
    ]
    for tok in toks[:-1]:
        assert text[tok.at : tok.end].strip() == text[tok.at : tok.end]
    assert toks[0] == Token("name", "max load", 0, 10)
    assert toks[-1] == Token("end", None, len(text), len(text))


@pytest.mark.parametrize("number", ["0", "12", "1.5", ".5", "3.", "1e3", "2E-2", "7e+1", "0.25e1"])
def test_numbers_are_read_as_python_reads_them(number):
    assert _kinds(number) == [("number", float(number))]


def test_an_exponent_without_digits_is_no_part_of_the_number():
    assert _kinds("1e") == [("number", 1.0), ("name", "e")]
    assert _kinds("2e+x") == [("number", 2.0), ("name", "e"), ("symbol", "+"), ("name", "x")]


def test_the_longest_symbol_is_taken_and_words_are_keywords_only_whole():
    assert _kinds("a<=b>=c==d!=e<f>g") == [
        ("name", "a"),
        ("symbol", "<="),
        ("name", "b"),
        ("symbol", ">="),
        ("name", "c"),
        ("symbol", "=="),
        ("name", "d"),
        ("symbol", "!="),
        ("name", "e"),
        ("symbol", "<"),
        ("name", "f"),
        ("symbol", ">"),
        ("name", "g"),
    ]
    assert _kinds("order android in_ in") == [
        ("name", "order"),
        ("name", "android"),
        ("name", "in_"),
        ("keyword", "in"),
    ]
    assert _kinds('`a\\b` "c\\\\d"') == [("name", "a\\b"), ("text", "c\\d")]


@pytest.mark.parametrize(
    ("text", "why", "at"),
    [
        ("a = 1", "unexpected character '=' (== compares)", 2),
        ("a < 1 & b", "(use and)", 6),
        ("a < 1 | b", "(use or)", 6),
        ("!a", "(use not, or !=)", 0),
        ("a < 1 ; b", "unexpected character ';'", 6),
        ("m == 'steel", "the text opened here is not closed", 5),
        ("`max load <= 1", "the name opened here is not closed", 0),
        ("a <= 1e999", "1e999 is not a finite number", 5),
    ],
)
def test_what_is_no_token_is_named_where_it_is(text, why, at):
    with pytest.raises(ConstraintError) as error:
        tokens(text)
    assert why in error.value.why and error.value.at == at


def test_the_error_says_which_constraint_where_and_why():
    error = ConstraintError("a division by zero", 4, index=2, text="a / 0 <= 1")
    assert isinstance(error, ValueError)
    assert str(error) == "constraints[2] 'a / 0 <= 1': a division by zero at character 5"
    assert str(ConstraintError("the constraint is empty")) == (
        "constraints[0] '': the constraint is empty"
    )
    assert math.isfinite(tokens("1" * 300)[0].value)
