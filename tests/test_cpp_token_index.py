"""The C++ tokenizer's edge cases, the per-source token index (CppSource.by_text) and the
function definitions found through it (issue 10: the checks use the index instead of
walking the whole token stream, so it must say exactly what the stream says)."""

from __future__ import annotations

import textwrap

from gatekeeper.static.cpp_functions import functions
from gatekeeper.static.cpp_sources import CppSource, Segment
from gatekeeper.static.cpp_tokens import tokenize


def _kinds(src: str) -> list[tuple[str, str, int]]:
    return [(t.kind, t.text, t.offset) for t in tokenize(src)]


def _source(text: str) -> CppSource:
    return CppSource("cuda", "test", [Segment(0, text)])


def test_directive_only_at_a_line_start() -> None:
    src = "#define N 4\n  #  include <x>\nint a; /* c */ #define Y\n"
    got = _kinds(src)
    assert got[:3] == [("directive", "define", 0), ("ident", "N", 8), ("number", "4", 10)]
    assert ("directive", "include", src.index("#  include")) in got
    # after a comment on the same line a `#` is punctuation, not a directive
    hash_at = src.index("#define Y")
    assert ("punct", "#", hash_at) in got and ("ident", "define", hash_at + 1) in got
    assert not any(kind == "directive" and text == "define" and offset == hash_at for kind, text, offset in got)


def test_stringification_and_continuation() -> None:
    src = "#define S(x) #x \\\n  + 1\nint b = 2; \\\n#pragma once\n"
    got = _kinds(src)
    assert ("punct", "#", src.index("#x")) in got and ("ident", "x", src.index("#x") + 1) in got
    # a backslash-newline joins the lines first (translation phase 2): `int b = 2; #pragma once`
    # is one line, and a `#` that does not start it is no directive
    assert ("punct", "#", src.index("#pragma")) in got
    assert not any(kind == "directive" and text == "pragma" for kind, text, _ in got)


def test_form_feed_before_hash_is_not_a_directive_start() -> None:
    assert _kinds("\f#define X") == [("punct", "#", 1), ("ident", "define", 2), ("ident", "X", 9)]


def test_literals_and_comments_are_dropped() -> None:
    src = 'R"x(a "b" // )x" c; "s\\"q" \'\\n\' 1\'024 .5e+3 u8"t" // tail\n/* block\n#define Z */ d'
    got = [(kind, text) for kind, text, _ in _kinds(src)]
    assert got == [("ident", "c"), ("punct", ";"), ("number", "1'024"), ("number", ".5e+3"),
                   ("ident", "u8"), ("ident", "d")]


def test_punctuation_longest_first() -> None:
    got = [text for _, text, _ in _kinds("k<<<g, b>>>(x); a->*p; i <<= 2; y ... ::z")]
    assert got == ["k", "<<<", "g", ",", "b", ">>>", "(", "x", ")", ";", "a", "->*", "p", ";",
                   "i", "<<=", "2", ";", "y", "...", "::", "z"]


def test_index_lists_every_token_once_under_its_kind_and_text() -> None:
    src = _source(textwrap.dedent('''
        #include <torch/extension.h>
        #define N 4
        __global__ void k(float* x) { if (x[0] == 1) return; x[N] = 2; }
        torch::Tensor f(torch::Tensor y) { k<<<1, N>>>(y.data_ptr<float>()); return y; }
    '''))
    seen = []
    for kind, by_text in src.by_text.items():
        for text, found in by_text.items():
            assert found == sorted(found)
            for i in found:
                assert (src.tokens[i].kind, src.tokens[i].text) == (kind, text)
            seen += found
    assert sorted(seen) == list(range(len(src.tokens)))
    assert src.indices({"N", "define", "=="}) == [
        i for i, t in enumerate(src.tokens) if t.text in ("N", "define", "==")]
    assert src.has("using", "define") and not src.has("using", "namespace")


def test_functions_from_the_index_match_the_token_walk() -> None:
    src = _source(textwrap.dedent('''
        static int helper(int a, int b = (1 + 2)) { if (a) { return b; } return a; }
        __global__ void kern(float* out, int n) { for (int i = 0; i < n; ++i) { out[i] = 0; } }
        torch::Tensor run(torch::Tensor x) const { auto y = helper(1, 2); return x; }
        void unclosed(int q) { while (q) { q--;
    '''))
    by_walk = functions(src.tokens)
    by_index = functions(src.tokens, src.by_text)
    assert by_index == by_walk
    found = {fn.name: fn for fn in by_index}
    assert set(found) == {"helper", "kern", "run", "unclosed"}
    assert found["helper"].returns_params == {0, 1} and found["run"].returns_params == {0}
    assert found["kern"].is_kernel and found["unclosed"].body_end == len(src.tokens) - 1
