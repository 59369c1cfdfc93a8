"""A campaign's known constraints: where its simulator can run (numpy only, no eval).

``"constraints": ["thickness >= 4 or load <= 8", "material != 'al' or load <= 5"]``: every
text must hold at a point for the point to be feasible. The grammar::

    constraint := disjunct ("or" disjunct)*
    disjunct   := negation ("and" negation)*
    negation   := "not" negation | "(" constraint ")" | comparison
    comparison := sum (op sum)+                   op: < <= > >= == !=  (chained: a < b <= c)
                | name ["not"] "in" "(" literal ("," literal)* [","] ")"
    sum        := ["+" | "-"] term (("+" | "-") term)*
    term       := factor (("*" | "/") factor)*    a product or quotient stays linear
    factor     := number | name | literal | "(" sum ")" | ("+" | "-") factor

A name is an input's as declared: a Python-like identifier (``load``, ``t_max``), or any other
name between backquotes (a name holding a backquote cannot be named); a number is spelled as in
JSON (``2``, ``-0.5``, ``1e-3``, also ``.5``); a literal is a number or a quoted text
(``'steel'`` or ``"steel"``, a backslash escapes the next character). Float, int and log inputs
take part in linear sums, in their own units (a log input's value, not its log); a choice input
only compares with its own values by ``==``, ``!=`` or ``in`` (a number matches an equal number,
never its text). A point on a boundary, to within 1e-9 of the terms' magnitude (the rounding of
a grid's levels), satisfies ``<=``, ``>=`` and ``==`` and fails ``<``, ``>`` and ``!=``.

Every mistake is a :class:`ConstraintError` that names the constraint, the character and why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from fbgp_al.worker.vocabulary.constraint_parser import MAX_TEXT, parse
from fbgp_al.worker.vocabulary.constraint_syntax import (
    All,
    Among,
    ConstraintError,
    Linear,
    Node,
    Not,
)
from fbgp_al.worker.vocabulary.space import Space

__all__ = ["MAX_TEXT", "ConstraintError", "Constraints", "of_spec", "parse", "pool_codes"]
TOLERANCE = 1e-9  # of |terms|: a point this near a boundary lies on it
# comparisons of all the constraints together, at most: each is evaluated at every point a grid
# lists or draws (up to 2^24 of them in one draw of candidates)
MAX_COMPARISONS = 100


# -- evaluation --------------------------------------------------------------------------------
def _holds(node: Node, codes: np.ndarray) -> np.ndarray:
    if isinstance(node, Linear):
        if node.columns:
            terms = codes[:, node.columns] * np.asarray(node.coefs)
            s = terms.sum(axis=1) + node.const
            tol = TOLERANCE * (np.abs(terms).sum(axis=1) + abs(node.const))
        else:
            s = np.full(len(codes), node.const)
            tol = TOLERANCE * abs(node.const)
        if node.op == "<=":
            return s <= tol
        if node.op == "<":
            return s < -tol
        if node.op == "==":
            return np.abs(s) <= tol
        return np.abs(s) > tol
    if isinstance(node, Among):
        return np.isin(codes[:, node.column], np.asarray(node.indices, dtype=float))
    if isinstance(node, Not):
        return ~_holds(node.node, codes)
    parts = (_holds(n, codes) for n in node.nodes)
    out = next(parts).copy()
    for part in parts:
        if isinstance(node, All):
            out &= part
        else:
            out |= part
    return out


def _comparisons(node: Node) -> int:
    if isinstance(node, (Linear, Among)):
        return 1
    if isinstance(node, Not):
        return _comparisons(node.node)
    return sum(_comparisons(n) for n in node.nodes)


@dataclass(frozen=True, eq=False)
class Constraints:
    """A campaign's constraints, parsed: :meth:`holds` says where all of them hold."""

    space: Space
    texts: tuple[str, ...]
    trees: tuple[Node, ...]

    @classmethod
    def of(cls, texts, space: Space) -> Constraints:
        """The constraints ``texts`` over ``space``; :class:`ConstraintError` for the first that
        does not parse or does not fit."""
        texts = tuple(texts)
        trees, count = [], 0
        for k, text in enumerate(texts):
            trees.append(parse(text, space, k))
            count += _comparisons(trees[-1])
            if count > MAX_COMPARISONS:
                why = (
                    f"the constraints hold {count} comparisons up to this one, more than "
                    f"{MAX_COMPARISONS} in all"
                )
                raise ConstraintError(why, None, k, text)
        return cls(space, texts, tuple(trees))

    def each(self, codes) -> list[np.ndarray]:
        """Per constraint, whether it holds at each of the points ``codes`` (``m x d``: the
        values, a choice as its value's index: :meth:`worker.vocabulary.space.Space.codes`)."""
        codes = np.asarray(codes, dtype=np.float64).reshape(-1, self.space.dim)
        return [_holds(tree, codes) for tree in self.trees]

    def holds(self, codes) -> np.ndarray:
        """Whether every constraint holds at each of the points ``codes`` (``m x d``)."""
        codes = np.asarray(codes, dtype=np.float64).reshape(-1, self.space.dim)
        out = np.ones(len(codes), dtype=bool)
        for tree in self.trees:
            out &= _holds(tree, codes)
        return out

    @cached_property
    def columns(self) -> tuple[int, ...]:
        """The inputs the constraints name (their positions)."""
        named, nodes = set(), list(self.trees)
        while nodes:
            node = nodes.pop()
            if isinstance(node, Linear):
                named |= set(node.columns)
            elif isinstance(node, Among):
                named.add(node.column)
            elif isinstance(node, Not):
                nodes.append(node.node)
            else:
                nodes.extend(node.nodes)
        return tuple(sorted(named))

    def holds_at(self, u) -> np.ndarray:
        """:meth:`holds` at pool coordinates ``u`` (``m x d``, the unit cube; only the columns
        of the inputs named are read)."""
        return self.holds(pool_codes(self.space, u, self.columns))

    def holds_for(self, x) -> list[bool]:
        """:meth:`holds` at points ``x`` given as values."""
        return self.holds(self.space.codes(x, check=False)).tolist()


def pool_codes(space: Space, u, columns=None) -> np.ndarray:
    """Pool coordinates ``u`` (``m x d``) as codes, vectorized (a log input's exact value, not
    rounded to 12 digits as :meth:`worker.vocabulary.space.Space.pool_to_code` writes it; the
    comparisons' tolerance covers the difference); with ``columns``, those only (the others
    0)."""
    u = np.asarray(u, dtype=np.float64).reshape(-1, space.dim)
    out = np.zeros_like(u)
    for j in range(space.dim) if columns is None else columns:
        spec, v = space.inputs[j], np.clip(u[:, j], 0.0, 1.0)
        if spec.type == "choice":
            out[:, j] = np.floor(v * (spec.k - 1) + 0.5)
        elif spec.type == "log":
            lo, hi = math.log(spec.lower), math.log(spec.upper)
            out[:, j] = np.exp(lo + v * (hi - lo))
        elif spec.type == "int":
            out[:, j] = np.floor(spec.lower + v * (spec.upper - spec.lower) + 0.5)
        else:
            out[:, j] = spec.lower + v * (spec.upper - spec.lower)
    return out


def of_spec(spec: dict) -> Constraints | None:
    """A stored spec's constraints (None where it has none: as every campaign created before
    they existed)."""
    texts = spec.get("constraints") or ()
    return Constraints.of(texts, Space.of(spec["inputs"])) if texts else None
