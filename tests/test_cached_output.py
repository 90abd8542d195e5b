"""Cached-output rules (GK1xx): what reaches forward's return, how sure each finding is,
and the sound caches and look-alikes they must leave alone. Real engine, all rules."""

import pytest

from gatekeeper.static.testing import static_findings

HEAD = "import torch\nimport torch.nn as nn\n"


def _mine(source: str, code: str, profile: str = "default"):
    return [f for f in static_findings(HEAD + source, profile=profile) if f.rule == code]


def test_stored_result_without_recompute_is_certain_error():
    src = ("class ModelNew(nn.Module):\n    def forward(self, x):\n        if self._y is not None:\n"
           "            return self._y\n        self._y = run(x)\n        return self._y\n")
    found = _mine(src, "GK101")
    assert [f.confidence.value for f in found] == ["certain"]
    assert found[0].severity.value == "error" and found[0].location.line == 6
    assert found[0].confirmed_by == "GK610"


def test_output_storage_rewritten_visibly_is_suspect_a_warning_outside_strict():
    src = ("class ModelNew(nn.Module):\n    def forward(self, a, b):\n        if self.out is None:\n"
           "            self.out = torch.empty(a.size(0), b.size(1), device=a.device)\n"
           "        torch.matmul(a, b, out=self.out)\n        return self.out\n")
    default = _mine(src, "GK101")
    assert [(f.confidence.value, f.severity.value) for f in default] == [("suspect", "warning")]
    assert "output storage reused" in default[0].message and "out=self.out" in default[0].message
    assert [f.severity.value for f in _mine(src, "GK101", "strict")] == ["error"]


def test_graph_replay_keyed_on_data_ptr_is_output_reuse_not_a_skipped_computation():
    src = ("class ModelNew(nn.Module):\n    def forward(self, x):\n        if self._ptr != x.data_ptr():\n"
           "            self._capture(x)\n            self._ptr = x.data_ptr()\n        self.graph.replay()\n"
           "        return self.static_out\n")
    findings = static_findings(HEAD + src)
    assert not [f for f in findings if f.rule in ("GK102", "GK111")]
    reuse = [f for f in findings if f.rule == "GK101"]
    assert [(f.confidence.value, f.evidence["write"]) for f in reuse] == [("suspect", "visible")]


def test_buffer_handed_to_extension_that_returns_it_is_likely():
    src = ("from torch.utils.cpp_extension import load_inline\n"
           "_e = load_inline(name='m', cpp_sources='torch::Tensor f(torch::Tensor x, torch::Tensor y) { k(x, y); return y; }', functions=['f'])\n"
           "class ModelNew(nn.Module):\n    def forward(self, x):\n        if self._y is None:\n"
           "            self._y = torch.empty_like(x)\n        return _e.f(x, self._y)\n")
    found = _mine(src, "GK101")
    assert [(f.confidence.value, f.severity.value) for f in found] == [("likely", "warning")]
    assert found[0].evidence["extension_function"] == "f" and found[0].confirmed_by == "GK610"
    assert [f.severity.value for f in _mine(src, "GK101", "strict")] == ["error"]


@pytest.mark.parametrize("src", [
    # lazy loader returns the module handle
    "_EXT = None\ndef _ext():\n    global _EXT\n    if _EXT is None:\n        _EXT = torch.utils.cpp_extension.load_inline(name='e', cpp_sources='', functions=['f'])\n"
    "    return _EXT\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return _ext().f(x)\n",
    # get_init_inputs returns a module-level list
    "SIZES = [1, 2]\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return run(x)\n"
    "def get_init_inputs():\n    return [SIZES]\n",
    # a helper returns a workspace that forward consumes
    "class ModelNew(nn.Module):\n    def _ws(self):\n        return self._workspace\n    def forward(self, x):\n"
    "        out = torch.empty_like(x)\n        run(x, self._ws(), out)\n        return out\n",
    # a shape helper on another class
    "class Shape:\n    def size(self):\n        return self._shape\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return run(x)\n",
    # rebound to a fresh value before the return
    "class ModelNew(nn.Module):\n    def forward(self, x):\n        self.h = run(x, self.h)\n        return self.h\n",
])
def test_persistent_values_that_are_not_forwards_output_are_not_gk101(src):
    assert _mine(src, "GK101", "strict") == []


def test_gk101_follows_helpers_tuples_and_factories():
    helper = ("class ModelNew(nn.Module):\n    def _get(self, x):\n        if self._c is None:\n            self._c = run(x)\n"
              "        return self._c\n    def forward(self, x):\n        out = self._get(x)\n        return out, x\n")
    assert [f.location.line for f in _mine(helper, "GK101")] == [7]
    factory = ("def make():\n    box = {}\n    def go(x):\n        if 'r' not in box:\n            box['r'] = run(x)\n"
               "        return box['r']\n    return go\n_go = make()\nclass ModelNew(nn.Module):\n"
               "    def forward(self, x):\n        return _go(x)\n")
    found = _mine(factory, "GK101")
    assert len(found) == 1 and "closure variable box" in found[0].message


def test_call_counter_is_the_real_counter_only():
    honest = ("import collections.abc\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        n = 0\n"
              "        for _ in range(3):\n            n += 1\n        x = x + n\n"
              "        if isinstance(x, collections.abc.Iterable):\n            return run(x)\n"
              "        if x.is_cuda:\n            return run(x)\n        return x\n")
    assert _mine(honest, "GK104", "strict") == []
    warmup = ("class ModelNew(nn.Module):\n    def forward(self, x):\n        if self.warm < 3:\n            self.warm += 1\n"
              "            return slow(x)\n        return fast(x)\n")
    found = _mine(warmup, "GK104")
    assert [(f.confidence.value, f.severity.value) for f in found] == [("suspect", "warning")]
    armed = ("class ModelNew(nn.Module):\n    def forward(self, x):\n        self.k += 1\n        if self.k > 5:\n"
             "            return self.last\n        self.last = run(x)\n        return self.last\n")
    assert [f.confidence.value for f in _mine(armed, "GK104")] == ["certain"]


def test_counter_advanced_only_at_construction_is_not_a_call_counter():
    src = ("class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.k = 0\n"
           "        self.k += 1\n    def forward(self, x):\n        if self.k:\n            return run(x)\n        return x\n")
    assert _mine(src, "GK104", "strict") == []


def test_version_keyed_weight_cache_is_careful_but_a_version_keyed_result_memo_is_not():
    careful = ("class ModelNew(nn.Module):\n    def forward(self, x):\n        w = self.weight\n"
               "        key = (w.data_ptr(), w._version, w.shape, w.dtype)\n        if key != self._key:\n"
               "            self._wt = w.t().contiguous()\n            self._key = key\n        return mm(x, self._wt)\n")
    assert _mine(careful, "GK102", "strict") == [] and _mine(careful, "GK101", "strict") == []
    memo = ("_R = {}\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        key = (x.data_ptr(), x._version, x.shape)\n"
            "        if key in _R:\n            return _R[key]\n        _R[key] = y = run(x)\n        return y\n")
    found = _mine(memo, "GK102")
    assert [(f.confidence.value, f.severity.value) for f in found] == [("certain", "error")]


def test_identity_memo_with_is():
    src = ("class ModelNew(nn.Module):\n    def forward(self, x):\n        if x is self._seen:\n"
           "            return self._out\n        self._seen = x\n        self._out = run(x)\n        return self._out\n")
    found = _mine(src, "GK106")
    assert [(f.confidence.value, f.severity.value, f.location.line) for f in found] == [("certain", "error", 5)]
    prep = ("class ModelNew(nn.Module):\n    def forward(self, x, bias=None):\n        if bias is None:\n            bias = self.b\n"
            "        if x is not self._seen:\n            self._seen = x\n        return run(x, bias)\n")
    assert _mine(prep, "GK106", "strict") == []


def test_content_keyed_cache_returned_through_a_copy():
    src = ("class ModelNew(nn.Module):\n    def forward(self, x):\n        key = (x[0, 0].item(), x.sum().item())\n"
           "        out = torch.empty_like(x)\n        hit = self._memo.get(key)\n        if hit is not None:\n"
           "            out.copy_(hit)\n            return out\n        run(x, out)\n        self._memo[key] = out.clone()\n"
           "        return out\n")
    found = _mine(src, "GK107")
    assert len(found) == 1 and found[0].confidence.value == "certain" and "item()" in found[0].message
    config = ("class ModelNew(nn.Module):\n    def forward(self, x):\n        cfg = self._cfg.get(x[0, 0].item() > 1)\n"
              "        out = torch.empty_like(x)\n        run(x, out, cfg)\n        return out\n")
    assert _mine(config, "GK107", "strict") == []


def test_graph_copy_from_an_input_derived_local_counts_as_fresh_input():
    src = ("class ModelNew(nn.Module):\n    def forward(self, x):\n        xin = x.contiguous()\n"
           "        self.sx.copy_(xin)\n        self.g.replay()\n        return self.sy.clone()\n")
    assert _mine(src, "GK111", "strict") == []
    stale = ("class ModelNew(nn.Module):\n    def forward(self, x):\n        self.g.replay()\n        return self.sy.clone()\n")
    assert len(_mine(stale, "GK111")) == 1


def test_copy_of_a_shape_keyed_stored_result_is_certain():
    src = ("class ModelNew(nn.Module):\n    def forward(self, x):\n        k = tuple(x.shape)\n        if k in self._res:\n"
           "            return self._res[k].clone()\n        y = run(x)\n        self._res[k] = y\n        return y\n")
    found = _mine(src, "GK101")
    assert [(f.confidence.value, f.location.line) for f in found] == [("certain", 7)]
    assert "copy of self._res" in found[0].message


def test_result_kept_on_the_input_object_is_identity_caching():
    src = ("class ModelNew(nn.Module):\n    def forward(self, x):\n        hit = getattr(x, '_r', None)\n"
           "        if hit is not None:\n            return hit.clone()\n        y = run(x)\n        x._r = y\n        return y\n")
    found = _mine(src, "GK106")
    assert len(found) == 1 and "x._r" in found[0].message
    honest = ("class ModelNew(nn.Module):\n    def forward(self, x):\n        n = getattr(x, 'shape')\n        return run(x, n)\n")
    assert _mine(honest, "GK106", "strict") == []


CPP = "src = '''\n#include <torch/extension.h>\n#include <unordered_map>\ntorch::Tensor f(torch::Tensor x) {\n{body}}}\n'''\n"


def test_cpp_static_table_entry_returned_is_a_result_memo_but_a_used_static_workspace_is_not():
    memo = ("  static std::unordered_map<uint64_t, torch::Tensor> table;\n  uint64_t key = fp(x);\n"
            "  auto hit = table.find(key);\n  if (hit != table.end()) return hit->second.clone();\n"
            "  auto y = torch::empty_like(x);\n  table[key] = y;\n  return y;\n")
    found = [f for f in static_findings(CPP.replace("{body}", memo)) if f.rule == "GK105"]
    assert len(found) == 1 and "hit->second.clone()" in found[0].message
    workspace = ("  static torch::Tensor ws;\n  if (!ws.defined()) ws = torch::empty({1024}, x.options());\n"
                 "  auto out = at::add(x, ws);\n  return out;\n")
    assert not [f for f in static_findings(CPP.replace("{body}", workspace), profile="strict") if f.rule == "GK105"]


def test_reference_class_sniffed_through_a_helper_handed_to_the_extension():
    src = ("def _timed():\n    return any(c.__name__ == 'Model' for c in nn.Module.__subclasses__())\n"
           "class ModelNew(nn.Module):\n    def forward(self, x):\n        return _ext.f(x, _timed())\n")
    found = _mine(src, "GK110")
    assert len(found) == 1 and "_timed()" in found[0].message and "__subclasses__" in found[0].message
    init_only = ("def _timed():\n    return any(c.__name__ == 'Model' for c in nn.Module.__subclasses__())\n"
                 "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.flag = _timed()\n"
                 "    def forward(self, x):\n        return _ext.f(x)\n")
    assert _mine(init_only, "GK110", "strict") == []


def test_static_tensor_copied_out_is_likely_but_computing_from_it_is_not_flagged():
    copy = "  static torch::Tensor last;\n  if (last.defined()) return last.clone();\n  last = g(x);\n  return last.clone();\n"
    found = [f for f in static_findings(CPP.replace("{body}", copy)) if f.rule == "GK105"]
    assert found and all(f.confidence.value == "likely" for f in found)
    weight = "  static torch::Tensor wt;\n  if (!wt.defined()) wt = x.t().contiguous();\n  return wt.mm(x);\n"
    assert not [f for f in static_findings(CPP.replace("{body}", weight), profile="strict") if f.rule == "GK105"]


# Issue 20: "certain: no write" holds only when nothing on the way can write the buffer.
KEPT = ("class ModelNew(nn.Module):\n    def forward(self, x):\n        if self.y is None:\n"
        "            self.y = torch.empty_like(x)\n            self.bufs = (self.y,)\n")


def _gk101(body: str, profile: str = "default"):
    return [(f.confidence.value, f.evidence.get("write")) for f in _mine(KEPT + body, "GK101", profile)]


@pytest.mark.parametrize("body, want", [
    # through a tuple kept on self, handed to a launch helper on every call
    ("        run((x, *self.bufs))\n        return self.y\n", ("likely", "opaque")),
    # through a local container
    ("        bufs = (x, self.y)\n        run(bufs)\n        return self.y\n", ("likely", "opaque")),
    # in every arm of an if/elif/else
    ("        if x.size(1) > 64:\n            k1[(1,)](x, self.y)\n        elif x.size(1) > 8:\n"
     "            k2[(1,)](x, self.y)\n        else:\n            k3[(1,)](x, self.y)\n        return self.y\n",
     ("likely", "opaque")),
    # in one arm only, under a test of the input: it may or may not run
    ("        if x.size(1) > 64:\n            k1[(1,)](x, self.y)\n        return self.y\n", ("likely", "maybe")),
    # in a loop body
    ("        for c in range(x.size(0)):\n            k1[(1,)](x[c], self.y)\n        return self.y\n",
     ("likely", "maybe")),
    # a stored callable (a bound graph replay) runs first
    ("        self.plan[0]()\n        return self.y\n", ("likely", "maybe")),
    # a registered custom op (torch.ops.*) may write what it is handed, unlike torch's own functions
    ("        torch.ops.mylib.softmax_out(x, self.y)\n        return self.y\n", ("likely", "opaque")),
    # torch told to write in place
    ("        torch.nn.functional.relu(self.y, inplace=True)\n        return self.y\n", ("likely", "opaque")),
    # a helper handed the module itself
    ("        refresh(self, x)\n        return self.y\n", ("likely", "opaque")),
])
def test_writes_the_analysis_cannot_rule_out_make_gk101_likely_not_certain(body, want):
    assert _gk101(body) == [want]
    assert [f.severity.value for f in _mine(KEPT + body, "GK101", "strict")] == ["error"]


@pytest.mark.parametrize("body", [
    # the launch is only inside the first-call guard (an alias of the buffer changes nothing)
    "        buf = self.y\n        return buf\n",
    # both arms write, but only under the fill guard
    "        if self.y is None:\n            if x.size(1) > 64:\n                k1[(1,)](x, self.y)\n"
    "            else:\n                k2[(1,)](x, self.y)\n        return self.y\n",
    # a fresh value bound in another arm: on this path the stored tensor is returned unwritten
    "        out = self.y\n        if x.size(0) > 4:\n            out = torch.zeros_like(x)\n        return out\n",
    # a Triton launch and torch reads that are not handed the buffer cannot write it
    "        s = torch.empty(4)\n        k1[(1,)](x, s)\n        n = self.y.numel()\n        return self.y\n",
])
def test_stored_output_with_nothing_that_can_write_it_stays_certain(body):
    assert _gk101(body) == [("certain", "none")]


def test_extension_call_counts_as_a_possible_write_only_once_the_buffer_went_native():
    base = ("class ModelNew(nn.Module):\n    def forward(self, x):\n        if self.y is None:\n"
            "            self.y = torch.empty_like(x)\n{fill}        _ext.sync()\n        return self.y\n")
    registered = base.format(fill="            _ext.register(self.y)\n")
    assert [f.confidence.value for f in _mine(registered, "GK101")] == ["likely"]
    never = base.format(fill="            self.y.copy_(x)\n")
    assert [f.confidence.value for f in _mine(never, "GK101")] == ["certain"]


def test_identity_plan_is_certain_unless_a_stored_replay_runs_first():
    plan = ("class ModelNew(nn.Module):\n    def forward(self, x):\n        p = self._plan\n"
            "        if p is not None and x is p[0]:\n{call}            return p[2]\n        y = run(x)\n"
            "        self._plan = (x, None, y)\n        return y\n")
    stale = _mine(plan.format(call=""), "GK106")
    assert [(f.confidence.value, f.severity.value) for f in stale] == [("certain", "error")]
    replayed = _mine(plan.format(call="            p[1]()\n"), "GK106")
    assert [(f.confidence.value, f.severity.value) for f in replayed] == [("likely", "warning")]
    assert replayed[0].confirmed_by == "GK611"


GRAPH = ("class ModelNew(nn.Module):\n    def forward(self, x):\n        if self.g is not None and x is self.seen:\n"
         "            self.g.replay()\n            return self.out\n        self.out = torch.empty_like(x)\n"
         "        self.g, self.seen = torch.cuda.CUDAGraph(), x\n{copy}        with torch.cuda.graph(self.g):\n"
         "            k[(1,)]({arg}, self.out)\n        self.g.replay()\n        return self.out\n")


def test_graph_keyed_on_the_input_object_it_was_captured_on_is_not_gk111_but_a_copy_is():
    assert _mine(GRAPH.format(copy="", arg="x"), "GK111", "strict") == []
    found = _mine(GRAPH.format(copy="        self.sx = x.clone()\n", arg="self.sx"), "GK111")
    assert found and all(f.severity.value == "error" for f in found)


CPP_GETTER = ("src = '''\n#include <torch/extension.h>\ntorch::Tensor& buf(torch::Tensor x) {{\n"
              "  static torch::Tensor b = torch::empty_like(x);\n  return b;\n}}\n"
              "torch::Tensor f(torch::Tensor x) {{\n{body}}}\n'''\n")


@pytest.mark.parametrize("body, want", [
    # scratch: the getter's result is only used (a pointer handed to the kernel)
    ("  auto y = torch::empty_like(x);\n  k(x.data_ptr<float>(), y.data_ptr<float>(), buf(x).data_ptr<float>());\n"
     "  return y;\n", []),
    # the getter's static is what the exported function returns
    ("  return buf(x);\n", ["certain"]),
    # kept in a variable and returned, but the kernel writes it on every call first: output storage
    # reused with fresh values, as a static written in place is (likely; GK610/GK612 settle it)
    ("  auto& o = buf(x);\n  k(x.data_ptr<float>(), o.data_ptr<float>());\n  return o;\n", ["likely"]),
    # kept and returned with no write on the way: the first call's storage and contents
    ("  auto& o = buf(x);\n  return o;\n", ["certain"]),
])
def test_cpp_getter_of_a_static_tensor_is_flagged_only_when_its_result_can_reach_python(body, want):
    found = [f for f in static_findings(CPP_GETTER.format(body=body), profile="strict") if f.rule == "GK105"]
    assert [f.confidence.value for f in found] == want


def test_cpp_static_output_rewritten_every_call_is_likely_filled_once_is_certain():
    rewritten = ("  static torch::Tensor out;\n  if (!out.defined()) out = torch::empty_like(x);\n"
                 "  k(x.data_ptr<float>(), out.data_ptr<float>());\n  return out;\n")
    found = [f for f in static_findings(CPP.replace("{body}", rewritten)) if f.rule == "GK105"]
    assert [(f.confidence.value, f.severity.value) for f in found] == [("likely", "warning")]
    once = ("  static torch::Tensor out;\n  if (!out.defined()) {\n    out = torch::empty_like(x);\n"
            "    k(x.data_ptr<float>(), out.data_ptr<float>());\n  }\n  return out;\n")
    found = [f for f in static_findings(CPP.replace("{body}", once)) if f.rule == "GK105"]
    assert [(f.confidence.value, f.severity.value) for f in found] == [("certain", "error")]


@pytest.mark.parametrize("src, want", [
    # a dict entry, an alias and a module global, each filled on the first call only: certain
    ("class ModelNew(nn.Module):\n    def forward(self, x):\n        if 'o' not in self.c:\n"
     "            self.c['o'] = torch.empty_like(x)\n            k[(1,)](x, self.c['o'])\n        return self.c['o']\n",
     ("certain", "error")),
    ("class ModelNew(nn.Module):\n    def forward(self, x):\n        out = self._out\n        if out is None:\n"
     "            out = self._out = torch.empty_like(x)\n            k[(1,)](x, out)\n        return out\n",
     ("certain", "error")),
    ("_O = None\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        global _O\n        if _O is None:\n"
     "            _O = torch.empty_like(x)\n            k[(1,)](x, _O)\n        return _O\n", ("certain", "error")),
    # the same three rewritten on every call: reused storage, a warning under default
    ("class ModelNew(nn.Module):\n    def forward(self, x):\n        if 'o' not in self.c:\n"
     "            self.c['o'] = torch.empty_like(x)\n        k[(1,)](x, self.c['o'])\n        return self.c['o']\n",
     ("likely", "warning")),
    ("class ModelNew(nn.Module):\n    def forward(self, x):\n        out = self._out\n        if out is None:\n"
     "            out = self._out = torch.empty_like(x)\n        k[(1,)](x, out)\n        return out\n",
     ("likely", "warning")),
    ("class ModelNew(nn.Module):\n    def forward(self, x):\n        if self.bufs is None:\n"
     "            self.bufs = [torch.empty_like(x)]\n        launch([x] + self.bufs)\n        return self.bufs[0]\n",
     ("likely", "warning")),
])
def test_hack_spellings_stay_certain_and_their_rewritten_twins_are_warnings(src, want):
    assert [(f.confidence.value, f.severity.value) for f in _mine(src, "GK101")] == [want]



def test_scheduled_calls_split_reused_storage_from_stale_values():
    """The previous call's output storage coming back on a scheduled call: GK612 when the
    values were right for that call, GK610 when they were not (the judge's correctness)."""
    from gatekeeper.behaviour.schedule_checks import judge_calls

    threads = {"python_threads": 1, "os_threads": 3, "children": 0}
    calls = [{"kind": "schedule-call", "index": i, "aliases": ["the output of the previous call"] if i else [],
              "mutated": [], "threads_before": threads, "threads_after": threads} for i in range(6)]

    def codes(correct):
        found = {}
        judge_calls(calls, {}, lambda code, trial, evidence, **f: found.setdefault(code, evidence), correct)
        return found

    assert set(codes({i: True for i in range(6)})) == {"GK612"}
    stale = codes({i: i < 3 for i in range(6)})
    assert set(stale) == {"GK610"} and stale["GK610"]["calls"] == [3, 4, 5]
    assert set(codes(None)) == {"GK610"}  # no correctness known: not shown to be fresh


GETTER = ("class ModelNew(nn.Module):\n    def _buffer(self, x):\n"
          "        if self._out is None or self._out.shape != x.shape:\n            self._out = torch.empty_like(x)\n"
          "        return self._out\n    def forward(self, x):\n        out = self._buffer(x)\n")


@pytest.mark.parametrize("body, want", [
    # the caller hands the getter's buffer to a kernel (whole, or as row slices in a loop)
    ("        _k[(x.shape[0],)](x, out, x.shape[1])\n        return out\n", ("likely", "opaque")),
    ("        for r in range(0, x.shape[0], 4):\n            _k[(4,)](x[r:], out[r:])\n        return out\n",
     ("likely", "maybe")),
    ("        out.copy_(x * 2)\n        return out\n", ("suspect", "visible")),
    # nothing the caller does can write it: reads, torch ops on it, another tensor launched
    ("        print(out.shape)\n        n = torch.sum(out)\n        _k[(1,)](x, torch.empty(1))\n        return out\n",
     ("certain", "none")),
    ("        return out\n", ("certain", "none")),
])
def test_a_getters_buffer_is_written_by_what_its_caller_hands_it_to(body, want):
    found = [(f.confidence.value, f.evidence.get("write")) for f in _mine(GETTER + body, "GK101")]
    assert found == [want], found


_MEMO = ("_BOX = [None, None]\n"
         "def _run(x, {param}):\n    key = x.numpy().tobytes()\n    if box[0] != key:\n"
         "        box[0], box[1] = key, _ext.mean(x){keep}\n    return {ret}\n"
         "class ModelNew(nn.Module):\n    def forward(self, x):\n        return _run(x)\n")


@pytest.mark.parametrize("param", ["box=[None, None]", "box={}", "box=_BOX"])
@pytest.mark.parametrize("keep, ret", [("", "box[1]"), (".numpy().copy()", "torch.from_numpy(box[1].copy())")])
def test_a_memo_kept_in_a_mutable_default_argument_is_persistent_storage(param, keep, ret):
    # a default value is made once, when `def` runs, and every call shares it
    source = _MEMO.format(param=param, keep=keep, ret=ret)
    found = _mine(source, "GK101")
    assert found and found[0].confidence.value == "certain", [f.message for f in found]
    assert "box" in found[0].message.lower()  # default argument box, or module global _BOX


def test_an_argument_defaulting_to_none_or_a_number_is_not_storage():
    source = ("def _run(x, out=None, scale=1.0):\n    if out is None:\n        out = torch.empty_like(x)\n"
              "    _k[(1,)](x, out, scale)\n    return out\n"
              "class ModelNew(nn.Module):\n    def forward(self, x):\n        return _run(x)\n")
    assert _mine(source, "GK101") == []
