"""Names people read (:mod:`service.names`), over HTTP: stored in Unicode's NFKC form."""


def test_names_are_stored_in_nfkc_form(client, make_body):
    """Compatibility characters (a ligature, full-width letters) are stored as the letters they
    stand for, so a name reads and matches one way."""
    body = make_body(
        name="\ufb01ne beam", inputs=[{"name": "\uff4c\uff4f\uff41\uff44", "lower": 0, "upper": 1}]
    )
    created = client.post("/campaigns", json=body)
    assert created.status_code == 201, created.text
    assert created.json()["name"] == "fine beam"
    assert [i["name"] for i in created.json()["inputs"]] == ["load"]
