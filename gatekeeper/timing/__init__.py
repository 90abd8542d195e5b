"""Timing and scoring on the GPU: honest device times, physical floors, speedup, speed of light.

Pure parts (stats, adaptive, specs, floors arithmetic, score, findings, render) import no
CUDA and run anywhere; `method`, `calibrate` and `jobs` need a GPU and run inside the
sandboxed worker. See docs/timing.md.
"""
