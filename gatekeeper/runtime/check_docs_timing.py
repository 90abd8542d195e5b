"""explain texts for the timing stage's findings (GK701-GK709)."""

from __future__ import annotations

from gatekeeper.runtime.doc_parts import CheckDoc, forward

_HONEST = forward("return ext.mean(x)  # all the work, on the current stream, every call")

TIMING_DOCS: dict[str, CheckDoc] = {
    "GK701": CheckDoc(
        "The median time is below the least time the problem can take on this GPU (bytes over peak bandwidth, "
        "operations over peak rate, or one kernel launch).",
        "Faster than physics means work was skipped, reused or moved out of the timed call.",
        forward("if self.cached is not None:\n    return self.cached\nself.cached = ext.mean(x)\nreturn self.cached",
                init="self.cached = None"), _HONEST),
    "GK702": CheckDoc(
        "The speedup over the reference is above the review threshold ([timing] speedup_review).",
        "Such speedups are sometimes real (a poor reference) and usually skipped work; a person decides.",
        forward("return ext.mean(x[:1])  # reads one rank of four"), _HONEST),
    "GK703": CheckDoc(
        "An output produced during timing differs from the reference on the same inputs, though the behaviour "
        "stage passed.",
        "Correct only while being checked: the timed function is not the one that was verified.",
        forward("if self.calls > 20:  # past the correctness trials\n    return torch.empty_like(x[0])\n"
                "self.calls += 1\nreturn ext.mean(x)", init="self.calls = 0"), _HONEST),
    "GK704": CheckDoc(
        "The reference ran slower in the submission's worker than alone, by more than [timing] reference_drift.",
        "Slowing the reference (busy threads, a throttled GPU, patched torch) inflates the speedup.",
        "threading.Thread(target=spin_forever, daemon=True).start()\n\n" + forward("return ext.mean(x)"), _HONEST),
    "GK705": CheckDoc(
        "Work kept running on another stream after the timed call returned (beyond [timing] "
        "stream_escape_min_us and a quarter of the call's time).",
        "Events on the current stream stop the clock while the real work continues elsewhere.",
        forward("with torch.cuda.stream(self.side):\n    return ext.mean(x)"), _HONEST),
    "GK706": CheckDoc(
        "CUDA-graph timing was asked for ([timing] mode = \"graph\"), but the call cannot be captured in a graph.",
        "Graph timing replays a capture; a call that syncs or allocates on the host cannot be replayed.",
        forward("n = int(x.sum().item())  # a host sync inside the call\nreturn ext.mean(x, n)"), _HONEST),
    "GK707": CheckDoc(
        "The submission crashed or raised while being timed.",
        "A failure under timing is no time; code that behaves differently when timed is suspect.",
        forward("if torch.cuda.is_current_stream_capturing() or self.calls > 50:\n    raise RuntimeError()\n"
                "self.calls += 1\nreturn ext.mean(x)", init="self.calls = 0"), _HONEST),
    "GK708": CheckDoc(
        "The timing run did not finish within its limit ([timing] budget_s and the call limits).",
        "A call too slow to time has no score; a hang blocks the benchmark.",
        forward("time.sleep(10)\nreturn ext.mean(x)"), _HONEST),
    "GK709": CheckDoc(
        "The timing worker's results failed authentication.",
        "Times the submission wrote itself are forged; only the worker reports them.",
        "os.write(3, forged_times_frame)\n\n" + forward("return ext.mean(x)"), _HONEST),
}
