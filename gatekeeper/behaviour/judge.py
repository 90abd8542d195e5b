"""Observations from the submission worker + reference results -> findings. Runs in the parent."""

from __future__ import annotations

from typing import Any, Callable, Optional

from gatekeeper.behaviour.compare import Comparison, compare
from gatekeeper.runtime.checks import finding
from gatekeeper.report import Finding, Location, StageName

STAGE = StageName.BEHAVIOUR
# Which reference trial each submission call is compared with.
REFERENCE_OF = {"repeat": "nominal"}


class Judge:
    def __init__(self, references: dict[str, dict[str, Any]], tolerances: Callable[[str], tuple[float, float]],
                 location: Optional[Location], device: str = "") -> None:
        self.references = references
        self.device = device  # where the run's tensors live ("cpu", "cuda:0")
        self.tolerances = tolerances
        self.location = location
        self.grouped: dict[str, tuple[dict[str, Any], dict[str, Any], list[str]]] = {}
        self.outputs: dict[str, Any] = {}
        self.correct: dict[str, bool] = {}
        self.earlier: dict[str, list[str]] = {}  # trial -> earlier outputs its output shares storage with

    def add(self, code: str, trial: str, evidence: dict[str, Any], **fields: Any) -> None:
        """One finding per code; later trials with the same problem are listed in its evidence."""
        if code in self.grouped:
            self.grouped[code][2].append(trial)
            return
        self.grouped[code] = (evidence, dict(fields, trial=trial), [trial])

    def findings(self) -> list[Finding]:
        out = []
        for code, (evidence, fields, trials) in self.grouped.items():
            out.append(finding(code, STAGE, dict(evidence, trials=trials), self.location, **fields))
        return out

    def _shapes(self, trial: str) -> list[Any]:
        ref = self.references.get(REFERENCE_OF.get(trial, trial), {})
        return ref.get("shapes", [])

    def call(self, obs: dict[str, Any]) -> None:
        trial = obs["trial"]
        ref = self.references.get(REFERENCE_OF.get(trial, trial))
        if ref is None:
            return
        base = {"shapes": self._shapes(trial), "jitter": ref.get("constants") or ref.get("jitter_calls")}
        self._lazy(obs, ref, base)
        self._housekeeping(obs, ref, base)
        if "output" not in obs:
            self.correct[trial] = False
            return
        self.outputs[trial] = obs["output"]
        result = compare(ref["output"], obs["output"], self.tolerances)
        self.correct[trial] = result.ok
        earlier = self.earlier.pop(trial, None)
        if earlier:
            self.storage_reuse(trial, dict(base, aliases=earlier), "its output shares storage with " + ", ".join(earlier))
        if not result.ok:
            self._incorrect(trial, result, base)

    def _lazy(self, obs: dict[str, Any], ref: dict[str, Any], base: dict[str, Any]) -> None:
        desc = obs["describe"]
        want = ref["output"]
        trial = obs["trial"]
        if isinstance(want, dict) and want.get("__tensor__"):
            want_text = f"a torch.Tensor ({want['dtype']}, on {want['device']})"
            if not desc.get("exact"):
                what = desc.get("type", "?")
                if desc.get("subclass_of_tensor"):
                    what = f"a tensor subclass {what}"
                elif what in ("NoneType", "builtins.NoneType"):
                    what = "None"
                elif "numpy" in what:
                    what = f"a numpy array ({what})"
                elif "length" in desc:
                    what = f"a {what} of {desc['length']} items"
                self.add("GK635", trial, dict(base, describe=desc), what=what, want=want_text)
            elif desc["dtype"] != want["dtype"] or desc["device"].split(":")[0] != want["device"].split(":")[0]:
                self.add("GK635", trial, dict(base, describe=desc),
                         what=f"a {desc['dtype']} tensor on {desc['device']}", want=want_text)
            elif not desc.get("dense"):
                self.add("GK635", trial, dict(base, describe=desc),
                         what=f"a non-dense tensor (stride {desc['stride']})", want=want_text)

    def _housekeeping(self, obs: dict[str, Any], ref: dict[str, Any], base: dict[str, Any]) -> None:
        trial = obs["trial"]
        aliases = [a for a in obs.get("aliases", [])
                   if not (a.startswith("input ") and int(a.split()[1]) in ref.get("aliased_inputs", []))
                   and not (a == "a parameter or buffer" and ref.get("aliases_parameter"))]
        earlier = [a for a in aliases if a.startswith("the output of")]
        aliases = [a for a in aliases if a not in earlier]
        if aliases:
            self.add("GK620", trial, dict(base, aliases=aliases), what=", ".join(aliases))
        if earlier:  # judged once the output's values are compared (storage_reuse)
            self.earlier[trial] = earlier
        mutated = [i for i in obs.get("mutated", []) if i not in ref.get("mutated", [])]
        if mutated:
            self.add("GK625", trial, dict(base, inputs=mutated), index=", ".join(map(str, mutated)))
        before, after = obs["counts_before"], obs["counts_after"]
        grew = []
        if after["python_threads"] > before["python_threads"]:
            grew.append(f"{after['python_threads'] - before['python_threads']} Python thread(s) still running")
        elif after["os_threads"] > before["os_threads"] and trial != "nominal":
            # Native threads are not counted on the first call of the process: runtimes
            # (CUDA, OpenMP) may start their pools lazily there. Every later call counts.
            grew.append(f"{after['os_threads'] - before['os_threads']} native thread(s) still running")
        if after["children"] > before["children"]:
            grew.append(f"{after['children'] - before['children']} child process(es) still running")
        if grew:
            self.add("GK645", trial, dict(base, before=before, after=after), what="; ".join(grew))
        if obs.get("tampered"):
            self.add("GK650", trial, {"names": obs["tampered"]}, when=f"during the call on {trial}",
                     names=", ".join(obs["tampered"]))
        if obs.get("stream_escape"):
            self.add("GK640", trial, base)

    def _incorrect(self, trial: str, result: Comparison, base: dict[str, Any]) -> None:
        evidence = dict(base, **result.evidence, detail=result.detail)
        shapes = base["shapes"]
        if result.reason == "nan":
            self.add("GK630", trial, evidence, detail=result.detail)
        elif trial == "nominal-overwrite" and self.correct.get("nominal"):
            self.add("GK611", trial, evidence, detail=result.detail)
        elif trial.startswith("jitter") and self.correct.get("nominal"):
            self.add("GK602", trial, evidence, shapes=shapes, detail=result.detail)
        elif result.reason == "shape":
            self.add("GK604", trial, evidence, got=result.evidence.get("got_shape"),
                     want=result.evidence.get("want_shape"))
        else:
            self.add("GK601", trial, evidence, shapes=shapes, detail=result.detail)

    def call_error(self, message: dict[str, Any]) -> None:
        trial = message["trial"]
        evidence = {"traceback": str(message.get("traceback", ""))[-3000:], "shapes": self._shapes(trial)}
        text = str(message.get("message"))
        if self.device == "cpu" and "CUDA error" in text:
            # A problem run on the CPU (a sidecar's device = "cpu"): CUDA cannot start in its
            # worker, whose memory cap is set for the CPU, and torch words that "out of memory".
            # Still the submission's failure, but not over the memory limit.
            self.add("GK660", trial, evidence, type=message.get("type"), phase=f"forward on {trial}",
                     message=f"{text[:300]} (this problem runs on the CPU: the submission started CUDA work, "
                             "which cannot run in the CPU worker; write a CPU kernel for a CPU problem, or check "
                             "the GPU kernel against the problem's GPU version)")
        elif message.get("type") == "MemoryError" or "can't allocate memory" in text or "out of memory" in text:
            self.add("GK663", trial, evidence, detail=f"{message.get('type')} in forward on {trial}: {text[:300]}")
        elif trial.startswith("jitter") and self.correct.get("nominal"):
            self.add("GK602", trial, evidence, shapes=self._shapes(trial),
                     detail=f"raised {message.get('type')}: {str(message.get('message'))[:300]}")
        else:
            self.add("GK660", trial, evidence, type=message.get("type"), phase=f"forward on {trial}",
                     message=str(message.get("message"))[:500])

    def first_after_second(self, message: dict[str, Any]) -> None:
        problems = []
        if not message.get("unchanged"):
            problems.append("was overwritten")
        if message.get("shares_storage"):
            problems.append("shares storage with the second output")
        if problems:
            self.storage_reuse("nominal-second", dict(message), "the first call's output " + " and ".join(problems))

    def storage_reuse(self, trial: str, evidence: dict[str, Any], what: str) -> None:
        """An earlier result's storage came back, or was overwritten: stale when this call's
        values are wrong for its inputs (GK610, an error), reused storage with fresh values
        when they are right (GK612: a warning, an error under `strict`)."""
        fresh = self.correct.get(trial, False)
        if fresh and "GK610" in self.grouped:
            return  # a repeat of earlier inputs looks fresh even when stale: the stale call already spoke
        if not fresh:
            self.grouped.pop("GK612", None)  # stale values somewhere: that is the finding
        self.add("GK612" if fresh else "GK610", trial, dict(evidence, fresh_values=fresh), what=what)

    def determinism(self) -> None:
        first, again = self.outputs.get("nominal"), self.outputs.get("repeat")
        if first is None or again is None or not self.correct.get("nominal", False):
            return
        result = compare(first, again, self.tolerances)
        if not result.ok:
            self.add("GK655", "repeat", dict(result.evidence), detail=result.detail)
