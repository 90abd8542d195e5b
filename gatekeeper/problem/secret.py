"""Per-run secrets derived from the run seed, one way.

The submission's process sees only derived values (the seed its model is built with), never
the run seed, so it cannot regenerate the inputs the checks and the timing use: each value is
`sha256(master, tag)` where `master` is a slow key derivation of the seed (PBKDF2), so
inverting the seed its model saw by brute force over all 2**31 run seeds takes years.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

_ROUNDS = 20_000  # about 10 ms once per run here; 2**31 of them is out of reach


@lru_cache(maxsize=8)
def master(seed: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", str(int(seed)).encode(), b"gatekeeper-run-secret", _ROUNDS)


def derive(seed: int, tag: str) -> int:
    """A 31-bit value for `tag` (what torch.manual_seed and random.Random accept)."""
    digest = hashlib.sha256(master(seed) + tag.encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def init_seed(seed: int) -> int:
    """The seed both workers build their model with (same weights); the only one the submission sees."""
    return derive(seed, "init")
