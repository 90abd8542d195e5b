"""Judging the call schedule (problem.schedule) in the parent: every scheduled call's output
against the reference, and which mechanism a wrong answer points to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from gatekeeper.behaviour.compare import compare, error_ratio, fair_compare, stale_where_wrong

ARMING_PREFIX = 8  # a correct run of at least this many calls before the first wrong one
TIMED_WINDOW = 16  # a memo switched on when the process looks timed may need a few calls to fill
_SAME_INPUTS = ("again", "repeat")  # kinds whose inputs hold their base call's values (problem.schedule)


@dataclass
class Outcome:
    index: int
    kind: str
    dist: str
    base: Any
    ok: bool
    detail: str = ""
    addresses: tuple[int, ...] = ()  # data pointers of the tensor inputs, as the call got them
    queued: bool = False  # started behind work queued on the current stream (behaviour.queued_entry)


def _rate(ordered: list[Outcome], kind: str) -> float:
    """The share of wrong outputs among the plain-valued calls of one kind."""
    calls = [o for o in ordered if o.kind == kind and o.dist == "normal"]
    return sum(not o.ok for o in calls) / len(calls) if calls else 0.0


def _wrong_at_used_addresses(ordered: list[Outcome]) -> list[Outcome]:
    """Plain calls whose inputs landed at an address an earlier call's input had, when
    those fail (at least half, three or more) and calls at new addresses do not: a cache
    keyed on the address. On the CPU the allocator often reuses addresses on fresh calls
    as well as on the schedule's same-address calls, so those count as evidence too."""
    used: set[int] = set()
    again: list[Outcome] = []
    new: list[Outcome] = []
    for o in ordered:
        if not o.addresses:
            continue
        if o.dist == "normal" and o.kind in ("fresh", "reuse"):
            (again if any(a in used for a in o.addresses) else new).append(o)
        used.update(o.addresses)
    failed = [o for o in again if not o.ok]
    if len(failed) < 3 or len(failed) < 0.5 * len(again) or not new:
        return []
    return failed if sum(not o.ok for o in new) <= 0.05 * len(new) else []


@dataclass
class ScheduleJudge:
    reference: dict[str, Any]
    tolerances: Callable[[str], tuple[float, float]]
    outcomes: dict[int, Outcome] = field(default_factory=dict)
    late: list[int] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    rescued: list[int] = field(default_factory=list)  # outside the fixed atol, fair against float64
    max_error_ratio: Optional[float] = None  # the error budget (GK668) on every call; None: off
    ratios: dict[int, dict[str, Any]] = field(default_factory=dict)  # the calls over the budget
    budgeted: list[int] = field(default_factory=list)  # the calls whose error was measured against it
    outputs: dict[int, Any] = field(default_factory=dict)  # the submission's, for near-duplicates' bases
    # The timing loop's probes that wrote their values into the loop's own tensors (behaviour.
    # timing_loop): planned as fresh calls, they ran as `overwrite` calls and are judged as such.
    in_place: set[int] = field(default_factory=set)

    def observe(self, message: dict[str, Any]) -> None:
        kind = message.get("kind")
        if kind == "schedule-loop":
            self.in_place = {int(i) for i in message.get("in_place") or [] if isinstance(i, int)}
        elif kind == "schedule-late":
            self.late.append(int(message["index"]))
        elif kind == "schedule-error":
            self.errors.append(message)
        elif kind == "schedule-call":
            index = int(message["index"])
            ref = self._calls().get(index)
            if ref is None:
                return
            if message.get("output") is None:
                ok, detail = False, "forward returned no tensor"
            else:
                result = compare(ref["output"], message["output"], self.tolerances)
                if not result.ok and result.reason in ("values", "nan") and "output64" in ref:
                    # Judged like the error budget: against float64, next to the honest error
                    # at this call's scale (a fixed atol fails honest code on scaled values).
                    result = fair_compare(ref["output"], ref["output64"], message["output"], self.tolerances)
                    if result.ok:
                        self.rescued.append(index)
                ok, detail = result.ok, result.detail
                if ok and self.max_error_ratio is not None and "output64" in ref:
                    self._budget(index, ref, message["output"])
            dist = ref["dist"]
            base = self._calls().get(ref.get("base")) if ref.get("base") is not None else None
            if base is not None and dist == "normal":
                dist = base["dist"]  # a near-duplicate keeps its base's structure
            self.outputs[index] = message.get("output")  # held by the run's messages anyway
            raw = message.get("addresses")
            addresses = tuple(a for a in raw if isinstance(a, int) and a) if isinstance(raw, list) else ()
            call_kind = "overwrite" if index in self.in_place and ref["kind"] == "fresh" else ref["kind"]
            self.outcomes[index] = Outcome(index, call_kind, dist, ref.get("base"), ok, detail, addresses,
                                           message.get("queued") is True)

    def _budget(self, index: int, ref: dict[str, Any], output: Any) -> None:
        """The error budget of the named trials (GK668), on a scheduled call: the error against
        float64 over the honest computation's, at this call's values and scale."""
        measured = error_ratio(ref["output"], ref["output64"], output)
        if measured is not None:
            self.budgeted.append(index)
        if measured is not None and self.max_error_ratio is not None and measured["ratio"] > self.max_error_ratio:
            self.ratios[index] = measured

    def _systematic(self) -> bool:
        """The calls over the error budget show a lower precision rather than a tipped decision.
        A lower precision is in the arithmetic of every call it is used on: most calls, or every
        call from some point on (a downgrade that waits for the timing loop). A call here and
        there among calls within the budget is a discrete decision that rounding or a tie tipped
        the other way (top-p's cutoff token; H100 2026-12-07: 1 of 8 calls at 15,505x, the other
        seven within the budget), which an honest float32 computation does as well."""
        over = set(self.ratios)
        if not over:
            return False
        if 2 * len(over) >= len(self.budgeted):
            return True
        tail = [i for i in self.budgeted if i >= min(over)]
        return len(over) >= 2 and all(i in over for i in tail)

    def _calls(self) -> dict[int, dict[str, Any]]:
        if not hasattr(self, "_by_index"):
            self._by_index = {int(c["index"]): c for c in self.reference.get("calls", [])}
        return self._by_index

    def _stale(self, outcome: Outcome) -> bool:
        """Whether a wrong near-duplicate returned its base call's result: wherever its output is
        wrong, it is what the submission returned for the base (compare.stale_where_wrong). That
        is what a cache keyed on sampled elements or a fingerprint does (GK671). An output that
        is neither (a clamp to the benchmark's range, a path chosen by sampled values) followed
        the change and got the new values wrong: an input-value error, judged with the value
        distributions (GK673), not a cache."""
        ref = self._calls().get(outcome.index)
        got, base = self.outputs.get(outcome.index), self.outputs.get(outcome.base)
        if ref is None or got is None or base is None:
            return True  # nothing to compare (no tensor returned): judged as before
        return stale_where_wrong(ref["output"], got, base, self.tolerances)

    def _where(self, outcomes: list[Outcome]) -> str:
        shown = ", ".join(str(o.index) for o in outcomes[:6]) + (", ..." if len(outcomes) > 6 else "")
        return f"scheduled call{'s' if len(outcomes) > 1 else ''} {shown} of {len(self.outcomes)}"

    def _evidence(self, outcomes: list[Outcome]) -> dict[str, Any]:
        return {"calls": [{"index": o.index, "kind": o.kind, "dist": o.dist, "base": o.base, "detail": o.detail}
                          for o in outcomes[:10]],
                "scheduled_calls": len(self.outcomes), "timed_from": self.reference.get("timed_from")}

    def judge(self, add: Callable[..., None]) -> None:
        """Calls `add(code, trial, evidence, **fields)` (behaviour.judge.Judge.add) per finding."""
        ordered = [self.outcomes[i] for i in sorted(self.outcomes)]
        wrong = [o for o in ordered if not o.ok]
        if self._systematic():
            index, worst = max(self.ratios.items(), key=lambda kv: kv[1]["ratio"])
            add("GK668", f"scheduled call {index} ({len(self.ratios)} of {len(ordered)} over the budget)",
                {"calls": {str(i): round(r["ratio"], 1) for i, r in list(self.ratios.items())[:10]},
                 "max_error_ratio": self.max_error_ratio, **worst},
                ratio=worst["ratio"], dtype=worst["dtype"], error=worst["error"], honest=worst["honest"])
        ok = {o.index for o in ordered if o.ok}
        if self.late:
            late = [self.outcomes.get(i) or Outcome(i, "?", "?", None, False) for i in sorted(self.late)]
            add("GK675", "schedule", self._evidence(late), where=self._where(late))
        for error in self.errors[:1]:
            add("GK660", "schedule", {"traceback": str(error.get("traceback", ""))[-2000:],
                                      "failed_calls": len(self.errors)},
                type=error.get("type"), phase=f"scheduled call {error.get('index')}",
                message=str(error.get("message"))[:500])
        if not wrong:
            return
        previous = {o.index: p.index for p, o in zip(ordered, ordered[1:])}
        if self.in_place:
            # The loop's calls ran between its probes, on the same tensors: each probe follows the
            # call whose tensors the loop took (the last before the loop), not the probe before.
            before = [o.index for o in ordered if o.index < min(self.in_place)]
            previous.update({i: before[-1] for i in self.in_place if before})
        # Each wrong call in one bucket, by what was special about its input.
        changed = [o for o in wrong if o.kind.startswith("near") and o.base in ok]
        near = [o for o in changed if self._stale(o)]  # the base's result: a cache (GK671)
        followed = [o for o in changed if o not in near]  # wrong on the changed values themselves
        dists = sorted([o for o in wrong if o not in changed and o.dist != "normal"] + followed,
                       key=lambda o: o.index)
        reuse = [o for o in wrong if o.kind == "reuse" and o.dist == "normal" and previous.get(o.index) in ok]
        if not reuse and _rate(ordered, "reuse") >= 0.9 > _rate(ordered, "fresh") + 0.2:
            # The allocator reuses addresses on plain calls too, so the call before may be stale
            # as well: what names it is that same-address calls fail (nearly) always, others less.
            reuse = [o for o in wrong if o.kind == "reuse" and o.dist == "normal"]
        if not reuse:
            reuse = _wrong_at_used_addresses(ordered)
        overwrite = [o for o in wrong if o.kind == "overwrite" and o.dist == "normal" and previous.get(o.index) in ok]
        # Wrong only where the call started behind work queued on the current stream, right on
        # the other plain calls: work not ordered after that stream (behaviour.queued_entry).
        plain_fresh = [o for o in ordered if o.kind == "fresh" and o.dist == "normal"]
        queued = [o for o in wrong if o.queued and o.kind == "fresh" and o.dist == "normal"]
        if queued and any(not o.queued for o in plain_fresh) and all(o.ok for o in plain_fresh if not o.queued):
            add("GK641", "schedule", self._evidence(queued), where=self._where(queued), detail=queued[0].detail)
        else:
            queued = []
        special = {o.index for o in near + dists + reuse + overwrite + queued}
        # A near-duplicate of a wrong call, and a call on the very inputs of one (`again`, `repeat`),
        # is judged as that call: its wrong answer shows nothing the base did not.
        inherited = {o.index for o in wrong if o.base not in ok and (o.kind.startswith("near") or o.kind in _SAME_INPUTS)}
        plain = [o for o in wrong if o.index not in special and o.index not in inherited]
        if near:
            one = any(o.kind == "near-one" for o in near)
            add("GK671", "schedule", self._evidence(near), where=self._where(near), detail=near[0].detail,
                what="a change of one element" if one else "a change of a sparse set of elements")
        if reuse:
            add("GK672", "schedule", self._evidence(reuse), where=self._where(reuse), detail=reuse[0].detail)
        if overwrite:
            add("GK611", "schedule", self._evidence(overwrite), detail=f"{self._where(overwrite)}: "
                f"{overwrite[0].detail}")
        if dists and not plain:
            # A near-duplicate that followed its change wrongly is named by its kind: its values are
            # the base's with some elements pushed out (problem.values.near_duplicate).
            names = sorted({o.kind if o.index in {f.index for f in followed} else o.dist for o in dists})
            add("GK673", "schedule", self._evidence(dists), dists=", ".join(names), where=self._where(dists),
                detail=dists[0].detail)
        if plain:
            self._when(ordered, wrong, plain, add)

    def _when(self, ordered: list[Outcome], wrong: list[Outcome], plain: list[Outcome],
              add: Callable[..., None]) -> None:
        """Plain calls (new values, nothing special) wrong only from some call on: from when
        the process began to look timed, or after a number of calls; else simply wrong."""
        first = wrong[0].index
        before = [o for o in ordered if o.index < first]
        # Changes over time: right before, and wrong on most plain calls after (not a lone slip).
        after = [o for o in ordered if o.index >= first and o.kind == "fresh" and o.dist == "normal"]
        changes = any(o.kind == "fresh" and o.dist == "normal" for o in before) \
            and sum(not o.ok for o in after) >= 0.5 * max(len(after), 1)
        timed_from = int(self.reference.get("timed_from") or 0)
        window = [o.index for o in ordered if o.index >= timed_from][:TIMED_WINDOW]
        if changes and timed_from > 0 and first in window:
            add("GK676", "schedule", self._evidence(wrong), wrong=len(wrong), where=self._where(wrong))
        elif changes and len(before) >= ARMING_PREFIX:
            add("GK674", "schedule", self._evidence(wrong), first=len(before), wrong=len(wrong),
                where=self._where(wrong))
        else:
            add("GK677", "schedule", self._evidence(plain), wrong=len(plain), total=len(ordered),
                where=self._where(plain), detail=plain[0].detail)
