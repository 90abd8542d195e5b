"""Parent side of the sandbox: start a fresh worker, feed it a job, collect signed results.

The parent never imports submission code and decides nothing from the worker's exit code
or stdout: only frames that verify against this run's secret count, and the job counts as
finished only when its `done` frame arrives.
"""

from __future__ import annotations

import os
import queue
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Optional

from gatekeeper.sandbox import harness, warm
from gatekeeper.sandbox.drain import Drain
from gatekeeper.sandbox.process_tree import job_rss_mb, kill_job, rss_mb  # noqa: F401 - re-exported (timing.conduct)
from gatekeeper.sandbox.channel import FrameReader, pack_message, pack_parts, parts_size
from gatekeeper.sandbox.collect import collect
from gatekeeper.sandbox.isolation import Isolation, detect, require
from gatekeeper.sandbox.job_result import JobResult  # noqa: F401 - re-exported
from gatekeeper.sandbox.private_copy import PrivateCopy, make_copy
from gatekeeper.sandbox.reaper import reap_tagged, tag
from gatekeeper.sandbox.scrub import scrub_message, scrub_text
from gatekeeper.sandbox.spill import BYTES_ENV, DIR_ENV, adopt_tree, export_tree, threshold

# Environment variables a worker may inherit; everything else is dropped.
_KEEP_ENV = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH",
             "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CC", "CXX", "CUDAHOSTCXX", "NVCC_CCBIN",
             "TORCH_CUDA_ARCH_LIST", "TERM")
_TAIL = 4000
WORKER_SCRIPT = str(Path(__file__).resolve().with_name("worker.py"))


def scrubbed_env(extra: Optional[dict[str, str]], workdir: Path) -> dict[str, str]:
    env = {k: os.environ[k] for k in _KEEP_ENV if k in os.environ}
    # The interpreter's own bin first (ninja, the compiler wrappers pip installed next to it).
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "/usr/bin:/bin")])
    tmp = workdir / "tmp"
    tmp.mkdir(exist_ok=True)
    env.update({"HOME": str(workdir), "TMPDIR": str(tmp), "PYTHONHASHSEED": "0",
                "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"})
    env.update(extra or {})
    return env


def run_job(job: str, params: dict[str, Any], **kwargs: Any) -> JobResult:
    """Run `job` ("gatekeeper.module:function") in a fresh sandboxed worker and wait for it.

    `params` is JSON plus bytes (tensors travel as bytes). `timeouts` maps a phase name the
    job announces (`channel.phase("import")`) to its wall-clock limit; phases not listed get
    `default_timeout_s`. Keyword arguments are those of `Job`.
    """
    return Job(job, params, **kwargs).wait()


class Job:
    """A started worker. `feed(data)` sends one more message the job reads with
    `channel.receive()` (e.g. inputs computed while the worker was importing); `wait()`
    collects until the done frame, a limit, or the end of the process."""

    def __init__(
        self,
        job: str,
        params: dict[str, Any],
        *,
        timeouts: dict[str, float],
        default_timeout_s: float = 60.0,
        memory_mb: Optional[int] = None,
        cap_address_space: bool = True,
        env: Optional[dict[str, str]] = None,
        write_roots: Optional[list[str]] = None,
        read_files: Optional[list[str]] = None,
        isolate: bool = True,
        workdir: Optional[Path] = None,
        keep_stdin: bool = False,
        verbatim_errors: bool = False,
        spill: bool = True,
    ) -> None:
        self.isolation: Isolation = require(detect()) if isolate else Isolation("none", "isolation not requested")
        # Under `none` the process started here is sandbox/shim.py, the worker's parent: a
        # submission can signal it, and what happened to it is then the submission's failure.
        self.shim = not self.isolation.own_pid_namespace
        self.own_dir = workdir is None
        self.work = Path(tempfile.mkdtemp(prefix="tmp")) if self.own_dir else Path(workdir)
        # The submission runs from a private, writable copy of its own files, never from the
        # user's folder (sandbox/private_copy.py); results name the user's paths again.
        try:
            self.copy: Optional[PrivateCopy] = _private_copy(params)
        except BaseException:
            if self.own_dir:
                shutil.rmtree(self.work, ignore_errors=True)
            raise
        # The copy is the job's writable folder; the original is not among the files it is shown.
        named = _named_files({k: v for k, v in params.items() if self.copy is None or k != "submission"})
        if self.copy is not None:
            params = dict(params, submission=self.copy.submission)
            write_roots = list(write_roots or []) + [self.copy.folder]
        self.timeouts, self.default_timeout_s = timeouts, default_timeout_s
        # What a submission says goes into reports only scrubbed (docs/threat-model.md):
        # the build's compiler output is the exception, and even there the view is bwrap's.
        self.verbatim_errors = verbatim_errors
        self.rss_cap_mb = memory_mb if not cap_address_space else None
        self.fed_bytes: list[int] = []  # sizes of the messages fed, in order (seq = index)
        self.fed_written = 0
        self.feed_error: Optional[str] = None
        self._outbox: "queue.Queue[tuple[bytes, bool]]" = queue.Queue()
        self._feeder: Optional[threading.Thread] = None
        self._handled, self._handled_count = threading.Condition(), 0
        secret = os.urandom(32)
        self.reader = FrameReader(secret)
        spec = {"job": job, "params": params, "memory_mb": memory_mb, "cap_address_space": cap_address_space,
                "write_roots": [str(self.work)] + list(write_roots or [])}
        payload = pack_message(spec)
        self.read_fd, write_fd = os.pipe()
        self.started = time.monotonic()
        self.result = JobResult(status="crashed", isolation=self.isolation.name)
        worker_env = scrubbed_env(env, self.work)
        # Large tensors travel as files in this folder (sandbox.spill), not inside frames.
        self.spill_dir: Optional[Path] = None
        self.spill_fd: Optional[int] = None
        if spill:
            self.spill_dir = self.work / "xfer"
            self.spill_dir.mkdir(mode=0o700, exist_ok=True)
            # Held open: the parent reads and writes this folder even if the worker renames it.
            self.spill_fd = os.open(self.spill_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            worker_env.update({DIR_ENV: str(self.spill_dir), BYTES_ENV: str(threshold())})
            write_roots = list(write_roots or []) + [str(self.spill_dir)]  # the guard allows it (inside work)
        self.tag = tag(worker_env)
        self.warm_child: Optional[int] = None
        self.warm_zygote: Optional[int] = None  # the zygote's pid, for a job forked from one
        try:
            read_paths, writes = named + list(read_files or []), list(write_roots or [])
            # Under bubblewrap the job is forked into its sandbox by a process that has already
            # imported torch (sandbox/warm.py); anything off on the way runs it classically.
            launched = warm.launch(self.isolation, workdir=self.work, read_paths=read_paths, write_paths=writes,
                                   env=worker_env, result_fd=write_fd)
            if launched is not None:
                self.proc, self.warm_child, self.warm_zygote = launched.proc, launched.child_pid, launched.zygote_pid
                self.stdin, stdout, stderr = launched.stdin, launched.stdout, launched.stderr
            else:
                # A plain interpreter command line, as a user's harness would run (issue 22): the
                # protections of -I are kept by the allowlisted environment and by worker.py itself.
                argv = self.isolation.wrap([sys.executable, WORKER_SCRIPT, str(write_fd)], workdir=self.work,
                                           read_paths=read_paths, write_paths=writes)
                # stdout/stderr are pipes drained by threads that keep the tail: no disk, no cap to outrun.
                self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE, cwd=self.work, env=worker_env,
                                             pass_fds=(write_fd,), start_new_session=True)
                assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
                self.stdin, stdout, stderr = self.proc.stdin, self.proc.stdout, self.proc.stderr
        except BaseException:
            if self.copy is not None:
                self.copy.release()
            raise
        finally:
            os.close(write_fd)
        self.out, self.err = Drain(stdout), Drain(stderr)
        del secret  # the FrameReader keeps only its HMAC state
        if not self._write(self.reader.secret_prefix() + struct.pack(">Q", len(payload)) + payload):
            self.feed_error = f"the job could not be sent to the worker: {self.feed_error}"
        if not keep_stdin:
            self.close_stdin()

    def _write(self, *parts: Any) -> bool:
        """Write to the worker's stdin; a failure is recorded (never swallowed): the stage
        turns it into an infrastructure error unless the worker's own failure explains it."""
        try:
            for part in parts:
                self.stdin.write(part)
            self.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError) as exc:
            if self.feed_error is None:
                self.feed_error = (f"writing {parts_size(list(parts))} bytes to the worker's stdin failed "
                                   f"({type(exc).__name__}: {exc})")
            return False

    def feed(self, message: dict[str, Any], close: bool = True) -> None:
        """Send one message to the job's `channel.receive()`. Messages go out in the order
        fed, from one writer thread (so a worker that never reads, hung at import, cannot
        block the parent on a full pipe, and a small later message can never overtake a large
        earlier one); each carries its sequence number, which the worker acknowledges."""
        seq = len(self.fed_bytes)
        if self.spill_dir is not None:  # adopted large tensors become files in this worker's folder
            message = export_tree(message, str(self.spill_dir), dir_fd=self.spill_fd)
        parts = pack_parts(dict(message, __seq__=seq))  # a large tensor is sent as it is, not joined
        size = parts_size(parts)
        self.fed_bytes.append(size)
        self._outbox.put(([struct.pack(">Q", size), *parts], close))
        if self._feeder is None:
            self._feeder = threading.Thread(target=self._write_all, daemon=True)
            self._feeder.start()

    def _write_all(self) -> None:
        while True:
            parts, close = self._outbox.get()
            if self.feed_error is None and self._write(*parts):
                self.fed_written += 1
            with self._handled:
                self._handled_count += 1
                self._handled.notify_all()
            if close:
                self.close_stdin()
                return

    def flush(self, timeout_s: float) -> bool:
        """Wait until every message fed so far was written (or its write failed)."""
        with self._handled:
            return self._handled.wait_for(lambda: self._handled_count >= len(self.fed_bytes), timeout_s)

    def close_stdin(self) -> None:
        try:
            self.stdin.close()
        except (BrokenPipeError, OSError, ValueError):  # ValueError: closed by the writer thread at once
            pass

    def kill(self) -> JobResult:
        """Stop the worker now (its result says so) and clean up."""
        kill_job(self.proc)
        reap_tagged(self.tag)
        self.result.status, self.result.detail = "killed", "stopped by the parent"
        self.close_stdin()
        for drain in (self.out, self.err):
            drain.finish(0.5)
            drain.close()
        os.close(self.read_fd)
        self._close_spill()
        if self.copy is not None:
            self.copy.release()
        if self.own_dir:
            shutil.rmtree(self.work, ignore_errors=True)
        return self.result

    def _record_feed(self, result: JobResult) -> None:
        if self._feeder is not None:
            self._feeder.join(timeout=5)  # stdin was closed: a blocked write has failed by now
        result.fed_bytes, result.fed_written = list(self.fed_bytes), self.fed_written
        result.feed_error = self.feed_error

    def _blame_harness(self, result: JobResult) -> None:
        """A shim the submission killed or stopped: its run-time failure, whatever else it sent."""
        why = harness.blame(self.proc)
        if not why:
            return
        if result.status == "forged":  # a forged frame stays the verdict
            result.detail = f"{result.detail}; {why}"
            return
        earlier = f" (before that: {result.detail})" if result.status not in ("ok", "crashed") else ""
        result.status, result.detail = "crashed", why + earlier

    def _adopt(self, result: JobResult) -> None:
        """Large tensors the worker sent as files: verified against their signed digests and
        unlinked; a missing, truncated or altered file makes the whole result forged."""
        if self.spill_dir is None:
            return
        try:
            result.messages = [adopt_tree(m, str(self.spill_dir), self.spill_fd) for m in result.messages]
        except Exception as exc:  # SpillError, an OS error, a malformed descriptor: nothing of it is used
            why = f"a large tensor sent as a file failed its check: {exc}"
            if result.status == "ok":
                result.status, result.detail = "forged", why
            else:  # already a timeout or a crash: that stays the verdict
                result.detail = f"{result.detail}; {why}"
            result.messages = []
        self._close_spill()

    def _close_spill(self) -> None:
        if self.spill_fd is not None:
            os.close(self.spill_fd)
            self.spill_fd = None
        if not self.own_dir and self.spill_dir is not None:
            shutil.rmtree(self.spill_dir, ignore_errors=True)

    def wait(self) -> JobResult:
        result = self.result
        try:
            collect(self.proc, self.read_fd, self.reader, result, self.timeouts, self.default_timeout_s,
                    self.rss_cap_mb, self.warm_child)
            self.close_stdin()
            result.returncode = self.proc.returncode
            self._record_feed(result)
            copy = self.copy
            if copy is not None:  # before the scrub, which cuts long lines
                result.messages = copy.to_original(result.messages)
            if not self.verbatim_errors:
                result.messages = [scrub_message(m) for m in result.messages]
            if copy is not None:  # our own words, after the scrub
                result.messages = [copy.note_left_out(m) for m in result.messages]
        finally:
            kill_job(self.proc)  # the wrapper (bwrap's init) and with it everything the job started
            if self.shim:
                self._blame_harness(result)
            reap_tagged(self.tag)
            for drain in (self.out, self.err):
                drain.finish()
                drain.close()
            out_tail, err_tail = self.out.tail(_TAIL), self.err.tail(_TAIL)
            if self.copy is not None:
                out_tail, err_tail = self.copy.to_original(out_tail), self.copy.to_original(err_tail)
            result.stdout_tail = scrub_text(out_tail, 1000)
            result.stderr_tail = err_tail if self.verbatim_errors else scrub_text(err_tail, 2000)
            result.output_dropped_bytes = self.out.dropped() + self.err.dropped()
            self._adopt(result)  # after the kill: no worker can change a file any more
            os.close(self.read_fd)
            if self.copy is not None:
                self.copy.release()
            if self.own_dir:
                shutil.rmtree(self.work, ignore_errors=True)
        result.elapsed_s = time.monotonic() - self.started
        return result


def _named_files(params: dict[str, Any]) -> list[str]:
    """Files a job's parameters name (the submission, the problem): the only user files a
    bubblewrap worker sees, read-only, at the same path."""
    return [v for v in params.values() if isinstance(v, str) and os.path.isabs(v) and os.path.isfile(v)]


def _private_copy(params: dict[str, Any]) -> Optional[PrivateCopy]:
    """The private copy for a job whose `submission` parameter names a file (the build,
    behaviour and timing jobs), else None."""
    path = params.get("submission")
    if isinstance(path, str) and os.path.isabs(path) and os.path.isfile(path):
        return make_copy(path)
    return None
