"""A submission is its file and the modules and sources it ships beside it
(gatekeeper/gatekeeper/submission_files.py): found by import, checked with the same rules, listed in the
report, visible to the sandbox."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

import gatekeeper
from gatekeeper.submission_files import MAX_MODULES, local_modules
from gatekeeper.static.beside_files import beside_file

ROOT = Path(__file__).resolve().parent.parent
CPU_MEAN = ROOT / "fixtures/problems/cpu_mean.py"
HACKED = ROOT / "fixtures/submissions/bundle_hacked/solution.py"
HONEST = ROOT / "fixtures/submissions/bundle_honest/solution.py"


def _write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder / "solution.py"


def test_every_spelling_of_a_local_import_is_followed(tmp_path):
    main = _write(tmp_path, {
        "solution.py": "import a\nfrom b import f\nfrom pkg import c\nimport importlib\n"
                       "def g():\n    import lazy\n    return importlib.import_module('dyn')\n",
        "a.py": "from . import rel\n", "b.py": "", "rel.py": "import a\n",  # a cycle back to a
        "pkg/__init__.py": "", "pkg/c.py": "", "lazy.py": "", "dyn.py": "",
        "unused.py": "raise SystemExit", "torch_ops.py": "",
    })
    found = {p.relative_to(tmp_path).as_posix() for p in local_modules(main.read_text(), str(main))}
    assert found == {"a.py", "b.py", "pkg/__init__.py", "pkg/c.py", "lazy.py", "dyn.py", "rel.py"}


def test_installed_modules_and_files_outside_the_folder_are_not_the_submission(tmp_path):
    (tmp_path / "outside.py").write_text("")
    main = _write(tmp_path / "sub", {"solution.py": "import torch\nimport os\nfrom .. import outside\n"})
    assert local_modules(main.read_text(), str(main)) == []
    assert local_modules("import a\n", "<submission>") == []  # from memory: nothing beside it


def test_the_number_of_modules_is_bounded(tmp_path):
    files = {"solution.py": "\n".join(f"import m{i}" for i in range(MAX_MODULES + 10))}
    files.update({f"m{i}.py": "" for i in range(MAX_MODULES + 10)})
    main = _write(tmp_path, files)
    assert len(local_modules(main.read_text(), str(main))) == MAX_MODULES


@pytest.mark.parametrize("expr, name", [
    ('os.path.join(os.path.dirname(__file__), "csrc", "k.cu")', "csrc/k.cu"),
    ('os.path.join(os.path.dirname(os.path.abspath(__file__)), "k.cpp")', "k.cpp"),
    ('Path(__file__).parent / "csrc" / "k.cu"', "csrc/k.cu"),
    ('str(Path(__file__).resolve().parent / "k.cu")', "k.cu"),
    ('str(Path(__file__).with_name("k.cu"))', "k.cu"),
    ('os.path.join(ROOT, "k.cu")', None),  # not from __file__: not followed
    ('os.path.join(os.path.dirname(__file__), name)', None),  # a computed part
])
def test_sources_named_beside_the_file(expr, name):
    assert beside_file(cst.parse_expression(expr)) == name


def test_a_hack_in_an_imported_module_is_found_where_it_is():
    report = gatekeeper.check_static(HACKED, CPU_MEAN)
    assert report.verdict.value == "reject"
    hits = [f for f in report.errors() if f.category.value == "harness-tampering"]
    assert hits and all(f.location.path.endswith("bundle_hacked/kernels.py") for f in hits)
    assert [Path(b.path).name for b in report.bundle] == ["kernels.py"]


def test_the_honest_bundle_reads_its_sources_and_lists_its_files():
    report = gatekeeper.check_static(HONEST, CPU_MEAN)
    assert report.verdict.value == "pass" and not report.errors()
    assert [Path(b.path).name for b in report.bundle] == ["ops.py"]
    # The C++ named through __file__ is read: a baked-in size there is found in csrc/mean.cpp.
    text = (HONEST.parent / "csrc/mean.cpp").read_text()
    assert "xc.size(1), xc.size(2)" in text


def test_a_baked_in_size_in_the_side_source_is_reported_in_that_file(tmp_path):
    folder = tmp_path / "b"
    folder.mkdir()
    for name in ("solution.py", "ops.py"):
        (folder / name).write_text((HONEST.parent / name).read_text())
    (folder / "csrc").mkdir()
    (folder / "csrc/mean.cpp").write_text((HONEST.parent / "csrc/mean.cpp").read_text().replace(
        "xc.size(1), xc.size(2)", "16, 48"))
    report = gatekeeper.check_static(folder / "solution.py", CPU_MEAN)
    shape = [f for f in report.findings if f.category.value == "hardcoded-shape"]
    assert shape and all(f.location.path.endswith("csrc/mean.cpp") for f in shape)


def test_the_sandbox_shows_the_worker_the_bundle():
    from gatekeeper.sandbox.isolation import visible_files

    seen = {Path(p).relative_to(HONEST.parent.resolve()).as_posix() for p in visible_files([str(HONEST)])}
    assert {"solution.py", "ops.py", "csrc/mean.cpp"} <= seen


@pytest.mark.parametrize("naming", [
    # through module constants, a comprehension over literal names, pathlib and a sources list
    '_here = os.path.dirname(os.path.abspath(__file__))\n'
    '_ext = load(name="a", sources=[os.path.join(_here, "k", "relu.cu")])\n',
    '_KDIR = os.path.join(os.path.dirname(__file__), "k")\n'
    '_ext = load(name="a", sources=[os.path.join(_KDIR, f) for f in ("relu.cu",)])\n',
    '_HERE = Path(__file__).resolve().parent\n'
    '_ext = load_inline(name="a", cpp_sources="torch::Tensor relu(torch::Tensor x);",\n'
    '                   cuda_sources=(_HERE / "k" / "relu.cu").read_text(), functions=["relu"])\n',
    'SOURCES = [os.path.join(os.path.dirname(__file__), "k", "relu.cu")]\n_ext = load(name="a", sources=SOURCES)\n',
])
def test_a_side_source_named_through_constants_or_a_comprehension_is_read(tmp_path, naming):
    # ATen doing the work in the side file is found whichever way the file is named
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "relu.cu").write_text(
        "#include <torch/extension.h>\ntorch::Tensor relu(torch::Tensor x) { return at::relu(x); }\n")
    solution = tmp_path / "solution.py"
    solution.write_text("import os\nfrom pathlib import Path\nimport torch\n"
                        "from torch.utils.cpp_extension import load, load_inline\n" + naming +
                        "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return _ext.relu(x)\n")
    report = gatekeeper.check_static(solution, CPU_MEAN)
    hits = [f for f in report.findings if f.rule == "GK306"]
    assert hits and all(f.location.path.endswith("k/relu.cu") for f in hits), [f.rule for f in report.findings]


_BY_PATH = ("import importlib.util\nimport os\nimport torch\n"
            "_spec = importlib.util.spec_from_file_location('k', {path})\n"
            "kernels = importlib.util.module_from_spec(_spec)\n_spec.loader.exec_module(kernels)\n"
            "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return kernels.run(x)\n")


@pytest.mark.parametrize("body, hacked", [
    ("from torch.utils.cpp_extension import load_inline\n"
     "_ext = load_inline(name='k', cpp_sources='torch::Tensor mean0(torch::Tensor x);', functions=['mean0'])\n"
     "def run(x):\n    return _ext.mean0(x)\n", False),
    ("import torch\ndef run(x):\n    return torch.mean(x, dim=0)\n", True),
])
def test_a_sidecar_loaded_by_its_path_is_checked_with_the_submission(tmp_path, body, hacked):
    # a harness imports solution.py by path, so it loads its neighbour by path too: a warning,
    # and the neighbour is part of the submission (torch doing the work there is found there)
    (tmp_path / "kernels.py").write_text(body)
    solution = tmp_path / "solution.py"
    solution.write_text(_BY_PATH.format(path='os.path.join(os.path.dirname(__file__), "kernels.py")'))
    report = gatekeeper.check_static(solution, CPU_MEAN)
    assert [Path(b.path).name for b in report.bundle] == ["kernels.py"]
    assert {f.severity.value for f in report.findings if f.rule == "GK431"} == {"warning"}
    torch_work = [f for f in report.findings if f.category.value == "torch-fallback" and f.severity.value == "error"]
    assert bool(torch_work) is hacked
    assert all(f.location.path.endswith("kernels.py") for f in torch_work)


def test_a_module_loaded_by_a_computed_path_stays_an_error(tmp_path):
    (tmp_path / "kernels.py").write_text("def run(x):\n    return x\n")
    solution = tmp_path / "solution.py"
    solution.write_text(_BY_PATH.format(path='os.environ["KPATH"]'))
    report = gatekeeper.check_static(solution, CPU_MEAN)
    assert "error" in {f.severity.value for f in report.findings if f.rule == "GK431"}
