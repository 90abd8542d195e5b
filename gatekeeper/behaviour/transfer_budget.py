"""Whether a call's tensors can travel as transfer files now: the free disk against what they
need. Its own module so that the reference worker's trials and its call schedule
(behaviour.schedule_ref) share it without importing each other."""

from __future__ import annotations

from typing import Optional

# Room kept free beside a trial's transfer files: each file exists twice (the parent's copy
# and the submission's), and other checks may share the disk.
DISK_RESERVE = 2 << 30


def disk_shortfall(held_bytes: int) -> Optional[str]:
    """Why a trial's tensors cannot be sent as transfer files now (None: they fit)."""
    from gatekeeper.runtime.disk import free_bytes, gib
    from gatekeeper.sandbox.spill import threshold, worker_dir

    folder = worker_dir()
    if folder is None or held_bytes < threshold():
        return None
    free = free_bytes(folder)
    need = 2 * held_bytes + DISK_RESERVE
    if free is None or free >= need:
        return None
    return (f"not enough disk for this trial's transfer files: {gib(need)} needed (its tensors twice plus "
            f"{gib(DISK_RESERVE)} kept free), {gib(free)} free in {folder}")
