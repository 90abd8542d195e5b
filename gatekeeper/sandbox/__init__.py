"""The sandbox: run a job in a fresh, limited worker process and get authenticated results.

How to use it (the behaviour and timing stages both do this)::

    from gatekeeper.sandbox import run_job

    result = run_job(
        "gatekeeper.mypackage.jobs:my_job",        # only functions inside `gatekeeper`
        {"submission": "/abs/path/sub.py", "inputs": [packed_tensor, ...]},  # JSON + bytes
        timeouts={"import": 60, "call": 30},       # per phase announced by the job
        default_timeout_s=60,
        memory_mb=16384,                           # RLIMIT_AS, or an RSS poll when
        cap_address_space=True,                    #   cap_address_space=False (CUDA)
        env={"TORCH_EXTENSIONS_DIR": "..."},       # added to the scrubbed environment
        write_roots=["/path/the/job/may/write"],   # besides its private working dir
    )
    result.status        # "ok" | "timeout" | "memory" | "crashed" | "forged"
    result.messages      # verified messages, in order, each a dict with "kind"
    result.phase         # the last phase the job announced (where it failed)
    result.stderr_tail   # for the human reading the finding; never for the verdict
    result.isolation     # "bwrap" | "unshare" | "none" (GATEKEEPER_ISOLATION picks)

The job runs in the worker as ``fn(params: dict, channel)``::

    def my_job(params, channel):
        channel.phase("import")                    # starts the "import" timeout
        module = load_submission(params["submission"])   # gatekeeper.sandbox.loading.load_module
        channel.phase("call")
        out = module.ModelNew()(*unpack_tree(params["inputs"]))
        channel.send("output", value=pack(out))   # tensors: gatekeeper.sandbox.tensors

To overlap a worker's start-up (python, torch, the submission's import) with other work,
start it and feed it later; the job reads the message with `channel.receive()`::

    job = Job("gatekeeper.behaviour.subject_job:subject_job", params, timeouts=..., keep_stdin=True)
    ...                                        # meanwhile: run the reference
    job.feed({"trials": [...]})                # written from a thread; closes stdin after
    result = job.wait()                        # or job.kill()

Guarantees: the worker is a plain `python .../sandbox/worker.py` (spawned; under bubblewrap,
forked from a zygote of that script that has imported torch and nothing of a job, into the
job's own bubblewrap sandbox: sandbox/warm.py) (no -I: the worker has no interpreter-flag
fingerprint; environment and sys.path are checked)
(a bare `gatekeeper` package: jobs import submodules, not `gatekeeper.check`), a scrubbed
environment, a private temporary working directory (HOME and TMPDIR point into it), core
dumps off, an address-space or resident-memory cap, an audit guard that refuses Python-level
writes outside `write_roots` and network connections, a job whose `submission` parameter
names a file run from a private writable copy of the submission's own files (results map its
paths back: sandbox/private_copy.py), and OS isolation when available
(`isolation.detect()`; bubblewrap: a read-only view of only what the job needs, own pid and
network namespaces, docs/threat-model.md; without a pid namespace, through a harness
process, sandbox/shim.py, so that the worker's parent is not gatekeeper). Messages travel over a pipe kept on a private non-inheritable fd,
each framed and HMAC-signed with a per-run secret read from stdin before untrusted code
runs; the parent ignores stdout and the exit code, and a job counts as finished only when
its signed `done` frame arrives. Nothing is unpickled on the parent side.

A worker dies with the thread that started it (PR_SET_PDEATHSIG): start jobs from a thread
that outlives them (the main thread, or the thread that waits for them).

What it does not defend against (docs/threat-model.md): code in the same process as the
job can find the HMAC object in memory and sign its own messages, so the verdict never
trusts a worker that imported a submission to judge itself: it only reports observations,
and the comparisons run in the parent against a reference computed in a separate worker.
"""

from gatekeeper.sandbox.isolation import Isolation, detect
from gatekeeper.sandbox.runner import Job, JobResult, run_job

__all__ = ["Isolation", "Job", "JobResult", "detect", "run_job"]
