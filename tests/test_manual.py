"""The manual (``docs/``) against the repository: every test module and source file it cites
exists, no table of it has the same row twice, and the reliability page answers each case
once."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").rglob("*.md"))
CITED = re.compile(r"`((?:tests|service|worker|clients)/[\w/.-]+\.(?:py|lua))`")


def test_the_manual_cites_only_files_the_repository_has():
    cited = [(page, path) for page in PAGES for path in CITED.findall(page.read_text())]
    missing = [
        f"{page.relative_to(ROOT)}: {path}" for page, path in cited if not (ROOT / path).exists()
    ]
    assert len(PAGES) > 10 and not missing, missing


def _tables(text: str) -> list[list[str]]:
    """The page's tables: runs of lines that start with ``| ``."""
    tables, run = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("| "):
            run.append(line)
        elif run:
            tables, run = [*tables, run], []
    return tables


def test_no_table_of_the_manual_has_a_row_twice():
    twice = [
        f"{page.relative_to(ROOT)}: {row[:80]}"
        for page in PAGES
        for table in _tables(page.read_text())
        for row in set(table)
        if table.count(row) > 1
    ]
    assert not twice, twice


def test_the_reliability_tables_name_each_case_once():
    """A case (a row's first cell) of the reliability page is answered in one row."""
    page = (ROOT / "docs/operations/reliability.md").read_text()
    twice = [
        case
        for table in _tables(page)
        for case in {r.split(" | ")[0] for r in table}
        if [r.split(" | ")[0] for r in table].count(case) > 1
    ]
    assert not twice, twice


def test_the_checks_find_what_they_look_for():
    """The patterns match the manual's way of citing (a page cites dozens of test files)."""
    page = (ROOT / "docs/operations/reliability.md").read_text()
    assert len(CITED.findall(page)) > 30
    assert [len(t) for t in _tables("| a |\n| b |\ntext\n| a |\n")] == [2, 1]


def test_the_committed_reference_pages_are_what_the_code_gives():
    """The SDK's reference and the commands' help are generated into the repository (readable
    there as they are): each committed page is what ``python docs/hooks.py`` writes now."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    assert set(hooks.COMMITTED) == {"reference/sdk.md", "reference/cli-help.md"}
    for page, maker in hooks.COMMITTED.items():
        generated = getattr(hooks, maker)()
        assert (ROOT / "docs" / page).read_text() == generated, (
            f"docs/{page} differs from what the code gives: run python docs/hooks.py"
        )
    sdk = (ROOT / "docs/reference/sdk.md").read_text()
    assert "### Client" in sdk and "#### Client.wait_for_model" in sdk and ":::" not in sdk
