"""The parser of a campaign's constraints (:mod:`worker.vocabulary.constraints` has the grammar):
recursive descent over :func:`worker.vocabulary.constraint_syntax.tokens`, each comparison reduced
to a linear form over the inputs' values, no eval."""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass

from fbgp_al.worker.vocabulary.constraint_syntax import (
    COMPARISONS,
    All,
    Among,
    Any,
    ConstraintError,
    Linear,
    Node,
    Not,
    Token,
    tokens,
)
from fbgp_al.worker.vocabulary.space import Space

MAX_TEXT = 1000  # characters of one constraint
MAX_DEPTH = 32  # parentheses, not and signs nested in one another, at most


@dataclass
class Sum:
    """A linear sum being parsed: ``{column: coef}``, a constant, or a text or choice name."""

    terms: dict
    const: float
    at: int
    text: str | None = None  # a quoted text
    choice: int | None = None  # a bare choice input's column


class _Parser:
    def __init__(self, text: str, space: Space):
        self.text, self.space = text, space
        self.toks = tokens(text)
        self.i = 0
        self.depth = 0
        self.names = {spec.name: j for j, spec in enumerate(space.inputs)}

    def nested(self, at: int, parse):
        """``parse()`` one level deeper (at most ``MAX_DEPTH``: the parser recurses)."""
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ConstraintError(
                f"nested deeper than {MAX_DEPTH} levels (parentheses, not, signs)", at
            )
        try:
            return parse()
        finally:
            self.depth -= 1

    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def take(self) -> Token:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def is_(self, kind: str, value=None) -> bool:
        return self.tok.kind == kind and (value is None or self.tok.value == value)

    def expect(self, kind: str, value, what: str) -> Token:
        if not self.is_(kind, value):
            raise ConstraintError(f"expected {what}, found {self.found()}", self.tok.at)
        return self.take()

    def found(self) -> str:
        tok = self.tok
        return "the end" if tok.kind == "end" else repr(self.text[tok.at : tok.end])

    def parse(self) -> Node:
        if self.is_("end"):
            raise ConstraintError("the constraint is empty")
        node = self.disjunction()
        if not self.is_("end"):
            raise ConstraintError(
                f"expected and, or, or the end, found {self.found()}", self.tok.at
            )
        return node

    def disjunction(self) -> Node:
        nodes = [self.conjunction()]
        while self.is_("keyword", "or"):
            self.take()
            nodes.append(self.conjunction())
        return nodes[0] if len(nodes) == 1 else Any(tuple(nodes))

    def conjunction(self) -> Node:
        nodes = [self.negation()]
        while self.is_("keyword", "and"):
            self.take()
            nodes.append(self.negation())
        return nodes[0] if len(nodes) == 1 else All(tuple(nodes))

    def negation(self) -> Node:
        if self.is_("keyword", "not"):
            return Not(self.nested(self.take().at, self.negation))
        if self.is_("symbol", "(") and self._group():
            node = self.nested(self.take().at, self.disjunction)
            self.expect("symbol", ")", "')'")
            return node
        return self.comparison()

    def _group(self) -> bool:
        """Whether the parenthesis here opens a condition (``(a < 1 or b > 2)``), not a sum
        (``(a + b) / 2 <= 1``): what follows its closing parenthesis says."""
        depth = 0
        for k in range(self.i, len(self.toks)):
            tok = self.toks[k]
            if tok.kind == "symbol" and tok.value in "()":
                depth += 1 if tok.value == "(" else -1
                if depth == 0:
                    after = self.toks[k + 1]
                    arithmetic = COMPARISONS + ("+", "-", "*", "/")
                    return not (after.kind == "symbol" and after.value in arithmetic)
        return True

    def comparison(self) -> Node:
        left = self.sum()
        if left.choice is not None or self.is_("keyword", "in") or self.is_("keyword", "not"):
            return self.membership(left)
        if not (self.is_("symbol") and self.tok.value in COMPARISONS):
            raise ConstraintError(
                f"expected a comparison (<, <=, >, >=, ==, !=) after "
                f"{self.text[left.at : self.tok.at].strip()!r}, found "
                f"{self.found()}",
                self.tok.at,
            )
        nodes = []
        while self.is_("symbol") and self.tok.value in COMPARISONS:
            op = self.take()
            right = self.sum()
            if right.choice is not None or right.text is not None or left.text is not None:
                self._mismatch(left, right, op)
            nodes.append(_linear(left, op.value, right))
            left = right
        return nodes[0] if len(nodes) == 1 else All(tuple(nodes))

    def _mismatch(self, left: Sum, right: Sum, op: Token):
        if left.text is not None and right.choice is not None:
            name = self.space.inputs[right.choice].name
            raise ConstraintError(
                f"write the choice input first ({name} == {left.text!r})", left.at
            )
        choice = left if left.choice is not None else right
        if choice.choice is not None:
            self._choice_misused(choice, op.at)
        text = left if left.text is not None else right
        raise ConstraintError(
            f"{text.text!r} is a text: only a choice input compares with a "
            "text, and the other side is a number",
            text.at,
        )

    def _choice_misused(self, choice: Sum, at: int):
        spec = self.space.inputs[choice.choice]
        raise ConstraintError(
            f"{spec.name!r} is a choice input: it compares only with its "
            f"values ({_values(spec)}) by ==, != or in",
            at,
        )

    def membership(self, left: Sum) -> Node:
        if left.choice is None and not (len(left.terms) == 1 and not left.const):
            if left.text is not None:
                raise ConstraintError(
                    f"{left.text!r} is a text: write the input first (material == 'steel')", left.at
                )
            raise ConstraintError("in takes one input on its left", left.at)
        column = left.choice if left.choice is not None else next(iter(left.terms))
        if left.choice is None and left.terms[column] != 1.0:
            raise ConstraintError("in takes one input on its left", left.at)
        negate = False
        if self.is_("keyword", "not"):
            self.take()
            negate = True
            if not self.is_("keyword", "in"):
                raise ConstraintError(f"expected in after not, found {self.found()}", self.tok.at)
        if self.is_("keyword", "in"):
            self.take()
            self.expect("symbol", "(", "'(' and the values")
            literals = [self.literal()]
            while self.is_("symbol", ","):
                self.take()
                if self.is_("symbol", ")"):
                    break
                literals.append(self.literal())
            self.expect("symbol", ")", "',' or ')'")
        elif self.is_("symbol") and self.tok.value in ("==", "!="):
            negate = self.take().value == "!="
            literals = [self.literal()]
        else:
            if self.is_("symbol") and self.tok.value in COMPARISONS:
                self._choice_misused(left, self.tok.at)
            raise ConstraintError(
                f"expected ==, != or in after a choice input, found {self.found()}", self.tok.at
            )
        if left.choice is not None:
            node = self._among(column, literals)
        else:
            equal = (Linear((column,), (1.0,), -v, "==") for v, *_ in self._numbers(literals))
            node = Any(tuple(equal))
        return Not(node) if negate else node

    def literal(self) -> tuple[object, int, str]:
        """A number or a text, where it starts, and how it was written."""
        sign = 1.0
        at = self.tok.at
        if self.is_("symbol", "-") or self.is_("symbol", "+"):
            sign = -1.0 if self.take().value == "-" else 1.0
            if not self.is_("number"):
                raise ConstraintError(f"expected a number, found {self.found()}", self.tok.at)
        if not (self.is_("number") or self.is_("text")):
            raise ConstraintError(
                f"expected a value (a number or a quoted text), found {self.found()}", self.tok.at
            )
        tok = self.take()
        return (
            (sign * tok.value if tok.kind == "number" else tok.value),
            at,
            self.text[at : tok.end],
        )

    def _numbers(self, literals) -> list:
        for value, at, _ in literals:
            if isinstance(value, str):
                raise ConstraintError(
                    f"{value!r} is a text: a number input compares with numbers", at
                )
        return literals

    def _among(self, column: int, literals) -> Among:
        spec = self.space.inputs[column]
        indices = []
        for value, at, raw in literals:
            index = _value_index(spec, value)
            if index is None:
                kind = "a text" if isinstance(value, str) else "a number"
                raise ConstraintError(
                    f"{raw} ({kind}) is not one of the values of choice input "
                    f"{spec.name!r} ({_values(spec)})",
                    at,
                )
            indices.append(index)
        return Among(column, tuple(sorted(set(indices))))

    def sum(self) -> Sum:
        at = self.tok.at
        signed = self.is_("symbol", "+") or self.is_("symbol", "-")
        sign = (-1.0 if self.take().value == "-" else 1.0) if signed else 1.0
        total = self.term()
        if signed:  # a sign makes a number of what follows
            self._numeric(total, at)
            total = _scaled(total, sign)
        while self.is_("symbol", "+") or self.is_("symbol", "-"):
            op = self.take()
            term = self.term()
            for part in (total, term):
                self._numeric(part, op.at)
            total = _add(total, _scaled(term, -1.0 if op.value == "-" else 1.0))
        total.at = at
        return total

    def _numeric(self, part: Sum, at: int) -> None:
        if part.choice is not None:
            self._choice_misused(part, at)
        if part.text is not None:
            raise ConstraintError(f"{part.text!r} is a text, not a number", part.at)

    def term(self) -> Sum:
        value = self.factor()
        while self.is_("symbol", "*") or self.is_("symbol", "/"):
            op = self.take()
            if self.is_("symbol", "*"):
                raise ConstraintError("powers (**) are not linear", op.at)
            right = self.factor()
            for part in (value, right):
                self._numeric(part, op.at)
            if op.value == "/":
                if right.terms:
                    raise ConstraintError("not linear: a division by an input", op.at)
                if right.const == 0:
                    raise ConstraintError("a division by zero", op.at)
                value = _scaled(value, 1.0 / right.const)
            elif value.terms and right.terms:
                raise ConstraintError("not linear: a product of two inputs", op.at)
            else:
                value = (
                    _scaled(right, value.const) if not value.terms else _scaled(value, right.const)
                )
        return value

    def factor(self) -> Sum:
        tok = self.tok
        if self.is_("symbol", "+") or self.is_("symbol", "-"):
            self.take()
            inner = self.nested(tok.at, self.factor)
            self._numeric(inner, tok.at)
            return _scaled(inner, -1.0 if tok.value == "-" else 1.0)
        if self.is_("number"):
            self.take()
            return Sum({}, tok.value, tok.at)
        if self.is_("text"):
            self.take()
            return Sum({}, 0.0, tok.at, text=tok.value)
        if self.is_("name"):
            self.take()
            column = self.names.get(tok.value)
            if column is None:
                raise ConstraintError(
                    f"unknown input {tok.value!r} (the inputs: {', '.join(self.names)})", tok.at
                )
            if self.space.inputs[column].type == "choice":
                return Sum({}, 0.0, tok.at, choice=column)
            return Sum({column: 1.0}, 0.0, tok.at)
        if self.is_("symbol", "("):
            self.take()
            inner = self.nested(tok.at, self.sum)
            self.expect("symbol", ")", "')'")
            return Sum(inner.terms, inner.const, tok.at, inner.text, inner.choice)
        what = "an input, a number or '('"
        raise ConstraintError(f"expected {what}, found {self.found()}", tok.at)


def _values(spec) -> str:
    return ", ".join(repr(v) for v in spec.values)


def _value_index(spec, value) -> int | None:
    """The index of ``value`` among a choice's values (a number matches an equal number, never
    its text), or None."""
    for j, v in enumerate(spec.values):
        if isinstance(v, str) == isinstance(value, str) and v == value:
            return j
    return None


def _scaled(part: Sum, factor: float) -> Sum:
    if factor == 1.0 or part.choice is not None or part.text is not None:
        return part
    return Sum({j: c * factor for j, c in part.terms.items()}, part.const * factor, part.at)


def _add(a: Sum, b: Sum) -> Sum:
    terms = dict(a.terms)
    for j, c in b.terms.items():
        terms[j] = terms.get(j, 0.0) + c
    return Sum(terms, a.const + b.const, a.at)


def _linear(left: Sum, op: str, right: Sum) -> Linear:
    """``left op right`` as ``sum op' 0`` with ``op'`` one of ``<=``, ``<``, ``==``, ``!=``."""
    if op in (">", ">="):
        left, right, op = right, left, op.replace(">", "<")
    diff = _add(left, _scaled(right, -1.0))
    columns = tuple(sorted(j for j, c in diff.terms.items() if c != 0.0))
    coefs = tuple(diff.terms[j] for j in columns)
    for c in (*coefs, diff.const):
        if not math.isfinite(c):
            raise ConstraintError("a coefficient overflows a float", left.at)
    return Linear(columns, coefs, diff.const, op)


def parse(text: str, space: Space, index: int = 0) -> Node:
    """The syntax tree of constraint ``text`` over ``space``'s inputs (``index``: its place in
    the campaign's list, for the message); :class:`ConstraintError` if it does not parse or
    does not fit the inputs."""
    text = unicodedata.normalize("NFKC", text)
    if len(text) > MAX_TEXT:
        raise ConstraintError(f"longer than {MAX_TEXT} characters", None, index, text[:40] + "...")
    try:
        return _Parser(text, space).parse()
    except ConstraintError as error:
        raise ConstraintError(error.why, error.at, index, text) from None
