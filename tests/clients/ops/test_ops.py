"""The operations tooling's shared helper (:mod:`clients.ops`): a command's ``--help``
description is its module's docstring's first paragraph, whole, as plain text."""

from fbgp_al.clients.ops import described, simulate


def test_a_commands_description_is_its_docstrings_first_paragraph_as_plain_text():
    doc = """``fbgp-al run``: any executable
    as a simulator.

    The rest is not the description."""
    assert described(doc) == "fbgp-al run: any executable as a simulator."
    assert described(None) == "" and described("") == ""
    text = described(simulate.__doc__)
    assert text.startswith("fbgp-al simulate NAME") and "``" not in text and "\n" not in text
