"""The behaviour stage: run the submission on fresh, jittered inputs in a sandboxed worker,
run the reference in another worker that never imports the submission, and judge the
observations in the parent. Findings are catalogued in `findings.py` (GK6NN)."""
