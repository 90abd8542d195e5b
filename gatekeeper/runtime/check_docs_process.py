"""explain texts for the checks on the process (GK640-GK666, GK670) and the build (GK680, GK681)."""

from __future__ import annotations

from gatekeeper.runtime.doc_parts import CheckDoc, forward

PROCESS_DOCS: dict[str, CheckDoc] = {
    "GK640": CheckDoc(
        "On a GPU, the output differed between a sync of the caller's stream and a full device sync: kernels ran "
        "on a stream the caller does not wait for.",
        "Timing events on the current stream do not see work on another stream, so it runs for free.",
        forward("with torch.cuda.stream(self.side):\n    out = ext.mean(x)\nreturn out"),
        forward("out = ext.mean(x)  # on the current stream\nreturn out")),
    "GK641": CheckDoc(
        "On a GPU, a call that started with work still queued on the caller's current stream (its inputs written "
        "by that work) returned wrong values, while calls that started on an idle stream were right.",
        "Work on a stream that does not wait for the current one runs before the timer's start event, and a "
        "branch on a busy stream takes a path only timed calls see.",
        forward("s = _ext.side_stream()  # cudaStreamCreate, never waits on the current stream\n"
                "return _ext.gemm_on(s, x)"),
        forward("s = self.side\ns.wait_stream(torch.cuda.current_stream())\nwith torch.cuda.stream(s):\n"
                "    out = _ext.gemm(x)\ntorch.cuda.current_stream().wait_stream(s)\nreturn out")),
    "GK645": CheckDoc(
        "More Python or native threads, or child processes the call started, were alive after the call returned.",
        "A worker left running can finish the result later, outside the timed call, or tamper with the harness.",
        forward("threading.Thread(target=ext.mean_into, args=(x, self.out)).start()\nreturn self.out"),
        forward("t = threading.Thread(target=ext.mean_into, args=(x, out := torch.empty_like(x[0])))\n"
                "t.start(); t.join()\nreturn out")),
    "GK650": CheckDoc(
        "At run time, after import or a call, a function the harness relies on (torch.allclose, time.perf_counter, "
        "torch.cuda.synchronize, builtins) is no longer the original object. Called PatchesHarness before "
        "issue 21, which is GK414's name: GK414 reads the patch in the source, GK650 sees it happen.",
        "A replaced comparison or timer makes every check pass and every time small.",
        "import torch\ntorch.allclose = lambda *a, **k: True\n\n" + forward("return ext.mean(x)"),
        "import torch\n\n" + forward("return ext.mean(x)")),
    "GK660": CheckDoc(
        "The submission raised an exception while being imported, constructed or called.",
        "It cannot be compared or timed; an exception on some inputs is a wrong answer for them.",
        forward("return ext.mean(x.view(16, -1))  # fails on any other size"),
        forward("return ext.mean(x.reshape(x.shape[0], -1))")),
    "GK661": CheckDoc(
        "A phase (import, construction, a call) ran past its time limit and the worker was killed.",
        "A hang blocks the benchmark; heavy work at import time hides cost outside the timed call.",
        "time.sleep(3600)\n\n" + forward("return ext.mean(x)"),
        forward("return ext.mean(x)")),
    "GK662": CheckDoc(
        "The worker running the submission died without its signed report: a segfault, an abort, os._exit, "
        "sys.exit or a closed result channel.",
        "A crash is no result; exiting early may try to skip the checks that come after.",
        forward("os._exit(0)"),
        forward("return ext.mean(x)")),
    "GK663": CheckDoc(
        "The submission went over the memory limit ([limits] memory_mb) or raised an out-of-memory error.",
        "Memory the problem does not need is a resource attack on the harness and other runs.",
        forward("self.junk = torch.empty(1 << 40, dtype=torch.uint8)\nreturn ext.mean(x)"),
        forward("return ext.mean(x)")),
    "GK664": CheckDoc(
        "The result channel carried a frame that failed authentication or was malformed.",
        "Only the worker may report results; a submission writing to the channel forges its own verdict.",
        "os.write(3, b'{\"kind\": \"done\", \"ok\": true}')\n\n" + forward("return ext.mean(x)"),
        forward("return ext.mean(x)")),
    "GK665": CheckDoc(
        "The sandbox refused an action: a write outside the working directory or a network connection.",
        "A submission has no business outside its folder or on the network (downloading answers, exfiltration).",
        "open('/home/user/.bashrc', 'a').write('...')\n\n" + forward("return ext.mean(x)"),
        "open('scratch.bin', 'wb').write(b'')  # inside the working directory\n\n" + forward("return ext.mean(x)")),
    "GK666": CheckDoc(
        "After import, the module has no callable ModelNew (the static rule GK005 reads the source; this check "
        "sees the imported module, e.g. ModelNew deleted, set to None or made at import time). Called NoModelNew "
        "before issue 21.",
        "There is nothing to run against the reference.",
        "class ModelNew(torch.nn.Module): ...\nModelNew = None",
        forward("return ext.mean(x)")),
    "GK670": CheckDoc(
        "A warning for problem authors: the behaviour stage could not vary the problem's input shapes.",
        "Without jittered shapes a kernel with baked-in sizes passes every trial; the result is weaker.",
        "def get_inputs():\n    return [torch.randn(4, 16, 48)]  # literals: nothing to jitter",
        "ranks, rows, cols = 4, 16, 48\n\ndef get_inputs():\n    return [torch.randn(ranks, rows, cols)]"),
    "GK680": CheckDoc(
        "The submission's extension (load_inline, cpp_extension, Triton) failed to compile; the first compiler "
        "error is mapped to the Python line that holds the source.",
        "Nothing can run; a submission that does not build has no time.",
        'cuda_src = "__global__ void k(float* y) { y[i] = 0; }"  # i is undeclared',
        'cuda_src = "__global__ void k(float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = 0; }"'),
    "GK681": CheckDoc(
        "Building or importing the submission ran past the build time limit ([limits] build_timeout_s).",
        "An endless build blocks the benchmark; an honest large build can raise the limit.",
        'cuda_src = "template <int N> struct F { enum { v = F<N - 1>::v + 1 }; }; ... F<100000>::v"',
        'cuda_src = "__global__ void k(float* y, int n) { ... }"'),
}
