"""MkDocs hooks: the reference pages that are generated from the code at every build, so that
they cannot go stale: the HTTP API from the app's OpenAPI document (also written to the site as
``openapi.json``), every setting with its default from ``service.settings.Settings``, and each
command's ``--help``; and the package as it is imported (``fbgp_al``, whose subpackages are the
repository's folders), laid out for mkdocstrings to read."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pathlib

from mkdocs.structure.files import File

GENERATED = {
    "reference/http.md": "http_reference",
    "reference/settings.md": "settings_reference",
    "reference/cli-help.md": "cli_reference",
}


ROOT = pathlib.Path(__file__).resolve().parents[1]
# pyproject.toml's package-dir: fbgp_al is clients/fbgp_al, fbgp_al.<name> the folder <name>/
SUBPACKAGES = ("service", "worker", "clients")
STAGED = ROOT / "build" / "griffe"  # mkdocs.yml's mkdocstrings paths


def on_startup(command, dirty):
    """``build/griffe/fbgp_al``: the installed package's layout, for mkdocstrings to read
    (griffe reads the source, it imports nothing): a copy of its ``__init__.py``, and links to
    the folders of its subpackages. Made at startup, before mkdocstrings reads its paths."""
    package = STAGED / "fbgp_al"
    package.mkdir(parents=True, exist_ok=True)
    face = (ROOT / "clients" / "fbgp_al" / "__init__.py").read_text()
    (package / "__init__.py").write_text(face)
    for name in SUBPACKAGES:
        if not (package / name).is_symlink():
            (package / name).symlink_to(ROOT / name, target_is_directory=True)


def on_files(files, config):
    files.append(File.generated(config, "openapi.json", content=json.dumps(_openapi(), indent=1)))
    return files


def on_page_markdown(markdown, page, config, files):
    """The committed page (a note for readers of the repository) replaced by what the code
    says now."""
    maker = GENERATED.get(page.file.src_uri)
    return globals()[maker]() if maker else markdown


# -- the HTTP API ---------------------------------------------------------------------------


def _openapi() -> dict:
    from fbgp_al.service.main import app

    return app.openapi()


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _type(schema: dict) -> str:
    """A schema's type in a few words, with links to the named schemas."""
    if "$ref" in schema:
        name = _ref_name(schema["$ref"])
        return f"[{name}](#{name.lower()})"
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return " or ".join(_type(s) for s in schema[key])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if kind == "object" and "additionalProperties" in schema:
        extra = schema["additionalProperties"]
        return f"object of {_type(extra) if isinstance(extra, dict) else 'any'}"
    return str(kind)


BOUNDS = (
    ("minimum", ">= {}"),
    ("exclusiveMinimum", "> {}"),
    ("maximum", "<= {}"),
    ("exclusiveMaximum", "< {}"),
    ("minLength", "at least {} characters"),
    ("maxLength", "at most {} characters"),
    ("minItems", "at least {} items"),
    ("maxItems", "at most {} items"),
    ("pattern", "matches `{}`"),
)


def _bounds(schema: dict) -> list[str]:
    found = [text.format(schema[key]) for key, text in BOUNDS if key in schema]
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key, []):
            found += _bounds(option)
    return found


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _field_row(name: str, schema: dict, required: bool) -> str:
    facts = []
    if "default" in schema:
        facts.append(f"default `{json.dumps(schema['default'])}`")
    facts += _bounds(schema)
    words = schema.get("description", "")
    if facts:
        words = f"{words} ({'; '.join(facts)})" if words else "; ".join(facts)
    return f"| `{name}` | {_cell(_type(schema))} | {'yes' if required else ''} | {_cell(words)} |"


def _schema_section(name: str, schema: dict) -> list[str]:
    lines = [f"### {name}", ""]
    if schema.get("description"):
        lines += [schema["description"], ""]
    properties = schema.get("properties", {})
    if properties:
        required = set(schema.get("required", []))
        lines += ["| field | type | required | description |", "|---|---|---|---|"]
        lines += [_field_row(k, v, k in required) for k, v in properties.items()]
    else:
        lines.append(f"Type: {_type(schema)}.")
    return [*lines, ""]


def _body_schema(content: dict) -> dict | None:
    for media in ("application/json", "application/problem+json"):
        if media in content:
            return content[media]
    return next(iter(content.values()), None)


def _example(doc: dict, media: dict):
    """A request body's example: the media type's, or its schema's first."""
    if "example" in media:
        return media["example"]
    schema = media.get("schema", {})
    for option in [schema, *schema.get("anyOf", [])]:
        if "$ref" in option:
            examples = doc["components"]["schemas"][_ref_name(option["$ref"])].get("examples")
            if examples:
                return examples[0]
    return None


def http_reference() -> str:
    doc = _openapi()
    lines = [
        "# HTTP API",
        "",
        "Generated from the service's OpenAPI document at each build of this manual; a running",
        "service answers the same document at `/openapi.json` and an interactive view of it at",
        "`/docs`. [openapi.json](../openapi.json) is this build's copy.",
        "",
        doc["info"].get("description", ""),
        "",
        "## Operations",
        "",
    ]
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            lines += [f"### {method.upper()} {path}", ""]
            if op.get("summary"):
                lines += [f"**{op['summary']}**", ""]
            if op.get("description"):
                lines += [op["description"], ""]
            params = op.get("parameters", [])
            if params:
                lines += [
                    "| parameter | in | type | required | description |",
                    "|---|---|---|---|---|",
                ]
                for p in params:
                    schema = p.get("schema", {})
                    row = _field_row(
                        p["name"],
                        {
                            **schema,
                            "description": p.get("description", schema.get("description", "")),
                        },
                        p.get("required", False),
                    )
                    cells = row.split(" | ", 1)
                    lines.append(f"{cells[0]} | {p['in']} | {cells[1]}")
                lines.append("")
            body = op.get("requestBody")
            if body:
                media = _body_schema(body.get("content", {})) or {}
                lines += [f"Request body: {_type(media.get('schema', {}))}", ""]
                example = _example(doc, media)
                if example is not None:
                    lines += ["```json", json.dumps(example, indent=2), "```", ""]
            lines += ["| status | description | body |", "|---|---|---|"]
            for status, answer in op.get("responses", {}).items():
                media = _body_schema(answer.get("content", {})) or {}
                shape = _type(media["schema"]) if media.get("schema") else ""
                lines.append(
                    f"| {status} | {_cell(answer.get('description', ''))} | {_cell(shape)} |"
                )
            lines.append("")
    lines += ["## Schemas", ""]
    for name, schema in doc.get("components", {}).get("schemas", {}).items():
        lines += _schema_section(name, schema)
    return "\n".join(lines)


# -- settings -------------------------------------------------------------------------------


def settings_reference() -> str:
    from fbgp_al.service.settings import Settings

    lines = [
        "# Settings",
        "",
        "Every setting of the API and the workers, read from the environment when a process",
        "starts (`FBGP_` and the name in capitals: `FBGP_API_TOKEN`, `FBGP_LIMIT_LABELS`).",
        "`fbgp-al up` and docker compose pass their environment on to the processes they start.",
        "Generated from `service/settings.py` at each build of this manual. The limits are",
        "explained with what they protect in [limits](limits.md).",
        "",
        "| variable | default | description |",
        "|---|---|---|",
    ]
    for name, field in Settings.model_fields.items():
        default = field.get_default(call_default_factory=True)
        shown = "unset" if default is None else f"`{default!r}`"
        lines.append(f"| `FBGP_{name.upper()}` | {shown} | {_cell(field.description or '')} |")
    return "\n".join(lines) + "\n"


# -- the command line -----------------------------------------------------------------------


def _help(run, argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        run(argv)
    return out.getvalue().rstrip()


def cli_reference() -> str:
    from fbgp_al.clients.ops.cli import COMMANDS, main

    os.environ["COLUMNS"] = "100"
    lines = [
        "# Command-line help",
        "",
        "Each command's `--help`, generated at each build of this manual. The",
        "[command line](cli.md) page says what each is for, with examples.",
        "",
        "## fbgp-al",
        "",
        "```text",
        _help(main, ["--help"]),
        "```",
        "",
    ]
    for name, (run, _) in COMMANDS.items():
        lines += [f"## fbgp-al {name}", "", "```text", _help(run, ["--help"]), "```", ""]
    return "\n".join(lines)
