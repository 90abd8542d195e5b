"""A source that a submission rewrites with the same bytes at every import does not compile
its extension again in every job (gatekeeper/runtime/source_stamps.py): real files, real
torch, and a real check whose build folder's ninja log is read."""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import pytest

import gatekeeper
from gatekeeper.runtime import source_stamps

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _rewrite(path: Path, text: str) -> None:
    path.write_text(text, "utf-8")
    later = path.stat().st_mtime_ns + 5_000_000_000  # as if written seconds later
    os.utime(path, ns=(later, later))


def test_the_same_bytes_get_the_time_of_the_last_build_back(tmp_path):
    source, folder = tmp_path / "gen.cpp", tmp_path / "build"
    folder.mkdir()
    source.write_text("int f() { return 1; }\n", "utf-8")
    built = source.stat().st_mtime_ns
    source_stamps.record([str(source)], str(folder))
    _rewrite(source, "int f() { return 1; }\n")
    assert source_stamps.restore([str(source)], str(folder)) == [str(source)]
    assert source.stat().st_mtime_ns == built


def test_one_changed_byte_keeps_the_new_time_and_is_rebuilt(tmp_path):
    source, folder = tmp_path / "gen.cpp", tmp_path / "build"
    folder.mkdir()
    source.write_text("int f() { return 1; }\n", "utf-8")
    source_stamps.record([str(source)], str(folder))
    _rewrite(source, "int f() { return 2; }\n")
    rewritten = source.stat().st_mtime_ns
    assert source_stamps.restore([str(source)], str(folder)) == []
    assert source.stat().st_mtime_ns == rewritten


@pytest.mark.parametrize("record", ["not json", "[1, 2]", '{"%s": {"mtime_ns": "soon"}}', '{"%s": 3}'])
def test_a_record_that_cannot_be_read_changes_nothing(tmp_path, record):
    source, folder = tmp_path / "gen.cpp", tmp_path / "build"
    folder.mkdir()
    _rewrite(source, "int f() { return 1; }\n")
    before = source.stat().st_mtime_ns
    (folder / source_stamps.RECORD).write_text(record.replace("%s", str(source)), "utf-8")
    assert source_stamps.restore([str(source), str(tmp_path / "missing.cpp")], str(folder)) == []
    assert source.stat().st_mtime_ns == before


def test_this_torch_names_the_sources_and_the_build_folder_of_a_compile():
    from torch.utils import cpp_extension

    compile_fn = cpp_extension._jit_compile
    names = list(inspect.signature(compile_fn).parameters)
    args = {name: None for name in names}
    args.update(name="ext", sources=["a.cpp", "/abs/b.cu"], build_directory="/tmp/ext")
    found = source_stamps.sources_and_folder(compile_fn, (), args)
    assert found == ([os.path.abspath("a.cpp"), "/abs/b.cu"], "/tmp/ext")
    assert source_stamps.sources_and_folder(compile_fn, (1, 2, 3), {"nonsense": 1}) is None


def _compiles(cache: Path, target: str) -> int:
    logs = list(cache.glob("torch_extensions/*/*/.ninja_log"))
    return sum(line.split("\t")[3] == target for log in logs
               for line in log.read_text().splitlines() if not line.startswith("#"))


@pytest.mark.slow
def test_a_source_rewritten_at_import_is_not_compiled_again_by_the_next_job():
    # cpu_honest_env_build.py writes its C++ next to itself at every import and builds it with
    # `load`. Before, every job that imported it compiled it again: on a quiet 2-core machine
    # a cold check took 49 s, 24 s of them the behaviour stage's second compile (now 2 s).
    from gatekeeper.build.cache import cache_root

    submission = FIXTURES / "submissions" / "cpu_honest_env_build.py"
    problem = FIXTURES / "problems" / "cpu_mean.py"
    first = gatekeeper.check(submission, problem, stages="behaviour")  # compiles if the cache is cold
    assert first.verdict.value == "pass", [(f.rule, f.message) for f in first.findings]
    compiled = _compiles(cache_root(), "cpu_honest_env_build_gen.o")
    assert compiled >= 1
    again = gatekeeper.check(submission, problem, stages="behaviour")
    assert again.verdict.value == "pass", [(f.rule, f.message) for f in again.findings]
    assert _compiles(cache_root(), "cpu_honest_env_build_gen.o") == compiled
