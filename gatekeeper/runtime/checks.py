"""Catalogue of the run-time checks (build and behaviour stages): one entry per code, and `finding()`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from gatekeeper.report import Category, Finding, Location, Severity, StageName


@dataclass(frozen=True)
class Check:
    code: str
    name: str
    category: Category
    severity: Severity
    message: str  # may contain {placeholders} filled from the evidence
    hint: str
    # Severity under `strict` where it differs: a policy question, a warning by default.
    strict_severity: Optional[Severity] = None
    lenient_severity: Optional[Severity] = None  # under `lenient`, where it differs (docs/profiles.md)

    def severity_for(self, profile: str) -> Severity:
        if profile == "strict" and self.strict_severity is not None:
            return self.strict_severity
        if profile == "lenient" and self.lenient_severity is not None:
            return self.lenient_severity
        return self.severity


C = Category
E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO

CATALOGUE: dict[str, Check] = {c.code: c for c in [
    Check("GK601", "IncorrectOutput", C.INCORRECT, E,
          "output differs from the reference on {trial}, input shapes {shapes}: {detail}",
          "compute the same function as the reference Model for every input; compare locally with "
          "torch.testing.assert_close against Model on several random inputs"),
    Check("GK602", "CorrectOnlyAtNominalShapes", C.HARDCODED_SHAPE, E,
          "output is correct at the nominal shapes but wrong on jittered shapes {shapes}: {detail}",
          "read every size from the input tensors (x.size(i), x.numel()) in Python and in the kernel; "
          "size the grid from them and guard the tail with `if (i < n)`"),
    Check("GK603", "ReferenceProvesLittle", C.INCORRECT, I,
          "the reference output on {trial} is {what}: agreeing with it proves little",
          "problem authors: draw inputs that give a varied output"),
    Check("GK604", "WrongOutputShape", C.INCORRECT, E,
          "output shape {got} differs from the reference shape {want} on {trial}",
          "allocate the output from the input sizes, e.g. torch.empty_like or x.new_empty(...)"),
    # Two calls with different inputs, and storage an earlier result uses comes back: GK610 when
    # the values are wrong for the later call (stale), GK612 when they are right (reused storage).
    Check("GK610", "ReturnsEarlierOutput", C.CACHED_OUTPUT, E,
          "on {trial}, {what}, and the values it holds are wrong for this call's inputs: forward handed back a "
          "result stored by an earlier call instead of computing this one",
          "allocate a fresh output tensor inside forward on every call and compute it from this call's inputs; "
          "never return a result kept on self, in a global or in a C++ static"),
    Check("GK612", "ReusesOutputStorage", C.CACHED_OUTPUT, W,
          "on {trial}, {what}; its values are right for this call's inputs, so the work was done, but a result "
          "the caller kept from an earlier call was overwritten (output storage reused)",
          "allocate the output on every call (`out = torch.empty_like(x)`), write it and return it; keep only "
          "scratch workspaces across calls. KernelBench accepts a rewritten output buffer; the `strict` profile "
          "(RL training) rejects it", strict_severity=E),
    Check("GK611", "IgnoresInputChange", C.CACHED_OUTPUT, E,
          "after the input was overwritten in place (same data_ptr), the output did not follow the new "
          "values: {detail}",
          "do not memoise on tensor identity, data_ptr or shape: compute from the values on every call"),
    Check("GK620", "OutputAliasesStorage", C.OUTPUT_ALIAS, E,
          "output shares storage with {what} on {trial}, and the reference does not",
          "return a newly allocated tensor; do not return a view of an input, a parameter or a buffer"),
    Check("GK625", "MutatesInput", C.INPUT_MUTATION, E,
          "input {index} changed during the call on {trial}, and the reference leaves it intact",
          "treat inputs as read-only; write results into a fresh output tensor"),
    Check("GK630", "UninitializedOutput", C.UNINITIALIZED_OUTPUT, E,
          "on {trial}, the output holds NaN or Inf where the reference's values are finite ({detail}): fresh memory "
          "was filled with NaN before the call, so these elements were never written, or were computed from memory "
          "that was never written",
          "write every element of the output and compute it only from values the kernel wrote (a block "
          "reduction's result must reach every thread that reads it); use torch.zeros only if zeros are part of "
          "the result"),
    Check("GK635", "NotAPlainTensor", C.LAZY_OUTPUT, E,
          "forward returned {what} on {trial}; the reference returns {want}",
          "return a dense, materialised torch.Tensor on the input's device with the reference dtype"),
    Check("GK640", "WorkOutlivesCall", C.STREAM_ESCAPE, E,
          "the output changed between a sync of the caller's stream and a full device sync on {trial}",
          "launch kernels on at::cuda::getCurrentCUDAStream(), or make the current stream wait for yours"),
    Check("GK641", "IgnoresStreamOrder", C.STREAM_ESCAPE, E,
          "{where} started with work still queued on the caller's current stream, which wrote its inputs, "
          "and forward returned wrong values ({detail}); the calls that started on an idle stream were right: "
          "work on another stream read the inputs before the current stream had written them. A timed call "
          "starts behind such work, so that side stream runs before the timer starts, or the call takes "
          "another path when the stream is busy",
          "make every stream the call uses wait for the current one before it reads the inputs "
          "(`side.wait_stream(torch.cuda.current_stream())`, or `cudaStreamWaitEvent` on an event recorded "
          "on `at::cuda::getCurrentCUDAStream()`), and never branch on whether the stream is busy"),
    Check("GK645", "ThreadLeftRunning", C.THREAD_INJECTION, E,
          "{what} after the call returned on {trial}",
          "do all the work inside forward and join any worker before returning; do not fork or start processes"),
    Check("GK650", "HarnessPatchedAtRunTime", C.HARNESS_TAMPERING, E,
          "harness-critical functions were replaced {when}: {names}",
          "do not assign to attributes of torch, time, builtins or the harness"),
    Check("GK655", "Nondeterministic", C.INCORRECT, E,
          "the same inputs gave different outputs on two calls: {detail}",
          "remove races (atomics in a different order are fine within tolerance; reading unwritten memory is not)"),
    Check("GK660", "RaisesAtRunTime", C.RUNTIME_FAILURE, E,
          "the submission raised {type} during {phase}: {message}",
          "run the module and ModelNew on the problem's inputs locally and fix the exception"),
    Check("GK661", "RunsOutOfTime", C.TIMEOUT, E,
          "the submission ran past the time limit: {detail}",
          "remove blocking waits and infinite loops; heavy work at import time also counts (an honest module "
          "that needs longer: raise import_timeout_s or call_timeout_s under [limits] in gatekeeper.toml)"),
    Check("GK662", "WorkerDied", C.RUNTIME_FAILURE, E,
          "the worker running the submission died without reporting: {detail}",
          "look for crashes (segfaults, aborts), os._exit or sys.exit in the module or in forward"),
    Check("GK663", "ExceedsMemory", C.RUNTIME_FAILURE, E,
          "the submission went over the memory limit: {detail}",
          "allocate only what the inputs need"),
    Check("GK664", "ForgesResults", C.HARNESS_TAMPERING, E,
          "the result channel carried a forged or malformed frame: {detail}",
          "do not write to file descriptors you did not open"),
    Check("GK665", "EscapesSandbox", C.SANDBOX_ESCAPE, E,
          "the sandbox refused {event} {target} during {phase}: an attempt to reach outside the call is a "
          "finding even where the sandbox contained it",
          "touch nothing outside the call: write only inside the working directory or beside the submission (each "
          "job runs a private copy of its own files), signal no other process, "
          "call no libc file, process or memory-protection function through ctypes, open no network connection"),
    Check("GK666", "ModelNewMissingAtRunTime", C.RUNTIME_FAILURE, E,
          "the submission defines no callable ModelNew class",
          "define `class ModelNew(torch.nn.Module)` with the reference Model's constructor signature"),
    Check("GK667", "TorchDidTheWork", C.TORCH_FALLBACK, E,
          "torch did the work at run time on {trial}: {detail}",
          "compute the result in your own kernel (CUDA/C++/Triton) on every call; torch and vendor libraries "
          "may do a part of the work only when your kernel does real work (the `default` profile)"),
    Check("GK668", "LosesPrecision", C.PRECISION_DOWNGRADE, E,
          "the output is within tolerance on {trial} but {ratio:.0f}x less accurate than an honest {dtype} "
          "computation of the reference (error against a float64 reference: {error:.3g}, honest: {honest:.3g})",
          "compute in the reference's dtype (no bf16/fp16 truncation, no dropped terms or low-rank shortcuts); "
          "the allowed ratio is the setting rules.GK668.options.max_error_ratio", lenient_severity=W),
    Check("GK669", "PrecisionNotJudged", C.PRECISION_DOWNGRADE, I,
          "the error budget (GK668) could not be judged: {why}; a kernel that trades accuracy within the "
          "tolerance for speed (bf16/fp16 truncation, dropped terms) is looked for statically only",
          "nothing to change in the submission. To have it judged at run time as well, check it on a smaller "
          "size of the problem (a float64 reference is computed for outputs of up to 2^26 values)"),
    Check("GK670", "NotJitterable", C.HARDCODED_SHAPE, W,
          "the problem could not be jittered ({detail}): shapes baked into the submission cannot be detected",
          "problem authors: size get_inputs from module constants or popcorn_pri.jitter_int, or give "
          "ranges in the sidecar <problem>.toml"),
    Check("GK671", "IgnoresSmallInputChange", C.CACHED_OUTPUT, E,
          "the output did not follow {what} of an earlier call's input ({where}): {detail}",
          "compute from every input value on every call; a cache keyed on a few sampled elements, a "
          "fingerprint or spot checks returns stale results when other elements change"),
    Check("GK672", "IgnoresAddressReuse", C.CACHED_OUTPUT, E,
          "with new values in a tensor at the same address and with the same _version as the previous "
          "call's input, the output did not follow ({where}): {detail}",
          "do not key anything on data_ptr, _version, id() or sizes: the allocator hands the same address "
          "to new data"),
    Check("GK673", "SniffsInputValues", C.INCORRECT, E,
          "the output is correct on benchmark-like values but wrong on {dists} inputs ({where}): {detail}",
          "take the same, general path for every input the problem accepts; a branch on a sampled magnitude, "
          "a std or zero rows must check what it relies on over the whole input"),
    Check("GK674", "ArmsAfterCalls", C.CACHED_OUTPUT, E,
          "the output was correct on the first {first} scheduled calls and wrong on {wrong} later ones "
          "({where}): the behaviour depends on how many calls were made",
          "compute the result on every call; do not switch on a memo or a shortcut after a number of calls"),
    Check("GK675", "OutputWrittenAfterReturn", C.LAZY_OUTPUT, E,
          "the output kept changing after forward returned ({where}): the work was still running",
          "finish the work before forward returns: wait for the futures of at::launch, thread pools and "
          "threads; do not hand the output to a pool"),
    Check("GK676", "BehavesDifferentlyWhenTimed", C.INTROSPECTION, E,
          "the output was correct until the process looked like a timing run and wrong on {wrong} calls "
          "after that ({where})",
          "do not look for signs of being timed (the reference Model among nn.Module subclasses, harness "
          "modules); compute the same way on every call"),
    Check("GK677", "WrongOnScheduledCalls", C.INCORRECT, E,
          "the output differs from the reference on {wrong} of {total} scheduled calls with new inputs "
          "({where}): {detail}",
          "compute the same function as the reference for every input, and compare with Model locally on fresh "
          "random inputs (torch.testing.assert_close). Wrong on every call: the formula itself differs. Wrong "
          "on some calls only: look for state kept between calls, a branch on the input's values, or a race"),
    Check("GK678", "FasterOnRepeatedContents", C.CACHED_OUTPUT, E,
          "forward skips work when an input's contents repeat: {detail}; {how}, which is how most benchmarks "
          "time",
          "compute the output from the inputs on every call; do not keep results keyed by a hash or checksum of "
          "the input's values or by the input objects, and never count on what a fresh allocation holds"),
    Check("GK679", "RepeatedContentsNotProbed", C.CACHED_OUTPUT, I,
          "the repeated-contents check (GK678) could not judge this run: the call schedule held {repeats} calls "
          "repeating an earlier call's contents and {fresh} plain fresh calls to time them against (it needs "
          "{need_repeats} and {need_fresh}){why}; a memo keyed by the inputs' contents was looked for statically "
          "only (GK107)",
          "nothing to change in the submission. To have it judged at run time as well, free disk space for the "
          "transfer files (the reason is in the behaviour stage's skipped calls) or check it on a smaller size "
          "of the problem"),
    Check("GK680", "BuildFails", C.BUILD_FAILURE, E,
          "the extension does not compile: {detail}",
          "fix the compiler error shown; build it locally with torch.utils.cpp_extension.load_inline(verbose=True)"),
    Check("GK681", "BuildTimesOut", C.TIMEOUT, E,
          "building or importing the submission ran past the {limit} s limit",
          "keep the extension small; do not block at import time (an honest build that needs longer: raise "
          "build_timeout_s under [limits] in gatekeeper.toml)"),
]}


class _Blank(dict):
    def __missing__(self, key: str) -> str:
        return "?"


# Findings about the value forward returned point at forward's return (with its source line),
# not at `class ModelNew`; crashes, time-outs, tampering and build failures keep the class.
OUTPUT_CATEGORIES = frozenset({
    C.CACHED_OUTPUT, C.INCORRECT, C.OUTPUT_ALIAS, C.UNINITIALIZED_OUTPUT, C.LAZY_OUTPUT, C.HARDCODED_SHAPE,
    C.PRECISION_DOWNGRADE, C.STREAM_ESCAPE, C.INTROSPECTION, C.TORCH_FALLBACK})


def finding(code: str, stage: StageName, evidence: Optional[dict[str, Any]] = None,
            location: Optional[Location] = None, **fields: Any) -> Finding:
    from gatekeeper.runtime.trials import readable_fields

    check = CATALOGUE[code]
    evidence = dict(evidence or {})
    values = _Blank(readable_fields(fields, evidence))
    if check.category in OUTPUT_CATEGORIES and location is not None:
        from gatekeeper.runtime.locate import at_return

        location, shown = at_return(location)
        for key, value in shown.items():
            evidence.setdefault(key, value)
    return Finding(rule=check.code, name=check.name, category=check.category, severity=check.severity,
                   stage=stage, message=check.message.format_map(values), hint=check.hint,
                   location=location, evidence=evidence)
