"""``--assembler``'s words: ``Assembler.from_string`` splits as ``shlex.split`` (the
oracle), whether or not the text takes ``shlex`` itself (quotes, backslashes)."""

from __future__ import annotations

import random
import shlex

import pytest

from cfi2sframe.frontend.probe import Assembler

# Letters, every whitespace shlex splits at, the ones it does not (Unicode's, vertical
# tab, form feed), quotes, the escape and a shell's other marks.
ALPHABET = "ab-=/.:# \t\r\n\x0b\x0c\x1c\x85\xa0\u2003'\"\\;|&$*"


@pytest.mark.parametrize("text", [
    "as", "clang -c -x assembler", "  as  --64 ", "as\t-I\tinc", "as\r\n--64\n",
    "as\x0b--64", "as\xa0--64", "as\u2003--64", " ", "\t\n", "as#comment", "as ;x",
    "'my as' --64", 'as "-I a b"', "as\\ x", "as '' y",
])
def test_the_words_are_shlex_s(text: str) -> None:
    assert Assembler.from_string(text).command == tuple(shlex.split(text))


def test_random_texts_split_as_shlex_splits() -> None:
    chooser = random.Random(43)
    checked = 0
    for _ in range(3000):
        text = "".join(chooser.choice(ALPHABET) for _ in range(chooser.randrange(1, 14)))
        try:
            expected = tuple(shlex.split(text))
        except ValueError:  # (an unclosed quote or a trailing escape: shlex's error)
            with pytest.raises(ValueError):
                Assembler.from_string(text)
            continue
        assert Assembler.from_string(text).command == expected, repr(text)
        checked += 1
    assert checked > 1000


def test_no_text_is_as() -> None:
    assert Assembler.from_string(None).command == ("as",)
    assert Assembler.from_string("").command == ("as",)
