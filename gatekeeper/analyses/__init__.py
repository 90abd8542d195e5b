"""Analyses the rules in rules/ share: return-value flow, memo keys, C++ number roles,
torch usage and policy, own definitions, harness names, stream joins. No rule lives here."""
