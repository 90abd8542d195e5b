"""The name the package is installed under, which is not the name it is imported under.

`gatekeeper` on PyPI is an unrelated 2017 project, so `pip install 'gatekeeper[ray]'`
installs the wrong thing. The distribution is `kernel-gatekeeper`; `import gatekeeper`
and the `gatekeeper` command are unchanged. Every install hint is built here, so that no
message can name the wrong package (tests/test_distribution.py greps for strays).
"""

from __future__ import annotations

from typing import Optional

DISTRIBUTION = "kernel-gatekeeper"


def pip_install(extra: Optional[str] = None) -> str:
    """The command that installs gatekeeper, with an optional extra: pip install 'kernel-gatekeeper[ray]'."""
    return f"pip install '{DISTRIBUTION}[{extra}]'" if extra else f"pip install {DISTRIBUTION}"
