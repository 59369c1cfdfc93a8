"""MkDocs hooks: the reference pages that are generated from the code at every build, so that
they cannot go stale: the HTTP API from the app's OpenAPI document (also written to the site as
``openapi.json``) and every setting with its default from ``service.settings.Settings``. The
SDK's reference (from its docstrings) and each command's ``--help`` are generated into the
repository instead, readable there as they are: ``python docs/hooks.py`` writes them
(:data:`COMMITTED`), and ``tests/test_manual.py`` checks that they are what the code gives."""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import os
import pathlib
import re

from mkdocs.structure.files import File

GENERATED = {"reference/http.md": "http_reference", "reference/settings.md": "settings_reference"}


ROOT = pathlib.Path(__file__).resolve().parents[1]


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
        "Each command's `--help`, generated from the code by `python docs/hooks.py` (a test",
        "checks that this page is what it gives). The",
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


# -- the SDK --------------------------------------------------------------------------------

# the SDK reference's sections: the names of ``fbgp_al`` each holds, in order
SDK_SECTIONS = (
    ("Client", ("Client",)),
    ("run_simulator", ("run_simulator",)),
    ("Metamodel", ("Metamodel",)),
    ("Prediction", ("Prediction",)),
    (
        "What the client answers",
        (
            "Campaign",
            "CampaignStatus",
            "NextPoint",
            "Model",
            "Evaluation",
            "ApiError",
            "RefitFailed",
        ),
    ),
    ("Built-in simulators", ("get_simulator",)),
)
_ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|exc|obj):`(~?)([\w.]+)`")
_SECTION = re.compile(r"^(Args|Arguments|Attributes|Returns|Raises|Yields):$")


def _markdown(doc: str | None) -> str:
    """A docstring as Markdown: ``code`` as `code`, Sphinx roles as the name in code (its last
    part where written ``~``), a Google-style section (``Attributes:``) as a list."""
    doc = _ROLE.sub(lambda m: f"`{m[2].split('.')[-1] if m[1] else m[2]}`", doc or "")
    doc = re.sub(r"(?<!`)``(?!`)", "`", doc)
    out, lines, k = [], doc.splitlines(), 0
    while k < len(lines):
        heading = _SECTION.match(lines[k].strip())
        if not heading:
            out.append(lines[k])
            k += 1
            continue
        out += [f"**{heading[1]}:**", ""]
        k += 1
        while k < len(lines) and (not lines[k].strip() or lines[k].startswith(" ")):
            text = lines[k].strip()
            if ":" in text and not lines[k].startswith("        "):
                name, _, rest = text.partition(":")
                out.append(f"- `{name}`: {rest.strip()}")
            elif text:
                out[-1] += f" {text}"
            k += 1
        out.append("")
    return "\n".join(out).strip()


class _Written(str):
    """An annotation as written in the source (``from __future__ import annotations``)."""

    def __repr__(self) -> str:
        return str(self)


def _signature(name: str, obj) -> str:
    """``name(...)`` as the source writes its parameters (``self`` left out)."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return f"```python\n{name}(...)\n```"
    written = lambda a: _Written(a) if isinstance(a, str) else a  # noqa: E731
    parameters = [
        p.replace(annotation=written(p.annotation))
        for p in signature.parameters.values()
        if p.name not in ("self", "cls")
    ]
    signature = signature.replace(
        parameters=parameters, return_annotation=written(signature.return_annotation)
    )
    return f"```python\n{name}{signature}\n```"


def _members(cls) -> list[tuple[str, object]]:
    """A class's public methods and properties defined in it, in the order of its source."""
    out = []
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(member, (classmethod, staticmethod)):
            member = member.__func__
        if isinstance(member, property) or inspect.isfunction(member):
            out.append((name, member))
    return out


def _sdk_object(name: str, obj) -> list[str]:
    lines = [f"### {name}", ""]
    if inspect.isclass(obj):
        lines += [_signature(name, obj), "", _markdown(inspect.getdoc(obj)), ""]
        for member_name, member in _members(obj):
            title = f"{name}.{member_name}"
            lines += [f"#### {title}", ""]
            if isinstance(member, property):
                lines += [f"*property*: {_markdown(inspect.getdoc(member))}", ""]
                continue
            lines += [_signature(title, member), "", _markdown(inspect.getdoc(member)), ""]
        return lines
    return lines + [_signature(name, obj), "", _markdown(inspect.getdoc(obj)), ""]


def sdk_reference() -> str:
    import fbgp_al

    lines = [
        "# Python SDK",
        "",
        "<!-- Generated from the SDK's docstrings by `python docs/hooks.py`; a test checks",
        "     that this page is what they give. -->",
        "",
        "```sh",
        "pip install .            # in a clone: the SDK alone (httpx, numpy), no torch",
        "```",
        "",
        _markdown(inspect.getdoc(fbgp_al)),
        "",
    ]
    for section, names in SDK_SECTIONS:
        lines += [f"## {section}", ""]
        for name in names:
            lines += _sdk_object(name, getattr(fbgp_al, name))
    return "\n".join(lines).rstrip() + "\n"


# the pages generated into the repository (readable there as they are), and how
COMMITTED = {"reference/sdk.md": "sdk_reference", "reference/cli-help.md": "cli_reference"}


def write_committed(root: str = os.path.dirname(__file__)) -> None:
    """Write each page of :data:`COMMITTED` as its generator gives it now."""
    for page, maker in COMMITTED.items():
        with open(os.path.join(root, page), "w") as f:
            f.write(globals()[maker]())


if __name__ == "__main__":
    write_committed()
