"""The syntax of a campaign's constraints (:mod:`worker.vocabulary.constraints`): the tree a
constraint parses to, its tokens, and the error that says which constraint, where and why."""

from __future__ import annotations

import math
from dataclasses import dataclass

KEYWORDS = ("and", "or", "not", "in")
COMPARISONS = ("<=", ">=", "==", "!=", "<", ">")
SYMBOLS = COMPARISONS + ("+", "-", "*", "/", "(", ")", ",")


class ConstraintError(ValueError):
    """A constraint that does not parse or does not fit the inputs: ``index`` (its place in the
    list), ``text``, ``at`` (the 0-based character, None for the whole text) and ``why``."""

    def __init__(self, why: str, at: int | None = None, index: int = 0, text: str = ""):
        self.why, self.at, self.index, self.text = why, at, index, text
        where = "" if at is None else f" at character {at + 1}"
        super().__init__(f"constraints[{index}] {text!r}: {why}{where}")


# -- the syntax tree ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Linear:
    """``sum_j coef_j * x_j + const`` (``columns``: the inputs' positions) compared with 0 by
    ``op`` (``<=``, ``<``, ``==`` or ``!=``)."""

    columns: tuple[int, ...]
    coefs: tuple[float, ...]
    const: float
    op: str


@dataclass(frozen=True)
class Among:
    """Choice input ``column``'s value index is one of ``indices``."""

    column: int
    indices: tuple[int, ...]


@dataclass(frozen=True)
class Not:
    node: Node


@dataclass(frozen=True)
class All:
    nodes: tuple[Node, ...]


@dataclass(frozen=True)
class Any:
    nodes: tuple[Node, ...]


Node = Linear | Among | Not | All | Any


# -- tokens ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Token:
    kind: str  # "number", "text", "name", "keyword", "symbol", "end"
    value: object
    at: int
    end: int


def _number(text: str, i: int) -> int:
    """The end of the number that starts at ``i``."""
    j = i
    while j < len(text) and text[j].isdigit():
        j += 1
    if j < len(text) and text[j] == ".":
        j += 1
        while j < len(text) and text[j].isdigit():
            j += 1
    if j < len(text) and text[j] in "eE":
        k = j + 1
        if k < len(text) and text[k] in "+-":
            k += 1
        if k < len(text) and text[k].isdigit():
            j = k
            while j < len(text) and text[j].isdigit():
                j += 1
    return j


def _quoted(text: str, i: int, close: str, what: str) -> tuple[str, int]:
    """The text quoted from ``i`` (after the opening quote) to ``close`` and the index past it;
    a backslash escapes the next character in a text (not in a backquoted name)."""
    out, j = [], i
    while j < len(text):
        c = text[j]
        if c == close:
            return "".join(out), j + 1
        if c == "\\" and close != "`" and j + 1 < len(text):
            j += 1
            c = text[j]
        out.append(c)
        j += 1
    raise ConstraintError(f"the {what} opened here is not closed", i - 1)


def tokens(text: str) -> list[Token]:
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c.isspace():
            i += 1
        elif c.isdigit() or (c == "." and text[i + 1 : i + 2].isdigit()):
            j = _number(text, i)
            value = float(text[i:j])
            if not math.isfinite(value):
                raise ConstraintError(f"{text[i:j]} is not a finite number", i)
            out.append(Token("number", value, i, j))
            i = j
        elif c in "'\"":
            value, j = _quoted(text, i + 1, c, "text")
            out.append(Token("text", value, i, j))
            i = j
        elif c == "`":
            value, j = _quoted(text, i + 1, "`", "name")
            out.append(Token("name", value, i, j))
            i = j
        elif c.isidentifier():
            j = i + 1
            while j < len(text) and ("a" + text[j]).isidentifier():
                j += 1
            word = text[i:j]
            out.append(Token("keyword" if word in KEYWORDS else "name", word, i, j))
            i = j
        else:
            symbol = next((s for s in SYMBOLS if text.startswith(s, i)), None)
            if symbol is None:
                hint = {
                    "=": " (== compares)",
                    "&": " (use and)",
                    "|": " (use or)",
                    "!": " (use not, or !=)",
                }.get(c, "")
                raise ConstraintError(f"unexpected character {c!r}{hint}", i)
            out.append(Token("symbol", symbol, i, i + len(symbol)))
            i += len(symbol)
    out.append(Token("end", None, len(text), len(text)))
    return out
