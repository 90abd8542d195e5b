"""A name hidden behind an object-like macro, in the source (`#define ROW_KERNEL sgemm_`) or in
the build's flags (`extra_cflags=["-DROW_KERNEL=sgemm_"]`), reads as the name it hides (red team
round 6, h06b and h10): the C++ checks see the call it makes."""

from __future__ import annotations

from gatekeeper.static.cpp_tokens import expand_aliases, name_aliases, tokenize
from gatekeeper.static.testing import static_findings

BODY = '''
extern "C" void ROW_KERNEL(const char*, const char*, const int*, const int*, const int*, const float*,
                           const float*, const int*, const float*, const int*, const float*, float*, const int*);
torch::Tensor mm(torch::Tensor a, torch::Tensor b) {
  auto c = torch::empty({a.size(0), b.size(1)}, a.options());
  int n = a.size(0), k = a.size(1), m = b.size(1); float one = 1, zero = 0;
  ROW_KERNEL("N", "N", &m, &n, &k, &one, b.data_ptr<float>(), &m, a.data_ptr<float>(), &k, &zero,
             c.data_ptr<float>(), &m);
  return c;
}
'''

SUBMISSION = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
_src = r"""DEFINE""" + r"""BODY"""
_ext = load_inline(name="alias", cpp_sources=_src, functions=["mm"], extra_cflags=FLAGS)
class ModelNew(nn.Module):
    def forward(self, a, b):
        return _ext.mm(a, b)
'''


def _vendor_calls(define: str, flags: str) -> list:
    source = SUBMISSION.replace("DEFINE", define).replace("BODY", BODY).replace("FLAGS", flags)
    return [f for f in static_findings(source) if f.rule == "GK307"]


def test_a_define_in_the_source_names_the_call_it_hides():
    found = _vendor_calls("#define ROW_KERNEL sgemm_\n", '["-O3"]')
    assert found and "`sgemm_`" in found[0].message


def test_a_define_in_the_build_flags_names_it_too():
    assert _vendor_calls("", '["-O3", "-DROW_KERNEL=sgemm_"]')
    assert _vendor_calls("", '["-O3", "-D", "ROW_KERNEL=sgemm_"]')


def test_an_own_function_behind_a_define_is_not_a_library_call():
    own = BODY.replace('extern "C" void ROW_KERNEL(', 'static void own_rows(').replace(
        "const int*);", "const int*) {}")
    source = SUBMISSION.replace("DEFINE", "#define ROW_KERNEL own_rows\n").replace("BODY", own).replace("FLAGS", "[]")
    assert not [f for f in static_findings(source) if f.rule == "GK307"]


def test_only_name_bodies_are_expanded_and_the_define_line_stays():
    text = ("#define OP my::matmul\n#define AT_OP at::mean\n#define BLOCK 256\n#define SELF SELF\n"
            "OP(a, b); int x = BLOCK; SELF; AT_OP(a);")
    raw = tokenize(text)
    aliases = name_aliases(text, {"FLAG_OP": "torch::mm"})
    # an ATen name behind a #define is cpp_aten_reach's ("through the macro AT_OP"); a -D flag's is expanded
    assert aliases == {"OP": ["my", "::", "matmul"], "FLAG_OP": ["torch", "::", "mm"]}
    texts = [t.text for t in expand_aliases(raw, aliases)]
    assert texts[:2] == ["define", "OP"]  # the definition keeps its name
    use = texts.index("(")
    assert texts[use - 3: use + 1] == ["my", "::", "matmul", "("]  # the use reads as the call it hides
    assert texts.count("BLOCK") == 2 and texts.count("SELF") == 3  # numbers and self-references stay
