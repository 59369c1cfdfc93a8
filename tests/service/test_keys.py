"""The key schema (:mod:`service.keys`): the one module that spells ``fbgp:``, and the pattern
of one campaign's keys, checked on a real Redis."""

import ast
import pathlib
import re

import redis

from fbgp_al.service import keys

ROOT = pathlib.Path(__file__).resolve().parents[2]
PRODUCT = ("service", "worker", "clients")


def _literals(path: pathlib.Path) -> list[str]:
    """The string constants of a module that are not docstrings (an f-string's parts included)."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    strings = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]
    return strings


def test_fbgp_keys_are_spelled_only_in_the_key_schema():
    spelled = []
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == ROOT / "service" / "keys.py":
                continue
            if any("fbgp:" in s for s in _literals(path)):
                spelled.append(str(path.relative_to(ROOT)))
        for path in sorted((ROOT / package).rglob("*.lua")):
            code = "\n".join(re.sub(r"--.*", "", line) for line in path.read_text().splitlines())
            if "fbgp:" in code:
                spelled.append(str(path.relative_to(ROOT)))
    assert spelled == []


def test_a_campaign_s_pattern_matches_its_keys_and_no_other_s(redis_url):
    r = redis.Redis.from_url(redis_url)
    mine, other = "k3y5-a", "k3y5-ab"
    written = [keys.campaign(c, part) for c in (mine, other) for part in keys.PARTS]
    try:
        for key in written:
            r.set(key, 1)
        found = {k.decode() for k in r.scan_iter(keys.campaign_keys(mine), count=1000)}
        assert found == {keys.campaign(mine, part) for part in keys.PARTS}
    finally:
        r.delete(*written)
