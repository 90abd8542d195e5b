"""torch's own lazy set-up is not harness tampering (GK650).

Importing torch._dynamo, which `@torch.library.custom_op` and `torch.compile` do on first use,
replaces `torch.manual_seed` with `torch._disable_dynamo(torch.manual_seed)`. An honest
submission that defines a custom op was rejected for "replacing" it. The identity check now
counts torch's own wrapper as the function it wraps, and nothing else: the same wrapper
around another function is still a replacement. Each case runs in a fresh interpreter, where
torch._dynamo has not been imported yet."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = r"""
import json, sys, torch
from gatekeeper.behaviour.observe import changed, identities
assert "torch._dynamo" not in sys.modules
before = identities()
@torch.library.custom_op("gk_test::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2
twice(torch.ones(2))
after_custom_op = identities()
out = {"dynamo_imported": "torch._dynamo" in sys.modules, "custom_op": changed(before, after_custom_op)}
torch.manual_seed = torch._disable_dynamo(lambda seed: None)  # torch's wrapper, around another function
out["wrapped_fake"] = changed(after_custom_op, identities())
print(json.dumps(out))
"""


def test_torchs_own_dynamo_wrapper_is_not_a_replacement_but_the_same_wrapper_of_a_fake_is():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["dynamo_imported"]  # the case is real: torch did wrap manual_seed
    assert seen["custom_op"] == []
    assert seen["wrapped_fake"] == ["torch.manual_seed"]
