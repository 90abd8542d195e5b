"""Renderings of the Report model: text, JSON, SARIF 2.1.0, GitHub annotations."""
