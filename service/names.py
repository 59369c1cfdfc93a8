"""Names people read (a campaign's, its inputs', outputs' and choice values): stored in Unicode's
NFKC form, and refused when they could show one thing and be another.

- Characters that show nothing or reorder the text around them are refused: controls, format
  characters (zero-width spaces and joiners, the bidirectional overrides and isolates such as
  U+202E, the byte-order mark), private-use, surrogate and unassigned code points.
- A name whose letters come from more than one of the Latin, Greek and Cyrillic scripts is
  refused (a Latin name with one Cyrillic letter in it, which reads the same).
- Two names of one campaign that read the same once the Greek and Cyrillic letters that look
  like Latin ones are read as those (``y`` beside the Cyrillic letter U+0443) are refused by
  :func:`look_alikes`.

Plain Python (unicodedata), so the schemas use it without other dependencies.
"""

from __future__ import annotations

import unicodedata

HIDDEN = {"Cc", "Cf", "Co", "Cs", "Cn"}
SCRIPTS = ("LATIN", "GREEK", "CYRILLIC")
# Greek and Cyrillic letters that look like Latin ones, as the Latin letter
LOOK_ALIKE = str.maketrans(
    "\u0430\u0432\u0435\u0437\u0456\u0458\u043a\u043c\u043d\u043e\u0440\u0441\u0442\u0443\u0445"
    "\u0455\u0501\u04bb\u0410\u0412\u0415\u0417\u0406\u0408\u041a\u041c\u041d\u041e\u0420\u0421"
    "\u0422\u0423\u0425\u0405"
    "\u03b1\u03b9\u03ba\u03bd\u03bf\u03c1\u03c4\u03c5\u03c7\u0391\u0392\u0395\u0396\u0397\u0399"
    "\u039a\u039c\u039d\u039f\u03a1\u03a4\u03a5\u03a7",
    "aBe3ijkMHopcTyxsdhABE3IJKMHOPCTYXSaikvoptuxABEZHIKMNOPTYX",
)


def _script(character: str) -> str | None:
    name = unicodedata.name(character, "")
    return next((s for s in SCRIPTS if name.startswith(s)), None)


def visible(value: str) -> str:
    """``value`` in NFKC form; a ValueError saying why if it holds a hidden or reordering
    character, or letters of more than one of the Latin, Greek and Cyrillic scripts."""
    text = unicodedata.normalize("NFKC", value)
    for character in text:
        if unicodedata.category(character) in HIDDEN:
            code = f"U+{ord(character):04X}"
            what = unicodedata.name(character, code)
            raise ValueError(
                f"{text!r} holds {what} ({code}), which shows nothing or reorders "
                "the text: names must read as they are"
            )
    scripts = {s for c in text if c.isalpha() and (s := _script(c))}
    if len(scripts) > 1:
        raise ValueError(
            f"{text!r} mixes {' and '.join(sorted(s.title() for s in scripts))} "
            "letters, which can look alike: write it in one script"
        )
    return text


def visible_text(value):
    """:func:`visible` for a string; anything else as it is (a choice value may be a number)."""
    return visible(value) if isinstance(value, str) else value


def plain_text(value: str) -> str:
    """Free text people read (a failed run's reason, a traceback's tail): in NFKC form (a
    full-width ``＝`` is ``=``), its line breaks ``\\n``, and each character that :func:`visible`
    refuses in a name (a control other than a line break or a tab, a zero-width or
    bidirectional one such as U+202E) written as its code point, ``<U+202E>``: such text is
    kept, since a failure's report should not be lost, but it reads as it is."""
    text = unicodedata.normalize("NFKC", value).replace("\r\n", "\n").replace("\r", "\n")
    return "".join(
        f"<U+{ord(c):04X}>" if unicodedata.category(c) in HIDDEN and c not in "\n\t" else c
        for c in text
    )


def look_alikes(names: list[str]) -> tuple[str, str] | None:
    """Two of ``names`` that differ but read the same once look-alike Greek and Cyrillic
    letters are read as Latin ones (None: no such pair)."""
    seen: dict[str, str] = {}
    for name in names:
        key = name.translate(LOOK_ALIKE)
        if key in seen and seen[key] != name:
            return seen[key], name
        seen.setdefault(key, name)
    return None
