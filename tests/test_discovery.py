"""`gatekeeper check DIR` finds files the way ruff does (issue 21, item 5): default excludes,
folders that say what they are, .gitignore (asked of real git, and read without it), the
configuration's exclude / extend-exclude, named files always, each file once."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gatekeeper.config import load_config
from gatekeeper.discovery import DEFAULT_EXCLUDES, discover
from gatekeeper.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent
HONEST = ROOT / "fixtures" / "submissions" / "seed_honest_generic.py"
PROBLEM = ROOT / "fixtures" / "problems" / "seed_mean.py"
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _touch(root: Path, *names: str) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")


def _found(paths, **kwargs) -> list[str]:
    return [p.as_posix() for p in discover(paths, **kwargs).files]


def _rel(root: Path, **kwargs) -> set[str]:
    return {p.relative_to(root).as_posix() for p in discover([root], **kwargs).files}


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo), "PATH": "/usr/bin:/bin",
                        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t"})


def test_default_excludes_skip_every_listed_folder_at_any_depth(tmp_path):
    names = [p for p in DEFAULT_EXCLUDES if "*" not in p]
    _touch(tmp_path, "kept.py", "pkg/kept.py", *(f"{n}/hidden.py" for n in names),
           *(f"pkg/{n}/deeper/hidden.py" for n in names), "pkg/thing.egg-info/hidden.py")
    assert _rel(tmp_path) == {"kept.py", "pkg/kept.py"}


def test_folders_that_say_what_they_are_are_skipped_whatever_their_name(tmp_path):
    _touch(tmp_path, "submission.py", "env311/lib/site.py", "conda_env/lib/x.py", "scratch/cache.py",
           "store/repo1/hook.py", "notastore/helper.py")
    (tmp_path / "env311" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (tmp_path / "conda_env" / "conda-meta").mkdir()
    (tmp_path / "scratch" / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    (tmp_path / "store" / "db.db").write_bytes(b"")
    (tmp_path / "store" / "README").write_text(
        "This directory is maintained by the pre-commit project.\nLearn more: https://github.com/pre-commit/pre-commit\n")
    # The near miss: a db.db and a README that pre-commit did not write.
    (tmp_path / "notastore" / "db.db").write_bytes(b"")
    (tmp_path / "notastore" / "README").write_text("my helpers\n")
    assert _rel(tmp_path) == {"submission.py", "notastore/helper.py"}


def test_a_real_virtual_environment_is_skipped(tmp_path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "tools")], check=True)
    (tmp_path / "tools" / "lib" / "mod.py").write_text("x = 1\n")
    _touch(tmp_path, "run.py")
    assert _rel(tmp_path) == {"run.py"}


def test_named_files_are_always_checked_and_once(tmp_path):
    _touch(tmp_path, "a.py", "build/gen.py", "sub/b.py")
    a, gen = tmp_path / "a.py", tmp_path / "build" / "gen.py"
    assert _found([gen]) == [gen.as_posix()]  # excluded by name, but named: checked
    # Twice by name, by another spelling, and inside a named folder: each file once, in first-seen order.
    twice = _found([a, tmp_path / "sub" / ".." / "a.py", tmp_path, a])
    assert twice == [a.as_posix(), (tmp_path / "sub" / "b.py").as_posix()]


def test_a_named_excluded_folder_is_walked_but_filtered_below(tmp_path):
    _touch(tmp_path, "build/gen.py", "build/node_modules/x.py")
    assert _rel(tmp_path / "build") == {"gen.py"}


def test_exclude_replaces_the_defaults_and_extend_exclude_adds(tmp_path):
    _touch(tmp_path, "a.py", "build/b.py", "runs/old/c.py", "runs/new/d.py", "runs/new/d_test.py")
    assert _rel(tmp_path, extend_exclude=["runs/old", "*_test.py"]) == {"a.py", "runs/new/d.py"}
    assert _rel(tmp_path, exclude=["runs"]) == {"a.py", "build/b.py"}
    assert _rel(tmp_path, exclude=[]) == {"a.py", "build/b.py", "runs/old/c.py", "runs/new/d.py",
                                          "runs/new/d_test.py"}


def test_configuration_keys_in_both_spellings(tmp_path):
    (tmp_path / "gatekeeper.toml").write_text('exclude = ["runs"]\nextend-exclude = ["old"]\n')
    config = load_config(search_from=tmp_path)
    assert config.exclude == ["runs"] and config.extend_exclude == ["old"]
    (tmp_path / "gatekeeper.toml").write_text('extend_exclude = ["old"]\n')
    assert load_config(search_from=tmp_path).extend_exclude == ["old"]
    (tmp_path / "gatekeeper.toml").write_text('extend-exclud = ["old"]\n')
    with pytest.raises(UsageError, match="extend-exclud"):
        load_config(search_from=tmp_path)


def test_nothing_left_says_why_and_how_to_check_anyway(tmp_path):
    _touch(tmp_path, ".venv/lib/a.py", "build/b.py")
    with pytest.raises(UsageError) as caught:
        discover([tmp_path])
    message = str(caught.value)
    assert str(tmp_path) in message and "2 *.py" in message
    assert "exclude '.venv'" in message and "exclude 'build'" in message
    assert "name a file" in message and "extend-exclude" in message


@needs_git
def test_git_ignored_files_are_skipped_but_tracked_ones_are_not(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("data/\n*.gen.py\n")
    _touch(tmp_path, "a.py", "data/raw.py", "x.gen.py", "tracked.gen.py", "sub/b.py")
    _git(tmp_path, "add", "-f", "tracked.gen.py")
    (tmp_path / "sub" / ".gitignore").write_text("b.py\n")
    assert _rel(tmp_path) == {"a.py", "tracked.gen.py"}
    # Named, an ignored file or an ignored folder is checked.
    assert _found([tmp_path / "x.gen.py"]) == [(tmp_path / "x.gen.py").as_posix()]
    assert _rel(tmp_path / "data") == {"raw.py"}


@needs_git
def test_a_nested_repository_uses_its_own_gitignore(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("inner_only.py\n")
    inner = tmp_path / "vendor_repo"
    inner.mkdir()
    _git(inner, "init", "-q")
    (inner / ".gitignore").write_text("skip.py\n")
    _touch(tmp_path, "inner_only.py", "vendor_repo/skip.py", "vendor_repo/inner_only.py", "vendor_repo/keep.py")
    assert _rel(tmp_path) == {"vendor_repo/inner_only.py", "vendor_repo/keep.py"}


GITIGNORE_CASES = """\
# a comment
*.tmp.py
gen/
!keep.tmp.py
/a/b/x.py
**/deep.py
doc/**/*.py
[xy]z.py
\\#hash.py
"""
TREE = ["a/b/x.py", "a/b/y.py", "a/x.py", "z.tmp.py", "keep.tmp.py", "gen/g.py", "q/gen/g.py", "keep/deep.py",
        "deep.py", "doc/p.py", "doc/s/t/p.py", "xz.py", "zz.py", "#hash.py", "ok.py", "sub/a/b/x.py",
        "sub/one.py", "sub/two.py"]


@needs_git
def test_the_parser_used_without_git_agrees_with_git(tmp_path):
    _touch(tmp_path, *TREE)
    (tmp_path / ".gitignore").write_text(GITIGNORE_CASES)
    (tmp_path / "a" / "b" / ".gitignore").write_text("y.py\n")
    (tmp_path / "sub" / ".gitignore").write_text("*.py\n!two.py\n")
    without_git = _rel(tmp_path)
    _git(tmp_path, "init", "-q")
    with_git = _rel(tmp_path)
    assert without_git == with_git
    assert "a/x.py" in with_git and "keep.tmp.py" in with_git and "a/b/x.py" not in with_git  # not vacuous


@pytest.mark.slow
def test_check_dot_in_a_project_checks_only_its_submissions(tmp_path):
    """The CLI end to end: `check .` with a virtual environment, node_modules, a build folder,
    a git-ignored folder and a configuration's extend-exclude beside two submissions."""
    _touch(tmp_path, ".venv/lib/site.py", "node_modules/pkg/x.py", "build/lib/y.py", "out/z.py", "drafts/w.py")
    if shutil.which("git"):
        _git(tmp_path, "init", "-q")
        (tmp_path / ".gitignore").write_text("out/\n")
    else:
        (tmp_path / "out" / "z.py").unlink()
    (tmp_path / "gatekeeper.toml").write_text('extend-exclude = ["drafts"]\n')
    for name in ("one.py", "two.py"):
        shutil.copy(HONEST, tmp_path / name)
    proc = subprocess.run([sys.executable, "-m", "gatekeeper", "check", ".", "one.py", "--problem", str(PROBLEM),
                           "--static-only", "--format", "json"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sorted(Path(r["submission"]["path"]).name for r in json.loads(proc.stdout)) == ["one.py", "two.py"]
