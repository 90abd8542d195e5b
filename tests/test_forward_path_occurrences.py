"""The forward path counts a function's name in the file with a find loop; it must count
exactly what the regexes it replaced count (whole words, `.name`, `def name`)."""

import random

import pytest

from gatekeeper.static.forward_path import _SCAN_LIMIT, _occurrences, _occurrences_by_regex

PIECES = ["a", "ab", "_", ".", " ", "\t", "\n", "def", "é", "1", "(", "\u00a0", "\u2003", "x", "\x1c", "Ⅳ", "٣"]
NAMES = ["a", "ab", "a_", "_a", "é", "aé", "x1", "Ⅳ", "a٣", "undef", "define"]  # never `def`: a keyword


def test_the_find_loop_counts_what_the_regexes_count_on_fuzzed_text():
    rng = random.Random(1234)
    for _ in range(30_000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 30)))
        name = rng.choice(NAMES)
        assert _occurrences(text, name) == _occurrences_by_regex(text, name), (text, name)


@pytest.mark.parametrize("text, name, want", [
    ("def helper(x):\n    return x\nfns = {'h': helper}\n", "helper", (2, 1)),
    ("def helper(x): ...\n", "helper", (1, 1)),
    ("undef helper\nmy_helper()\nhelper_2()\n", "helper", (1, 0)),
    ("self.helper()\nobj . helper\n", "helper", (2, 0)),
    ("def  \t helper(): pass\n", "helper", (1, 1)),
])
def test_counts(text, name, want):
    assert _occurrences(text, name) == want


def test_a_name_found_very_often_takes_the_regex_path_with_the_same_answer():
    text = "a" * (3 * _SCAN_LIMIT) + " a def a"
    assert _occurrences(text, "a") == _occurrences_by_regex(text, "a") == (2, 1)
