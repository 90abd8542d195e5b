"""One catalogue of every code a report can carry: static rules, build, behaviour and
timing checks, and the notices of the static stage.

The codes are defined where they are judged (rule classes, the behaviour stage's table,
the timing stage's constants); this module reads them from there, so that `gatekeeper
rules`, `gatekeeper explain`, the configuration's validation, --select/--ignore and SARIF
all see the same list.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Iterable, Optional

from gatekeeper.report import Category, Confidence, Finding, Severity, StageName
from gatekeeper.static.examples import source_of

DOCS_URL = "https://github.com/gatekeeper-kernels/gatekeeper/blob/main/docs/rules.md"


@dataclass(frozen=True)
class Entry:
    code: str
    name: str
    category: Category
    stage: StageName
    severity: Severity  # under the default profile
    summary: str
    docs: str  # dedented prose
    hint: str
    kind: str  # "rule" (static, a class), "check" (build/behaviour), "timing"
    confidence: Confidence = Confidence.CERTAIN
    confirmed_by: Optional[str] = None
    needs_problem: bool = False
    options: dict = field(default_factory=dict)
    strict_severity: Optional[Severity] = None
    lenient_severity: Optional[Severity] = None
    invalid_example: Optional[str] = None
    valid_example: Optional[str] = None

    @property
    def help_uri(self) -> str:
        return f"{DOCS_URL}#{self.code.lower()}"

    def severity_for(self, profile: str) -> Severity:
        if profile == "strict" and self.strict_severity is not None:
            return self.strict_severity
        if profile == "lenient" and self.lenient_severity is not None:
            return self.lenient_severity
        return self.severity


def clean(text: str) -> str:
    """Docstring text without its indentation, paragraphs kept."""
    text = (text or "").strip("\n")
    first, _, rest = text.partition("\n")
    return (first.strip() + ("\n" + textwrap.dedent(rest) if rest else "")).strip()


def _from_rule(rule) -> Entry:
    return Entry(
        code=rule.code, name=rule.name, category=rule.category, stage=StageName.STATIC,
        severity=rule.severity, summary=rule.summary, docs=clean(rule.__doc__ or rule.summary),
        hint=rule.hint, kind="rule", confidence=rule.confidence, confirmed_by=rule.confirmed_by,
        needs_problem=rule.needs_problem, options=dict(rule.options),
        strict_severity=rule.strict_severity, lenient_severity=rule.lenient_severity,
        invalid_example=source_of(rule.INVALID[0]) if rule.INVALID else None,
        valid_example=source_of(rule.VALID[0]) if rule.VALID else None,
    )


def _words(name: str) -> str:
    """ReturnsEarlierOutput -> returns earlier output; NotAPlainTensor -> not a plain tensor."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", name).lower()


def _template(message: str) -> str:
    """A message template as the reader sees it, its parts to be filled in as <part>."""
    return re.sub(r"\{([a-z_]+)\}", lambda m: f"<{m.group(1)}>", message)


def _run_time_entries() -> list[Entry]:
    out: list[Entry] = []
    try:
        from gatekeeper.runtime.checks import CATALOGUE
    except ImportError:  # a slimmed install without the run-time stages
        CATALOGUE = {}
    from gatekeeper.runtime.check_docs import doc_for

    for check in CATALOGUE.values():
        stage = StageName.BUILD if check.code.startswith("GK68") else StageName.BEHAVIOUR
        doc = doc_for(check.code)
        out.append(Entry(
            code=check.code, name=check.name, category=check.category, stage=stage, severity=check.severity,
            summary=_words(check.name), docs=_run_time_docs(stage, doc, check.message),
            hint=check.hint, kind="check", strict_severity=check.strict_severity,
            lenient_severity=getattr(check, "lenient_severity", None),
            invalid_example=doc.flagged if doc else None,
            valid_example=doc.clean if doc else None))
    try:
        from gatekeeper.timing.findings import RULES
    except ImportError:
        RULES = ()
    for rule in RULES:
        doc = doc_for(rule.code)
        out.append(Entry(
            code=rule.code, name=rule.name, category=rule.category, stage=StageName.TIMING,
            severity=rule.severity, summary=rule.summary, docs=_run_time_docs(StageName.TIMING, doc, rule.message),
            hint=rule.hint, kind="timing", invalid_example=doc.flagged if doc else None,
            valid_example=doc.clean if doc else None))
    return out


_HOW = {
    StageName.BUILD: "The build stage compiles the submission's extensions in a sandbox.",
    StageName.BEHAVIOUR: "The behaviour stage runs the submission and the reference in separate sandboxed "
                         "workers on the same inputs and compares what they do.",
    StageName.TIMING: "The timing stage times the submission against the reference on the GPU.",
}


def _run_time_docs(stage: StageName, doc, message: str) -> str:
    """What the check observes and why it matters; a code without its texts yet shows its message."""
    if doc is None:
        return f"{_HOW[stage]} It reports: \"{_template(message)}\"."
    what = doc.what[:1].upper() + doc.what[1:]  # a sentence, even when it opens with `forward`
    return f"{what}\n\nWhy it matters: {doc.why}\n\n{_HOW[stage]}"


def _notices() -> list[Entry]:
    from gatekeeper.static.no_problem import NoProblemGiven
    from gatekeeper.static.shapes_notice import ShapesNotReadStatically

    return [_from_rule(NoProblemGiven), _from_rule(ShapesNotReadStatically)]


@lru_cache(maxsize=16)
def _catalogue(rule_dirs: tuple[str, ...]) -> dict[str, Entry]:
    from gatekeeper.static.discovery import discover_rules

    entries = [_from_rule(r) for r in discover_rules(rule_dirs)] + _notices() + _run_time_entries()
    found: dict[str, Entry] = {}
    for entry in entries:
        found.setdefault(entry.code, entry)  # a static rule keeps its code; discovery refuses duplicates
    return dict(sorted(found.items()))


def catalogue(rule_dirs: Iterable[str] = ()) -> dict[str, Entry]:
    """Every code, sorted: {code: Entry}."""
    return _catalogue(tuple(rule_dirs))


# Names given up so that no two codes share one (issue 21): the old name still finds its code.
RENAMED = {"nomodelnew": "GK666"}  # GK650 was PatchesHarness too, which stays GK414's name


def lookup(key: str, rule_dirs: Iterable[str] = ()) -> Optional[Entry]:
    """An entry by code (any case) or by name (a renamed code also by its old name)."""
    found = catalogue(rule_dirs)
    if key.upper() in found:
        return found[key.upper()]
    by_name = next((e for e in found.values() if e.name.lower() == key.lower()), None)
    return by_name or found.get(RENAMED.get(key.lower(), ""))


def closest(key: str, rule_dirs: Iterable[str] = ()) -> Optional[str]:
    """The code or name nearest to a mistyped one (GK2O3 -> GK203), for error messages."""
    import difflib

    found = catalogue(rule_dirs)
    words = list(found) + [e.name for e in found.values()] + [c.value for c in Category] + [
        s.value for s in StageName]
    fixed = key.upper().replace("O", "0").replace("I", "1").replace("L", "1")
    if fixed in found:
        return fixed
    match = difflib.get_close_matches(key, words, n=1, cutoff=0.6) or difflib.get_close_matches(
        key.upper(), list(found), n=1, cutoff=0.5)
    return match[0] if match else None


def matches(entry: Entry, selector: str) -> bool:
    """--select/--ignore: a code (GK203), a code prefix (GK2, GK20), a category
    (hardcoded-shape), a stage (behaviour) or ALL."""
    selector = selector.strip()
    if selector.upper() == "ALL":
        return True
    if selector.upper().startswith("GK"):
        return entry.code.startswith(selector.upper())
    return selector.lower() in (entry.category.value, entry.stage.value, entry.name.lower())


def selector_known(selector: str, rule_dirs: Iterable[str] = ()) -> bool:
    return any(matches(e, selector) for e in catalogue(rule_dirs).values())


def _profile_severity(finding: Finding, config) -> Optional[Severity]:
    """A run-time check's severity under the active profile (its `strict_severity`), when
    that differs from the default it was made with."""
    try:
        from gatekeeper.runtime.checks import CATALOGUE
    except ImportError:
        return None
    check = CATALOGUE.get(finding.rule)
    if check is None or finding.severity != check.severity:
        return None
    wanted = check.severity_for(getattr(config, "profile", "default"))
    return wanted if wanted != finding.severity else None


def configured(findings: list[Finding], config) -> list[Finding]:
    """Run-time findings under the configuration: `enabled = false` drops a code, a
    `severity` replaces its default, like a static rule's settings."""
    out = []
    for finding in findings:
        settings = config.rule(finding.rule)
        if not settings.enabled:
            continue
        profiled = _profile_severity(finding, config)
        if settings.severity is None and profiled is not None:
            finding = finding.model_copy(update={"severity": profiled})
        if settings.severity is not None and settings.severity != finding.severity:
            finding = finding.model_copy(update={"severity": settings.severity})
        out.append(finding)
    return out


# A stage that runs needs the ones before it that prepare its work: the build stage compiles
# what the behaviour and timing stages run, so it is idle only when they are too.
_NEEDS_BUILD = (StageName.BUILD, StageName.BEHAVIOUR, StageName.TIMING)


def idle_stages(config) -> frozenset:
    """The stages with no enabled code under `config` (its select/ignore and `enabled = false`)."""
    enabled: set[StageName] = set()
    for code, entry in catalogue(config.rule_dirs).items():
        if config.rule(code).enabled:
            enabled.add(entry.stage)
    idle = {stage for stage in (StageName.STATIC, StageName.BEHAVIOUR, StageName.TIMING) if stage not in enabled}
    if not enabled.intersection(_NEEDS_BUILD):
        idle.add(StageName.BUILD)
    return frozenset(idle)


def severity_under(entry: Entry, profile: str, settings=None) -> tuple[str, Optional[str]]:
    """The severity a finding of `entry` gets under `profile` (the configuration's `enabled`
    and `severity` first), and why it is held when the verdict policy holds it: outside
    `strict`, a static error that is not certain is an unconfirmed warning until the run-time
    check it names confirms it (gatekeeper.static.findings.weigh; docs/profiles.md)."""
    if settings is not None and not settings.enabled:
        return "off", None
    severity = (settings.severity if settings is not None and settings.severity else None) or entry.severity_for(profile)
    held = (entry.stage == StageName.STATIC and entry.confidence != Confidence.CERTAIN
            and severity == Severity.ERROR and profile != "strict")
    if not held:
        return severity.value, None
    if entry.confirmed_by:
        return Severity.WARNING.value, f"unconfirmed; an error when {entry.confirmed_by} confirms it"
    return Severity.WARNING.value, "unconfirmed; no run-time check settles it"
