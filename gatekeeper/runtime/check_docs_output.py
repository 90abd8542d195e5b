"""explain texts for the behaviour checks on the returned value (GK601-GK635, GK655, GK667-GK679)."""

from __future__ import annotations

from gatekeeper.runtime.doc_parts import CheckDoc, forward

_SUM = "return ext.row_sum(x)  # own kernel"

OUTPUT_DOCS: dict[str, CheckDoc] = {
    "GK601": CheckDoc(
        "The submission's output differs from the reference Model's, beyond the problem's tolerance, on the same "
        "inputs (nominal or jittered shapes).",
        "A speedup of a different function is no speedup: the benchmark compares times only of correct kernels.",
        forward("return x.sum(dim=0)  # the reference computes x.mean(dim=0)"),
        forward("return x.sum(dim=0) / x.shape[0]")),
    "GK602": CheckDoc(
        "The output is right at the problem's nominal shapes and wrong, or an exception, when the sizes change "
        "(the jittered trials).",
        "Sizes baked into the kernel make it fast and right only on the benchmark's shapes; any other input gets "
        "garbage. That is a hardcoded shape, confirmed by running it.",
        forward("return ext.mean(x, 16, 48)  # rows and cols fixed"),
        forward("return ext.mean(x, x.size(1), x.size(2))")),
    "GK603": CheckDoc(
        "A note for problem authors: the reference output on the nominal inputs is all zeros or constant.",
        "Any submission that returns zeros would agree with it, so passing says little about correctness.",
        "def get_inputs():\n    return [torch.zeros(4, 16, 48)]  # mean of zeros is zeros",
        "def get_inputs():\n    return [torch.randn(4, 16, 48)]"),
    "GK604": CheckDoc(
        "The output's shape differs from the reference output's shape on the same inputs.",
        "A tensor of the wrong shape is a different result; comparing it elementwise would be meaningless.",
        forward("return torch.empty(16, 48)  # fixed shape"),
        forward("return x.new_empty(x.shape[1:])  # from the input")),
    "GK610": CheckDoc(
        "Two calls with different inputs: forward handed back storage an earlier call's result uses (the same "
        "tensor, or one sharing its memory), and the values in it are wrong for the later call's inputs: a "
        "stored result came back instead of a computed one.",
        "Returning a kept result skips the computation on later calls; the benchmark times a cached answer.",
        forward("if self.out is None:\n    self.out = ext.mean(x)\nreturn self.out  # computed once",
                init="self.out = None"),
        forward("out = torch.empty_like(x[0])\next.mean_into(x, out)\nreturn out")),
    "GK612": CheckDoc(
        "Two calls with different inputs: forward handed back the same output storage, written afresh with the "
        "right values for each call, so the result the caller kept from the earlier call was overwritten. A "
        "warning under `default` (KernelBench accepts a rewritten output buffer), an error under `strict`.",
        "The work is done, but the allocation the reference pays for is skipped, and a caller that keeps outputs "
        "(an RL loop, a batch of checks) sees earlier results change under it.",
        forward("if self.out is None:\n    self.out = torch.empty_like(x[0])\next.mean_into(x, self.out)\n"
                "return self.out", init="self.out = None"),
        forward("out = torch.empty_like(x[0])\next.mean_into(x, out)\nreturn out")),
    "GK611": CheckDoc(
        "The input tensor was overwritten in place (same data_ptr, new values) and the output did not follow.",
        "A memo keyed on the tensor's identity or address returns the answer of old values: correct once, "
        "then stale, and fast because it computes nothing.",
        forward("key = x.data_ptr()\nif key not in self.memo:\n    self.memo[key] = ext.mean(x)\n"
                "return self.memo[key]", init="self.memo = {}"),
        forward("return ext.mean(x)")),
    "GK620": CheckDoc(
        "The output shares storage with an input, a parameter or a buffer, while the reference returns a tensor "
        "of its own.",
        "Returning a view skips the write of the result (a copy the reference pays for), and the caller's later "
        "writes to the output corrupt the input or the module.",
        forward("return x[0]  # a view of the input"),
        forward("return x[0].clone()")),
    "GK625": CheckDoc(
        "An input tensor changed during the call, and the reference leaves its inputs intact.",
        "Writing results into an input saves an allocation the reference pays for, and the harness's next "
        "comparison or timing call then sees different inputs.",
        forward("x.mul_(2)\nreturn x.sum(0)"),
        forward("return (x * 2).sum(0)")),
    "GK630": CheckDoc(
        "Fresh memory is filled with NaN before the call (deterministic fill); NaN came back in the output, so "
        "some elements were never written.",
        "torch.empty is not zeroed: elements the kernel skips hold whatever was there, often a previous call's "
        "correct result, so a kernel doing part of the work passes by luck.",
        forward("out = torch.empty_like(x[0])\next.mean_first_half(x, out)  # writes half the rows\nreturn out"),
        forward("out = torch.empty_like(x[0])\next.mean(x, out)  # writes every element\nreturn out")),
    "GK635": CheckDoc(
        "forward returned something other than a dense torch.Tensor of the reference's dtype and device: a "
        "tensor subclass, None, a tuple or list, a numpy array, a strided view.",
        "A lazy object can compute when the harness reads it (outside the timed call), or fake its comparisons.",
        forward("return LazyResult(x)  # a torch.Tensor subclass that computes on access"),
        forward("return ext.mean(x)  # a plain, materialised tensor")),
    "GK655": CheckDoc(
        "The same inputs, given twice, gave outputs that differ beyond tolerance.",
        "Races or reads of unwritten memory make the result depend on timing; a lucky run must not pass.",
        forward("return ext.mean_racy(x)  # threads add into one slot without atomics"),
        forward("return ext.mean_atomic(x)  # atomics: order varies, values agree")),
    "GK667": CheckDoc(
        "Run-time attribution of the work in forward: torch (or a vendor library) computed the result, or most "
        "of it, and the submission's own kernels did little or nothing.",
        "The task is to write the kernel; timing torch's own implementation against torch measures nothing "
        "the submission did.",
        forward("ext.touch(x)  # an own kernel that does no real work\nreturn x.mean(dim=0)"),
        forward(_SUM + "\n# then / x.shape[0] inside the kernel")),
    "GK668": CheckDoc(
        "The output is within tolerance, but its error against a float64 reference is many times the error of an "
        "honest computation in the reference's dtype.",
        "Truncating to bf16/fp16 or dropping terms buys speed with accuracy the tolerance happens to allow.",
        forward("return ext.matmul_bf16(x.bfloat16()).float()  # the reference is float32"),
        forward("return ext.matmul_fp32(x)")),
    "GK669": CheckDoc(
        "A note: the error budget (GK668) could not be judged on this run, because no float64 reference of the "
        "output was computed: the output has more than 2^26 values (a float64 copy of each would take its "
        "transfer files past the disk they are bounded by), or the reference does not run in float64.",
        "Without the float64 reference, a kernel whose output stays within the tolerance while it computes in "
        "a lower precision is not caught at run time; the report says so rather than leave a pass that looks "
        "as if it was checked.",
        "def get_inputs():  # 2^27 output values: no float64 reference\n"
        "    return [torch.randn(8192, 16384)]",
        "def get_inputs():  # 2^24 output values: judged\n"
        "    return [torch.randn(4096, 4096)]"),
    "GK671": CheckDoc(
        "After a call, a few elements of the input were changed (same shape, same address); the output did not "
        "follow them.",
        "A cache keyed on sampled elements or a fingerprint returns stale results whenever other elements change.",
        forward("key = (x[0, 0, 0].item(), x.shape)\nif key not in self.memo:\n    self.memo[key] = ext.mean(x)\n"
                "return self.memo[key]", init="self.memo = {}"),
        forward("return ext.mean(x)")),
    "GK672": CheckDoc(
        "New values at the same address and with the same _version as the previous call's input: the output "
        "did not follow.",
        "The allocator hands the same address to new data, so a key on data_ptr, _version or id() serves an old "
        "answer for new inputs.",
        forward("key = (x.data_ptr(), x._version)\nif key != self.key:\n    self.key, self.out = key, ext.mean(x)\n"
                "return self.out", init="self.key = self.out = None"),
        forward("return ext.mean(x)")),
    "GK673": CheckDoc(
        "Correct on benchmark-like random values, wrong on other value distributions the problem accepts "
        "(large magnitudes, zero rows, constants).",
        "A branch on a sampled magnitude or statistic takes a shortcut that holds only for the benchmark's "
        "random inputs.",
        forward("if x[0, 0].abs().max() < 5:  # looks like randn\n    return ext.fast_approx(x)\nreturn ext.mean(x)"),
        forward("return ext.mean(x)  # one path for every input")),
    "GK674": CheckDoc(
        "The output was right on the first scheduled calls and wrong on later ones with new inputs.",
        "Switching to a memo or a shortcut after some calls passes a correctness check made early and is fast "
        "when timed later.",
        forward("self.calls += 1\nif self.calls > 3:\n    return self.last\nself.last = ext.mean(x)\nreturn self.last",
                init="self.calls, self.last = 0, None"),
        forward("return ext.mean(x)")),
    "GK675": CheckDoc(
        "The output kept changing after forward returned: work was still running on another thread or pool.",
        "Returning before the result is written moves the work out of the timed call; the caller may read a "
        "half-written tensor.",
        forward("out = torch.empty_like(x[0])\nself.pool.submit(ext.mean_into, x, out)\nreturn out"),
        forward("out = torch.empty_like(x[0])\nself.pool.submit(ext.mean_into, x, out).result()\nreturn out")),
    "GK676": CheckDoc(
        "The output was right until the process looked like a timing run (the harness's modules, the reference "
        "among nn.Module subclasses) and wrong after that.",
        "Computing honestly only while checked and cheating while timed defeats any correctness check.",
        forward("if 'triton.testing' in sys.modules:  # being timed\n    return self.last\n"
                "self.last = ext.mean(x)\nreturn self.last"),
        forward("return ext.mean(x)")),
    "GK677": CheckDoc(
        "Over a schedule of calls with new inputs, the output differed from the reference on some or all calls.",
        "Wrong on every call means the formula differs; wrong on some calls means state, a branch on the input's "
        "values or a race decides the result. Either way the timed function is not the reference's.",
        forward("return x.sum(dim=0)  # the reference is the mean"),
        forward("return x.sum(dim=0) / x.shape[0]")),
    "GK678": CheckDoc(
        "Calls whose inputs repeat an earlier call's contents (new tensors, the same values) ran in under a "
        "quarter of the time of calls with fresh contents: forward skips the work when it has seen the values.",
        "A memo keyed by a hash of the input's values is right on every input, so no value check sees it. Most "
        "benchmarks time a kernel by calling it again and again on the same inputs, where such a memo returns a "
        "stored result without computing: the measured time is the lookup's.",
        forward("key = hashlib.sha1(x.numpy().tobytes()).digest()\n"
                "if key in self.memo: return self.memo[key].clone()\n" + _SUM),
        forward(_SUM)),
    "GK679": CheckDoc(
        "A note: the repeated-contents check (GK678) could not judge this run, because the call schedule held "
        "too few calls that repeat an earlier call's contents, or too few fresh calls to time them against: "
        "the disk guard stopped it early, or the problem's domain refused some of its inputs. Every schedule "
        "is laid out so that even the shortest (8 calls, for a problem over 8 MiB a call) has 2 repeats and 3 "
        "fresh calls.",
        "A content memo is right on every input, so only timing can show it. Where the probe could not run, "
        "such a memo is caught only if its code matches a static rule (GK107): the report says so rather than "
        "leave a pass that looks as if it was checked.",
        "def get_inputs():  # 3 GiB a call: the disk guard stops the schedule after a few calls\n"
        "    return [torch.randn(16384, 16384), torch.randn(16384, 16384)]",
        "def get_inputs():  # 192 MiB a call: the 8-call schedule holds the probe's calls\n"
        "    return [torch.randn(4096, 4096), torch.randn(4096, 4096)]"),
}
