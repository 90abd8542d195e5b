"""The timing loop's probes judged by both CPU clocks (behaviour.repeat_probe): the calling
thread's and the whole process's, so work a pool thread skips while the caller waits is seen
(red team round 8: h04, h06, h07), and load that stretches only the wall is not a memo."""

from __future__ import annotations

from gatekeeper.behaviour.repeat_probe import RepeatProbe

# Probes spread over a 1,000-call loop, as in tests/test_repeat_probe.py.
_SPREAD = [80, 230, 380, 500, 650, 800, 930, 1000]


def test_loop_windows_are_kept_where_either_clock_sees_the_probes_slower():
    # The loop against its probes, with the caller doing a fixed share (3e-4 s of its own CPU on
    # every call) and a pool thread the rest: only the process's clock tells a hit from a miss.
    def judged(loop_pcpu: float, probe_pcpu: float, loop_wall: float = 4.0e-4) -> list:
        calls = [{"index": i, "kind": "fresh", "dist": "normal"} for i in range(32)]
        for i in (6, 7, 12):
            calls[i].update(kind="repeat", base=i - 3)
        probe = RepeatProbe({"calls": calls, "planned": 32})
        for i in range(24):
            probe.observe({"kind": "schedule-call", "index": i, "wall_s": 2.0e-3, "cpu_s": 3e-4, "pcpu_s": 2.0e-3})
        after = list(range(24, 32))
        probe.observe({"kind": "schedule-loop", "calls": 1000, "walls": [loop_wall] * 1000, "cpus": [3e-4] * 1000,
                       "pcpus": [loop_pcpu] * 1000, "after": after, "probes_at": _SPREAD, "error": ""})
        for i in after:
            probe.observe({"kind": "schedule-call", "index": i, "wall_s": 2.0e-3, "cpu_s": 3e-4, "pcpu_s": probe_pcpu})
        added: list = []
        probe.judge(lambda *a, **k: added.append(a[0]))
        return added

    assert judged(4.0e-4, 2.0e-3) == ["GK678"]  # the pool's work skipped in the loop
    assert judged(2.0e-3, 2.0e-3) == []  # the loop's wall under load, the work the same by both clocks
