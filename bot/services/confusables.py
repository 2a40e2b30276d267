"""Unicode's confusable skeleton (UTS #39 section 4) and script of a character, in pure Python.

The mapping is Unicode's own data file, ``confusables.txt`` (Unicode 15.1.0, beside this
module, as published in ``security/`` and shipped in ICU's ``unidata``), read once; a
character's script and the Default_Ignorable_Code_Point property come from the ``regex``
package's Unicode tables. No compiler and no system library: both install from wheels.

To move to a newer Unicode release, replace ``confusables.txt`` with the release's file (its
header names the version; :data:`UNICODE_VERSION` reads it) and run ``tests/services``.
"""

from __future__ import annotations

import functools
import unicodedata
from importlib import resources

import regex

_DATA = "confusables.txt"

_IGNORABLE = regex.compile(r"\p{Default_Ignorable_Code_Point}+")


@functools.cache
def _prototypes() -> dict[str, str]:
    """``confusables.txt`` as {source character: prototype string}.

    Each data line is ``source ; prototype ; MA # comment``: one code point, then the
    space-separated code points it is confused with (UTS #39 section 4, "Data file format").
    """
    text = resources.files(__package__).joinpath(_DATA).read_text(encoding="utf-8")
    table: dict[str, str] = {}
    for line in text.splitlines():
        data = line.partition("#")[0].strip()
        if not data:
            continue
        source, target, _type = (field.strip() for field in data.split(";"))
        table[chr(int(source, 16))] = "".join(chr(int(cp, 16)) for cp in target.split())
    return table


@functools.cache
def unicode_version() -> str:
    """The Unicode release of the data file, such as ``"15.1.0"`` (its ``# Version:`` line)."""
    text = resources.files(__package__).joinpath(_DATA).read_text(encoding="utf-8")
    for line in text.splitlines():
        if line.startswith("# Version:"):
            return line.partition(":")[2].strip()
    raise LookupError(f"{_DATA} names no version")


def skeleton(text: str) -> str:
    """Return the confusable skeleton of ``text`` (UTS #39 section 4, Unicode 15.1).

    NFD, Default_Ignorable_Code_Point characters removed, each character replaced by its
    prototype in ``confusables.txt``, NFD again. Two strings that look alike have the same
    skeleton (``paypal`` with a Cyrillic ``а``, ``rn`` and ``m``); case is kept (``I`` is
    an ``l``), so callers fold case themselves where they want it ignored.
    """
    prototypes = _prototypes()
    decomposed = _IGNORABLE.sub("", unicodedata.normalize("NFD", text))
    mapped = "".join(prototypes.get(ch, ch) for ch in decomposed)
    return unicodedata.normalize("NFD", mapped)


@functools.cache
def _script_pattern(scripts: frozenset[str]) -> regex.Pattern[str]:
    return regex.compile("[" + "".join(rf"\p{{Script={s}}}" for s in sorted(scripts)) + "]")


def in_scripts(ch: str, scripts: frozenset[str]) -> bool:
    """Whether the character ``ch`` has one of ``scripts`` as its Script property.

    Args:
        ch: one character.
        scripts: ISO 15924 codes as Unicode's ``Scripts.txt`` aliases them (``Hani``,
            ``Thai``...); the Script property, not Script_Extensions (UAX #24), as ICU's
            ``uscript_getScript`` answers.
    """
    return _script_pattern(scripts).match(ch) is not None
