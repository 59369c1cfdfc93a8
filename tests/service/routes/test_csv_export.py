"""A campaign's observations as CSV (:mod:`service.routes.csv_export`), over HTTP: text a
spreadsheet would run as a formula is defused, numbers stay numbers, and each column is named
once."""

import csv
import io
import math

from tests.service.conftest import observations_csv


def _next(client, campaign, wait=0.0):
    r = client.get(f"/campaigns/{campaign}/next", params={"wait": wait})
    assert r.status_code == 200, r.text
    return r.json()


def _label(client, campaign, ticket, x):
    y = math.sin(3 * x[0]) + x[0]
    r = client.post(f"/campaigns/{campaign}/label", json={"ticket": ticket, "y": y})
    assert r.status_code == 201, r.text


def test_the_csv_export_does_not_hand_a_spreadsheet_formulas(client, make_body):
    """Text a user wrote (an input's name, a failure's reason) that a spreadsheet would run as
    a formula is exported with a leading ', while numbers, negative ones too, stay numbers."""
    inputs = [{"name": '=HYPERLINK("http://x","y")', "lower": -2.0, "upper": -1.0}]
    body = make_body(inputs=inputs, pool={"type": "grid", "points_per_dim": 11})
    campaign = client.post("/campaigns", json=body).json()["id"]
    first, second = (_next(client, campaign) for _ in range(2))
    _label(client, campaign, first["ticket"], first["x"])
    r = client.post(
        f"/campaigns/{campaign}/fail", json={"ticket": second["ticket"], "reason": "@SUM(A1:A2)"}
    )
    assert r.status_code == 201
    rows = observations_csv(client, campaign)
    assert rows[0][0] == """'=HYPERLINK("http://x","y")"""
    assert float(rows[1][0]) == first["x"][0] < 0 and rows[1][2] == "ok"
    assert rows[2][2:] == ["failed", "'@SUM(A1:A2)"]
    # a reason that a reader splitting on ";" would cut into a formula: every part defused,
    # and the cell quoted
    third = _next(client, campaign)
    reason = "ok;=cmd|' /C calc'!A0"
    r = client.post(
        f"/campaigns/{campaign}/fail", json={"ticket": third["ticket"], "reason": reason}
    )
    assert r.status_code == 201
    text = client.get(f"/campaigns/{campaign}/observations", headers={"Accept": "text/csv"}).text
    assert list(csv.reader(io.StringIO(text)))[3][-1] == "ok;'=cmd|' /C calc'!A0"
    for separator in (";", "|", ",", "\t"):
        for line in text.splitlines():
            for cell in line.split(separator):
                assert not cell.strip().lstrip('"').startswith(("=", "+", "@")), (separator, cell)


def test_each_csv_column_is_named_once(client, make_body):
    """Inputs named like the export's own columns (``y``, ``status``, ``y_<output>``) are
    written as ``input:<name>``, so that a reader by column name gets each value under its own
    name; before, inputs ``x``, ``y`` gave the header ``x,y,y,status,reason``."""
    plane = [
        {"name": "x", "lower": 0, "upper": 1},
        {"name": "y", "lower": 0, "upper": 1},
        {"name": "status", "lower": 0, "upper": 1},
    ]
    campaign = client.post("/campaigns", json=make_body(inputs=plane, max_labels=10)).json()["id"]
    r = client.post(
        f"/campaigns/{campaign}/observations", json={"x": [[0.1, 0.9, 0.5]], "y": [100.0]}
    )
    assert r.status_code == 201, r.text
    text = client.get(f"/campaigns/{campaign}/observations", headers={"Accept": "text/csv"}).text
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == ["x", "input:y", "input:status", "y", "status", "reason"]
    assert rows[0] == {
        "x": "0.1",
        "input:y": "0.9",
        "input:status": "0.5",
        "y": "100.0",
        "status": "ok",
        "reason": "",
    }
    outputs = [{"name": "stress"}, {"name": "disp"}]
    inputs = [
        {"name": "y_stress", "lower": 0, "upper": 1},
        {"name": "input:y_stress", "lower": 0, "upper": 1},
    ]
    body = make_body(inputs=inputs, outputs=outputs, max_labels=10)
    campaign = client.post("/campaigns", json=body).json()["id"]
    client.post(
        f"/campaigns/{campaign}/observations",
        json={"x": [[0.2, 0.3]], "y": [{"stress": 1.5, "disp": 2.5}]},
    )
    text = client.get(f"/campaigns/{campaign}/observations", headers={"Accept": "text/csv"}).text
    header = next(csv.reader(io.StringIO(text)))
    assert header == [
        "input:y_stress",
        "input:input:y_stress",
        "y_stress",
        "y_disp",
        "status",
        "reason",
    ]


# a formula's start, behind any whitespace (a tab or a CR that a reader strips)
FORMULA = ("=", "+", "-", "@", "\uff1d", "\uff0b", "\uff0d", "\uff20")
REASONS = [
    "x\n=cmd|'/C calc'!A0;",
    "a\r\n+1+1",
    "b\r@SUM(1+1)",
    "c\n  -1+1;=2",
    "d\u2028=1+1",
    "e\x0b=1+1",
    "\uff1d1+1",
    " =1+1",
    "\u202e=1+1",
    "\u200b@SUM(1)",
    "f\n\uff0b1",
    "g\t=1",
]


def test_no_cell_starts_a_formula_whichever_separator_reads_the_csv(client, make_body):
    """Reasons with a formula after a line break (``\\n``, ``\\r``, U+2028, a vertical tab), after
    spaces, in full-width form, or behind a hidden character: read back with ``,``, ``;`` or a
    tab as the separator (a spreadsheet in another locale sees no quotes and starts a row at
    each line break), no cell starts a formula; and the hidden characters that names refuse are
    kept as their code points, the full-width ``＝`` as ``=``."""
    body = make_body(pool={"type": "grid", "points_per_dim": 31}, max_labels=20)
    campaign = client.post("/campaigns", json=body).json()["id"]
    for reason in REASONS:
        ticket = _next(client, campaign)["ticket"]
        r = client.post(f"/campaigns/{campaign}/fail", json={"ticket": ticket, "reason": reason})
        assert r.status_code == 201, r.text
    reasons = {
        f["reason"] for f in client.get(f"/campaigns/{campaign}/observations").json()["failures"]
    }
    assert "<U+202E>=1+1" in reasons and "<U+200B>@SUM(1)" in reasons and "=1+1" in reasons
    assert not any(c in r for r in reasons for c in ("\u202e", "\u200b", "\uff1d", "\r"))
    text = client.get(f"/campaigns/{campaign}/observations", headers={"Accept": "text/csv"}).text
    for separator in (",", ";", "\t"):
        for row in csv.reader(io.StringIO(text), delimiter=separator):
            for cell in row:
                assert not cell.lstrip().startswith(FORMULA), (separator, cell)
