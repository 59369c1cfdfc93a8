"""Tests mirror the source: each product module ``<package>/<path>/<module>.py`` has its test
module ``tests/<package>/<path>/test_<module>.py``, but for those listed here. The lists only
shrink: a module that gains its test module must leave them, and a new module comes with its
tests."""

import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("service", "worker", "clients")

# Declarations with no behaviour of their own: the app's assembly, the store nouns' base, the
# request and response models (their checks are tested through the routes and the OpenAPI
# contract, tests/service/schemas/test_schemas.py), the SDK's error types.
DECLARATIONS = {
    "service/app.py",
    "service/main.py",
    "service/routes/model_jobs.py",
    "service/store/noun.py",
    "service/schemas/failures.py",
    "service/schemas/fields.py",
    "service/schemas/health.py",
    "service/schemas/models.py",
    "service/schemas/predictions.py",
    "service/schemas/problems.py",
    "service/schemas/sensitivity.py",
    "service/schemas/teams.py",
    "clients/errors.py",
}

# Modules with behaviour and no test module of their name yet: the operations tooling and a
# benchmark (partly tested through tests/clients/ops/test_soak.py, tests/service/test_limits.py
# and test_wakeups.py). Each leaves this list with its test module.
NOT_YET = {
    "clients/ops/adversarial.py",
    "clients/ops/bench_stack.py",
    "clients/ops/churn.py",
    "clients/ops/large_bodies.py",
    "clients/ops/load_benchmark.py",
    "clients/ops/nearest_benchmark.py",
    "clients/ops/soak_command.py",
    "clients/reproduction/feasibility_bench.py",
}


def _without_mirror() -> set[str]:
    out = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if path.name == "__init__.py" or "__pycache__" in path.parts:
                continue
            module = path.relative_to(ROOT)
            if not (ROOT / "tests" / module.parent / f"test_{module.name}").exists():
                out.add(module.as_posix())
    return out


def test_every_module_has_its_test_module_but_those_listed():
    missing = _without_mirror() - DECLARATIONS - NOT_YET
    assert not missing, (
        "product modules without a test module of their name (tests/<path>/test_<module>.py): "
        f"{sorted(missing)}"
    )


def test_the_lists_only_shrink():
    """A listed module that has its test module now (or is gone) leaves the list."""
    stale = (DECLARATIONS | NOT_YET) - _without_mirror()
    assert not stale, f"listed but mirrored or gone, take them off: {sorted(stale)}"
    assert not DECLARATIONS & NOT_YET
