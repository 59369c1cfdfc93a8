"""The request and response bodies (:mod:`service.schemas`) as the OpenAPI document, the contract:
every operation, parameter, schema and field has a description, every request body an example
that the service itself accepts, and no description carries notes about the code."""

import importlib
import json
import pkgutil

import pytest
from pydantic import BaseModel

from fbgp_al.service import schemas
from fbgp_al.service.main import app

DOCUMENT = app.openapi()
# words of the code's own docstrings that mean nothing to a reader of the API
INTERNAL = (":mod:", ":class:", ":func:", ":meth:", ":data:", "CONTRACT.md", "log line")


def _properties(node, where="#"):
    """(path, field schema) of every object property anywhere in the document."""
    if isinstance(node, dict):
        for name, field in node.get("properties", {}).items():
            yield f"{where}/{name}", field
        for key, value in node.items():
            yield from _properties(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _properties(value, f"{where}/{i}")


def _operations():
    for path, operations in DOCUMENT["paths"].items():
        for method, operation in operations.items():
            yield f"{method.upper()} {path}", operation


def test_every_field_has_a_description():
    missing = [where for where, field in _properties(DOCUMENT) if not field.get("description")]
    assert not missing, missing
    named = DOCUMENT["components"]["schemas"]
    missing = [name for name, s in named.items() if "$ref" not in s and not s.get("description")]
    assert not missing, missing


def test_every_operation_and_parameter_has_a_description():
    missing = [name for name, op in _operations() if not op.get("description")]
    missing += [
        f"{name} {p['name']}"
        for name, op in _operations()
        for p in op.get("parameters", [])
        if not p.get("description")
    ]
    assert not missing, missing


def _model(name: str) -> type:
    """The body named ``name``, from the module of :mod:`service.schemas` that holds it."""
    for module in pkgutil.iter_modules(schemas.__path__):
        found = getattr(importlib.import_module(f"{schemas.__name__}.{module.name}"), name, None)
        if found is not None:
            return found
    raise LookupError(name)


def _body_schema(operation) -> str:
    content = operation["requestBody"]["content"]["application/json"]["schema"]
    refs = [content] + content.get("anyOf", [])
    return next(r["$ref"].rsplit("/", 1)[-1] for r in refs if "$ref" in r)


@pytest.mark.parametrize(
    "name, operation", [(n, op) for n, op in _operations() if "requestBody" in op]
)
def test_every_request_body_has_an_example_the_service_accepts(name, operation):
    schema = _body_schema(operation)
    examples = DOCUMENT["components"]["schemas"][schema].get("examples")
    assert examples, f"{name}: {schema} has no example"
    model = _model(schema)
    assert issubclass(model, BaseModel)
    for example in examples:
        model.model_validate(example)  # raises if the example is not a valid body


def test_no_description_carries_notes_about_the_code():
    text = json.dumps(DOCUMENT)
    assert not [word for word in INTERNAL if word in text]


def test_a_field_says_its_units_and_its_default_and_bounds_are_in_the_schema():
    """What a reader needs beside the words: `lease_seconds`'s unit, default and bound."""
    lease = DOCUMENT["components"]["schemas"]["CampaignCreate"]["properties"]["lease_seconds"]
    assert "seconds" in lease["description"]
    assert lease["default"] == 3600.0 and lease["exclusiveMinimum"] == 0


def _retyped(node, path=()):
    """Each (path, body) with one number or boolean of ``node`` given in another JSON type: a
    number as its string, a boolean as its string and as 1 or 0."""
    if isinstance(node, dict):
        for key, value in node.items():
            for where, changed in _retyped(value, (*path, key)):
                yield where, {**node, key: changed}
    elif isinstance(node, list):
        for i, value in enumerate(node):
            for where, changed in _retyped(value, (*path, i)):
                yield where, [*node[:i], changed, *node[i + 1 :]]
    elif isinstance(node, bool):
        yield path, str(node).lower()
        yield path, int(node)
    elif isinstance(node, int | float):
        yield path, str(node)


# bodies with more numbers and booleans than the examples have
FULLER = {
    "POST /campaigns": [
        {
            "name": "full",
            "inputs": [{"name": "x", "lower": 0.5, "upper": 2.5}],
            "max_labels": 12,
            "pool": {"type": "grid", "points_per_dim": 50},
            "pool_subsample": 40,
            "seed": 3,
            "allow_repeats": True,
            "initial_design": {"type": "maximin-lhs", "size": 4},
            "mcmc": {"chains": 2, "warmup": 20, "samples": 20, "thinning": 2, "warm_start": False},
            "lease_seconds": 120,
            "max_failures": 4,
        }
    ]
}


@pytest.mark.parametrize(
    "name, operation", [(n, op) for n, op in _operations() if "requestBody" in op]
)
def test_a_body_takes_numbers_and_booleans_only_as_json_numbers_and_booleans(name, operation):
    """Every number and boolean of every request example, sent as a string (or a boolean as a
    number), is refused: no ``"20"`` taken for 20 nor ``"true"`` or ``1`` for true. A point's
    coordinates (``x``) may be text, a choice's value: the campaign's inputs decide, in the
    route (a string for a numeric input is a 422 there: ``test_inputs.py``)."""
    schema = _body_schema(operation)
    model = _model(schema)
    tried = []
    examples = DOCUMENT["components"]["schemas"][schema].get("examples", [])
    for example in examples + FULLER.get(name, []):
        model.model_validate(example)
        for where, body in _retyped(example):
            if where[0] == "x":
                continue
            tried.append(where)
            with pytest.raises(ValueError):
                model.model_validate(body)
                pytest.fail(f"{name}: {'.'.join(map(str, where))} taken in another type")
    if name == "POST /campaigns":
        assert len(tried) > 20, tried
