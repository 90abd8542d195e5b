"""Rule instances kept from file to file, one set per rule set (see RuleSet)."""

from __future__ import annotations

from itertools import compress, repeat
from operator import not_
from typing import Callable, Iterable, Optional

from gatekeeper.static.rule import SWITCHED_OFF, Rule
from gatekeeper.static.traversal import Traversal, handler_names

_ONCE = frozenset({"check_cpp", "finish"})  # called once per source / file, not per node


class RuleSet:
    """One instance of each rule of a rule set, and the traversal over them, reused from
    file to file: each file runs every rule's `__init__` again on an emptied instance (the
    same state as a new one), while the handlers bound for each node type are kept: on
    real files, binding them anew for every file was about 1% of the stage."""

    def __init__(self, classes: tuple[type[Rule], ...]) -> None:
        self.rules: list[Rule] = [cls.__new__(cls) for cls in classes]
        self.traversal = Traversal(None, self.rules)
        self.handlers = [frozenset(f"visit_{n}" for n in v) | frozenset(f"leave_{n}" for n in l) | _ONCE
                         for v, l in map(handler_names, classes)]
        self.once: Optional[tuple[list[Callable], list[Callable]]] = None
        self.sets: list[Optional[frozenset[str]]] = []
        self.nones: Optional[list[tuple[int, str]]] = []

    def check_switches(self) -> None:
        """Forget the bound plans unless this file's rules switch off the same handlers as
        the last file's did: the same SWITCHED_OFF sets (Rule.switch_off_inherited), and
        the same handlers set to None on an instance. Two C-level passes in the usual case."""
        states = list(map(vars, self.rules))
        sets = list(map(dict.get, states, repeat(SWITCHED_OFF)))
        nones: Optional[list[tuple[int, str]]] = []
        free = list(map(frozenset.isdisjoint, self.handlers, states))
        if not all(free):
            nones = self._handlers_on_instances(states, compress(range(len(free)), map(not_, free)))
        if nones is None or sets != self.sets or nones != self.nones:
            self.sets, self.nones = sets, nones
            self.traversal.plans.clear()
            self.once = None

    def calls(self) -> tuple[list[Callable], list[Callable]]:
        """The rules' `check_cpp` and `finish`, bound, leaving out Rule's own (they do nothing)."""
        if self.once is None:
            self.once = tuple(  # type: ignore[assignment]
                [getattr(rule, name) for rule in self.rules
                 if getattr(rule, name) is not None and (name in vars(rule) or getattr(type(rule), name) is not getattr(Rule, name))]
                for name in ("check_cpp", "finish"))
        return self.once  # type: ignore[return-value]

    def _handlers_on_instances(self, states: list[dict], positions: Iterable[int]) -> Optional[list[tuple[int, str]]]:
        """(rule position, handler) for each handler an instance at `positions` sets to None;
        None when an instance swaps a handler for another function (bound afresh every file)."""
        out: list[tuple[int, str]] = []
        for position in positions:
            state = states[position]
            for name in self.handlers[position].intersection(state):
                if state[name] is not None:
                    return None
                out.append((position, name))
        out.sort()
        return out


# Idle rule sets by rule classes: a file takes one (or builds one) and gives it back when
# done, so concurrent or nested checks never share instances.
IDLE: dict[tuple[type[Rule], ...], list[RuleSet]] = {}


def take_rule_set(classes: tuple[type[Rule], ...]) -> RuleSet:
    idle = IDLE.get(classes)
    if idle:
        try:
            return idle.pop()
        except IndexError:  # another thread took the last one
            pass
    if len(IDLE) > 16:
        IDLE.clear()
    return RuleSet(classes)


def give_back(classes: tuple[type[Rule], ...], held: RuleSet) -> None:
    """Empty the instances (they would keep the file's tree alive) and make them idle."""
    for rule in held.rules:
        rule.__dict__.clear()
    held.traversal.stop()
    IDLE.setdefault(classes, []).append(held)
