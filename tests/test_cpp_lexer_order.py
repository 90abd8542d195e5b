"""The C++ lexer tries its common alternatives first (identifiers, numbers, single
punctuation) for speed. It must give exactly the tokens of the plain ordering below
(directive, dropped text, raw string, identifier, number, punctuation). The lexer proper is
`_tokenize`: `tokenize` first joins backslash-newlines (translation phase 2), which the plain
ordering does not do."""

import random
import re

from gatekeeper.static.cpp_tokens import _SKIP, Token, _tokenize as tokenize

PLAIN = re.compile(
    r"""(?:
      ((?:\A|\\?\n)[ \t]*\#[ \t]*[A-Za-z_]\w*)
    | _SKIP++
    | \\?\n[ \t]*
    | R"([^()\s\\]{0,16})\(.*?\)\2"
    | ([A-Za-z_]\w*)
    | (\.?\d(?:[eEpP][+-]|[\w.'])*)
    | (<<<|>>>|<<=|>>=|\.\.\.|->\*|::|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||\+=|-=|\*=|/=|%=|&=|\|=|\^=|\#\#|.)
    ) _SKIP*+""".replace("_SKIP", _SKIP),
    re.X | re.S,
)
KINDS = {3: "ident", 4: "number", 5: "punct"}


def plain_tokens(src: str) -> list[Token]:
    out = []
    for match in PLAIN.finditer(src):
        kind = match.lastindex
        if kind in KINDS:
            out.append(Token(KINDS[kind], match[kind], match.start()))
        elif kind == 1:
            text = match[1]
            hash_at = text.index("#")
            out.append(Token("directive", text[hash_at + 1:].strip(), match.start() + hash_at))
    return out


PIECES = ['R"', 'R"x(', ')x"', 'R"(', ')"', '"', "'", "\\", "\n", "#", " ", "\t", "/*", "*/", "//", "a", "R",
          "1", ".", "0x1f", "e+", "<<<", ">>", "::", "-", "x", "(", ")", "define", "u8", "\r", "é", ";", "{", "~", "?"]


def test_fuzzed_sources_lex_as_in_the_plain_ordering():
    rng = random.Random(7)
    for _ in range(40_000):
        src = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 25)))
        assert tokenize(src) == plain_tokens(src), src


def test_a_kernel_lexes_as_in_the_plain_ordering():
    src = r'''#include <torch/extension.h>
#define TILE 32
__global__ void k(const float* __restrict__ x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // index
    if (i < n) { y[i] = x[i] > 0.f ? x[i] : 1e-3f * x[i]; }
    auto s = R"raw(a "quoted" )raw"; char c = '\''; /* done */
}
torch::Tensor f(torch::Tensor x) { k<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), x.data_ptr<float>(), 0); return x; }
'''
    assert tokenize(src) == plain_tokens(src)
    assert [t.text for t in tokenize(src)][:4] == ["include", "<", "torch", "/"]


def test_tokens_after_splicing_point_at_their_text_as_written():
    from gatekeeper.static.cpp_tokens import tokenize as spliced_tokenize

    rng = random.Random(11)
    for _ in range(20_000):
        src = "".join(rng.choice(PIECES + ["\\\n", "\\\r\n"]) for _ in range(rng.randint(0, 25)))
        joined = src.replace("\\\r\n", "").replace("\\\n", "")
        got = spliced_tokenize(src)
        assert [(t.kind, t.text) for t in got] == [(t.kind, t.text) for t in tokenize(joined)], src
        for tok in got:
            if tok.kind != "directive":
                written = src[tok.offset:].replace("\\\r\n", "").replace("\\\n", "")
                assert written.startswith(tok.text), (src, tok)
