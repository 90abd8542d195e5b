"""gatekeeper's built-in rule pack: one rule class per file, with its documentation, its
hint and its VALID/INVALID examples. The analyses rules share live in
gatekeeper/analyses/; installed, this folder is the package `gatekeeper_rules`."""
