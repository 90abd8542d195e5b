"""A submission that writes next to itself runs from a private writable copy of its own files
(gatekeeper/sandbox/private_copy.py): what is copied (the bundle, bounded, no link out of the
folder), where (a stable path, private per job), and, run through `gatekeeper.check` under
every isolation level, that such a write is no escape, a write outside the copy still is
(GK665, reported under the user's path), and the user's folder is unchanged afterwards."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

import gatekeeper
from gatekeeper.sandbox import private_copy
from gatekeeper.sandbox.isolation import _detect
from gatekeeper.sandbox.private_copy import make_copy

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = ROOT / "fixtures/problems/cpu_mean.py"


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GATEKEEPER_CACHE_DIR", str(tmp_path / "cache"))


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def _snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    """Every entry under `folder`: its content hash (or 'dir'/'link') and modification time."""
    out = {}
    for path in sorted(folder.rglob("*")):
        stat = path.lstat()
        kind = "link" if path.is_symlink() else "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
        out[path.relative_to(folder).as_posix()] = (kind, stat.st_mtime_ns)
    return out


def _bundle(tmp_path: Path) -> Path:
    folder = tmp_path / "work" / "mysub"
    (folder / "csrc").mkdir(parents=True)
    (folder / "solution.py").write_text("import kernels\n\nclass ModelNew:\n    pass\n")
    (folder / "kernels.py").write_text("X = 1\n")
    (folder / "csrc" / "k.cpp").write_text("int f() { return 1; }\n")
    (folder / "notes.txt").write_text("not part of the submission\n")
    for i in range(300):  # a corpus folder: the other submissions are not copied
        (folder / f"other_{i}.py").write_text("class ModelNew:\n    pass\n")
    os.utime(folder / "csrc" / "k.cpp", ns=(1_000_000_000, 1_000_000_000))
    return folder / "solution.py"


def test_the_copy_holds_the_bundle_only_with_the_original_times(own_cache, tmp_path):
    submission = _bundle(tmp_path)
    copy = make_copy(str(submission))
    try:
        folder = Path(copy.folder)
        assert _files(folder) == {"solution.py", "kernels.py", "csrc/k.cpp"}
        assert Path(copy.submission) == folder / "solution.py" and folder.name == "mysub"
        assert (folder / "csrc/k.cpp").stat().st_mtime_ns == 1_000_000_000  # ninja compares these
        assert not copy.left_out
        assert str(tmp_path / "cache") in copy.folder  # under the cache, never in the user's folder
    finally:
        copy.release()
    assert not Path(copy.slot).exists()


def test_links_out_of_the_folder_are_not_followed(own_cache, tmp_path):
    submission = _bundle(tmp_path)
    secret = tmp_path / "secret.cu"
    secret.write_text("int secret_value = 42;\n")
    (submission.parent / "leak.cu").symlink_to(secret)
    (submission.parent / "alias.cpp").symlink_to(submission.parent / "csrc" / "k.cpp")  # inside: fine
    copy = make_copy(str(submission))
    try:
        assert "leak.cu" not in _files(Path(copy.folder))
        assert "alias.cpp" in _files(Path(copy.folder))
        why = copy.left_out[str(submission.parent / "leak.cu")]
        assert "link" in why and "outside the submission's folder" in why
        assert all("secret_value" not in p.read_text() for p in Path(copy.folder).rglob("*") if p.is_file())
    finally:
        copy.release()


def test_large_files_beside_it_are_left_out_and_said(own_cache, tmp_path, monkeypatch):
    submission = _bundle(tmp_path)
    monkeypatch.setattr(private_copy, "FILE_BYTES", 1000)
    monkeypatch.setattr(private_copy, "TOTAL_BYTES", 2500)
    (submission.parent / "big.cu").write_text("x" * 1001)
    for name in ("a.cu", "b.cu", "c.cu"):  # each under the per-file limit; together over the total
        (submission.parent / name).write_text("y" * 900)
    submission.write_text(submission.read_text() + "#" * 5000)  # the submission itself is always copied
    copy = make_copy(str(submission))
    try:
        copied = _files(Path(copy.folder))
        assert "solution.py" in copied and "big.cu" not in copied
        assert "it is 1001 bytes, over the 1000 bytes limit for one file" in copy.left_out[str(submission.parent / "big.cu")]
        assert sum(name in copied for name in ("a.cu", "b.cu", "c.cu")) < 3
        assert any("in all" in why for why in copy.left_out.values())
        error = {"kind": "error", "type": "FileNotFoundError", "message": "[Errno 2] No such file: 'big.cu'"}
        said = copy.note_left_out(error)["message"]
        assert said.startswith("[Errno 2]") and "gatekeeper did not copy" in said and "keep large files out" in said
        assert copy.note_left_out({"kind": "error", "message": "unrelated"})["message"] == "unrelated"
    finally:
        copy.release()


def test_the_path_is_stable_and_each_job_gets_a_fresh_private_copy(own_cache, tmp_path):
    submission = _bundle(tmp_path)
    first = make_copy(str(submission))
    (Path(first.folder) / "generated.cu").write_text("written by the first job\n")
    first.release()
    second = make_copy(str(submission))
    try:
        assert second.folder == first.folder  # the same path: torch's ninja file stays valid
        assert "generated.cu" not in _files(Path(second.folder))  # nothing of the first job is left
        concurrent = make_copy(str(submission))  # while the second holds its slot
        try:
            assert concurrent.folder != second.folder
            assert Path(concurrent.folder).name == Path(second.folder).name == "mysub"
        finally:
            concurrent.release()
    finally:
        second.release()
    assert not list(Path(second.slot).parent.iterdir())  # no slot and no lock file left behind


def test_paths_in_results_name_the_users_files(own_cache, tmp_path):
    submission = _bundle(tmp_path)
    copy = make_copy(str(submission))
    copy.release()
    original = str(submission.parent)
    message = {"kind": "error", "traceback": f'File "{copy.folder}/kernels.py", line 1',
               "nested": [f"{copy.folder}/csrc/k.cpp:3:1: error", b"bytes stay"],
               "target": f"{copy.slot}/escape.bin"}
    back = copy.to_original(message)
    assert back["traceback"] == f'File "{original}/kernels.py", line 1'
    assert back["nested"] == [f"{original}/csrc/k.cpp:3:1: error", b"bytes stay"]
    assert back["target"] == f"{submission.parent.parent}/escape.bin"


HONEST = '''
import json
import os

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
os.makedirs(os.path.join(HERE, "cache"), exist_ok=True)
with open(os.path.join(HERE, "cache", "tuned.json"), "w") as fh:  # an autotune table beside itself
    json.dump({"block": 4}, fh)
with open(os.path.join(HERE, "solution.py"), "a") as fh:  # even its own source: the copy's
    fh.write("# touched")


class ModelNew(nn.Module):
    def forward(self, x):
        with open(os.path.join(HERE, "cache", "tuned.json")) as fh:
            json.load(fh)
        return x.mean(0)
'''

HACK = '''
import os

import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
for target in ({problem!r}, os.path.join(HERE, "..", "outside.txt")):
    try:
        with open(target, "w") as fh:
            fh.write("rewritten")
    except OSError:
        pass


class ModelNew(nn.Module):
    def forward(self, x):
        return x.mean(0)
'''


def _level(name: str) -> str:
    if _detect(name).name != name:
        pytest.skip(f"isolation '{name}' does not work on this machine ({_detect(name).detail})")
    return name


def _runtime(report, rule: str) -> list[str]:
    return [f.message for f in report.findings if f.rule == rule and f.stage.value in ("build", "behaviour")]


@pytest.mark.slow
@pytest.mark.parametrize("level", ["bwrap", "unshare", "none"])
def test_writes_beside_itself_are_no_escape_and_leave_the_users_folder_unchanged(own_cache, tmp_path, level, monkeypatch):
    monkeypatch.setenv("GATEKEEPER_ISOLATION", _level(level))
    folder = tmp_path / "user"
    folder.mkdir()
    (folder / "problem.py").write_text(PROBLEM.read_text())
    (folder / "solution.py").write_text(HONEST)
    before = _snapshot(folder)
    report = gatekeeper.check(folder / "solution.py", folder / "problem.py", stages="behaviour", keep_going=True)
    assert report.environment.isolation == level
    assert not _runtime(report, "GK665") and not _runtime(report, "GK660"), report.findings
    # it ran its calls (torch doing the work, GK667, is this test's shortcut, not the point)
    assert {s.name.value: s.status.value for s in report.stages}["behaviour"] in ("passed", "failed")
    assert _runtime(report, "GK667") and not _runtime(report, "GK662")
    assert _snapshot(folder) == before


@pytest.mark.slow
@pytest.mark.parametrize("level", ["bwrap", "unshare", "none"])
def test_writes_outside_its_own_files_stay_escapes_under_the_users_paths(own_cache, tmp_path, level, monkeypatch):
    monkeypatch.setenv("GATEKEEPER_ISOLATION", _level(level))
    folder = tmp_path / "user"
    (folder / "submissions").mkdir(parents=True)
    problem = folder / "problem.py"
    problem.write_text(PROBLEM.read_text())
    submission = folder / "submissions" / "solution.py"
    submission.write_text(HACK.format(problem=str(problem)))
    before = _snapshot(folder)
    report = gatekeeper.check(submission, problem, stages="behaviour", keep_going=True)
    escapes = " | ".join(_runtime(report, "GK665"))
    assert f"write {problem}" in escapes  # the user's real problem file, by its own path
    assert f"write {folder}/submissions/../outside.txt" in escapes  # the copy's path mapped back
    assert "bundles" not in escapes
    assert _snapshot(folder) == before


@pytest.mark.slow
def test_a_second_check_compiles_nothing_though_each_job_has_its_own_copy():
    """torch's ninja file names the copy's sources: the same path in every job and every check
    (with the originals' times) keeps the build shared; a new path would rebuild in each job."""
    from gatekeeper.build.cache import extensions_dir
    from gatekeeper.build.sources import extract_bundle

    submission = ROOT / "fixtures/submissions/bundle_honest/solution.py"
    gatekeeper.check(submission, PROBLEM, stages="behaviour", keep_going=True)  # builds it when cold
    extracted = extract_bundle(submission.read_bytes(), str(submission))
    assert extracted is not None
    log = extensions_dir(extracted.cache_key()) / "gk_bundle_honest_mean" / ".ninja_log"
    before = log.read_text()
    report = gatekeeper.check(submission, PROBLEM, stages="behaviour", keep_going=True)
    assert report.verdict.value == "pass", [f.message for f in report.findings]
    assert log.read_text() == before  # ninja ran in the behaviour worker and compiled nothing
