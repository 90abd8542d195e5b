from __future__ import annotations

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.cpp_output_memo import output_memos
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet


class CopiesOutputThroughStaticStorage(Rule):
    """The C++ side copies a call's output values into storage that outlives the call (a
    `static` or `thread_local` variable, or one declared at namespace scope) and copies that
    storage into the output of a later call: `keep.assign(dst, dst + n)` in one place and
    `memcpy(dst, keep.data(), ...)` in another, `std::copy`, element loops (`prev[i] = y[i]`,
    `y[i] = prev[i]`) or `copy_` alike.

    Why it games the benchmark: the output of a later call is an earlier call's result, not
    computed from its inputs. Whatever decides when to replay (the shapes match, the thread
    count, the call rate, the host name, a file descriptor, the input's address and version
    counter), the checker cannot rely on seeing the replay: code that tells a checked call
    from a timed one computes honestly only while checked. The values round-tripping
    through persistent storage are the hack, whatever the trigger: certain in every reading,
    since a kernel computes its output from its inputs.

    Not flagged: static scratch workspaces and plan tables filled from the inputs or used as
    operands (`ws[i] = x[i] * s; y[i] = ws[i] + b[i]` reads an operand computed in this call,
    not a stored output); a static output tensor returned (GK105); statics that only hold
    sizes, handles or launch configurations.
    """

    code = "GK109"
    name = "CopiesOutputThroughStaticStorage"
    category = Category.CACHED_OUTPUT
    severity = Severity.ERROR
    summary = "C++ copies an earlier call's output, kept in static storage, into a later output"
    message = ("The extension copies output values into `{name}`, storage that outlives the call (line: `{store}`), "
               "and copies `{name}` into an output here: a later call returns an earlier call's result instead of "
               "computing it from its inputs.")
    hint = ("Compute every output from the call's inputs. Keep only scratch data in static storage, and never copy "
            "an output into it to hand back later.")

    VALID = [
        # a static workspace filled from the inputs and read as an operand in the same call
        Valid(snippet("""
            src = '''
            #include <torch/extension.h>
            #include <vector>
            static std::vector<float> ws;
            torch::Tensor f(torch::Tensor x) {
              auto y = torch::empty_like(x);
              float* dst = y.data_ptr<float>();
              const float* src = x.data_ptr<float>();
              ws.resize(x.numel());
              for (int64_t i = 0; i < x.numel(); ++i) ws[i] = src[i] * 2.f;
              for (int64_t i = 0; i < x.numel(); ++i) dst[i] = ws[i] + 1.f;
              return y;
            }
            '''
        """)),
        # the previous output kept for a debug print is never copied back
        Valid(snippet("""
            src = '''
            #include <torch/extension.h>
            #include <vector>
            static std::vector<float> last;
            torch::Tensor f(torch::Tensor x) {
              auto y = x * 2;
              float* dst = y.data_ptr<float>();
              last.assign(dst, dst + y.numel());
              return y;
            }
            '''
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            src = '''
            #include <torch/extension.h>
            #include <cstring>
            #include <vector>
            static std::vector<float> prev; static int64_t seen = -1;
            torch::Tensor f(torch::Tensor x) {
              auto y = torch::empty_like(x);
              float* dst = y.data_ptr<float>();
              if (at::get_num_threads() > 1 && x.numel() == seen) { std::memcpy(dst, prev.data(), seen * 4); return y; }
              k(x.data_ptr<float>(), dst, x.numel());
              prev.assign(dst, dst + x.numel()); seen = x.numel();
              return y;
            }
            '''
        """), line=9, message="copies output values into `prev`"),
        # at namespace scope, element loops both ways
        Invalid(snippet("""
            src = '''
            #include <torch/extension.h>
            namespace {
            float keep[4096];
            }
            torch::Tensor f(torch::Tensor x, bool again) {
              auto y = torch::empty_like(x);
              float* out = y.data_ptr<float>();
              if (again) {
                for (int i = 0; i < 4096; ++i) out[i] = keep[i];
                return y;
              }
              k(x.data_ptr<float>(), out);
              for (int i = 0; i < 4096; ++i) keep[i] = out[i];
              return y;
            }
            '''
        """), line=10, message="copies output values into `keep`"),
    ]

    def check_cpp(self, source: CppSource) -> None:
        for store, replay in output_memos(source):
            self.report_cpp(source, replay.offset,
                            self.message.format(name=store.name, store=source.line_in_source(store.offset)[:80]),
                            evidence={"static": store.name})
