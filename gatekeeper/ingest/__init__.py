"""Leaderboard ingestion: many untrusted submissions, checked in parallel worker processes,
each verdict stored with its evidence in SQLite, resumable after any interruption.

Kept empty on purpose: `gatekeeper check` imports the CLI plug-in at start-up, so nothing
here may import heavy modules at module level.
"""
