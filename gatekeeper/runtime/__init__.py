"""What the run-time stages (build, behaviour, timing) share: the catalogue of run-time checks
(`checks`) and the translation of a sandbox job that did not finish normally into findings
(`failures`). Neutral ground, so that no stage imports another stage's internals."""
