"""The request and response bodies (:mod:`service.schemas`) as the OpenAPI document, the contract:
every operation, parameter, schema and field has a description, every request body an example
that the service itself accepts, and no description carries notes about the code."""

import importlib
import json
import pkgutil

import pytest
from pydantic import BaseModel

from service import schemas
from service.main import app

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
    missing += [f"{name} {p['name']}" for name, op in _operations()
                for p in op.get("parameters", []) if not p.get("description")]  # fmt: skip
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


@pytest.mark.parametrize("name, operation",
                         [(n, op) for n, op in _operations() if "requestBody" in op])  # fmt: skip
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
