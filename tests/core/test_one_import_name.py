"""One name per module: the layers (engine/, actors/, jobs/ at the top of the repository)
import as checkray.engine, checkray.actors and checkray.jobs and under no other name, from
a source tree, from a working dir uploaded over an installed checkray, and from a wheel."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.layering import LAYERS, ROOT, module_files


def run_python(code: str, cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_no_module_imports_under_its_bare_layer_name():
    """From the repository root every layer folder is importable as ``engine``...: each of
    their modules must refuse that name at once, with a one-line error, and leave nothing
    behind in sys.modules."""
    bare_names = [name.removeprefix("checkray.") for name in module_files(ROOT) if name != "checkray"]
    code = (
        "import importlib, json, sys\n"
        f"names = {bare_names!r}\n"
        "errors = {}\n"
        "for name in names:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "        errors[name] = 'imported'\n"
        "    except ImportError as e:\n"
        "        errors[name] = str(e)\n"
        f"left = sorted(m for m in sys.modules if m.split('.')[0] in {LAYERS!r})\n"
        "print(json.dumps({'errors': errors, 'left': left}))\n"
    )
    done = run_python(code, cwd=ROOT, pythonpath=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["left"] == []
    wrong = {}
    for name, error in result["errors"].items():
        layer = name.split(".")[0]
        expected = f"import checkray.{layer}, not {layer}: checkray's layers import only under checkray"
        if error != expected:
            wrong[name] = error
    assert wrong == {}


@pytest.mark.slow
def test_every_module_loads_once_under_its_checkray_name():
    """Importing every module of the three layers loads each file under one name, its
    ``checkray.*`` one, even with the repository root on sys.path."""
    names = list(module_files(ROOT))
    code = (
        "import importlib, json, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "files = {n: getattr(m, '__file__', None) for n, m in list(sys.modules.items())}\n"
        "print(json.dumps({n: f for n, f in files.items() if f}))\n"
    )
    done = run_python(code, cwd=ROOT, pythonpath=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    first_party_dirs = [ROOT / d for d in ("checkray", *LAYERS)]
    names_of_file: dict[Path, list[str]] = {}
    for name, file in json.loads(done.stdout.splitlines()[-1]).items():
        path = Path(file).resolve()
        if any(path.is_relative_to(d) for d in first_party_dirs):
            names_of_file.setdefault(path, []).append(name)
    expected = {path.resolve(): [name] for name, path in module_files(ROOT).items()}
    assert {p: sorted(n) for p, n in names_of_file.items()} == expected


def copy_source(dest: Path, layers_inside: bool) -> Path:
    """checkray/ and the layers as a source tree has them (beside checkray/), or as a wheel
    has them (inside checkray/); returns the folder to put on sys.path."""
    shutil.copytree(ROOT / "checkray", dest / "checkray", ignore=shutil.ignore_patterns("__pycache__"))
    for layer in LAYERS:
        target = dest / "checkray" / layer if layers_inside else dest / layer
        shutil.copytree(ROOT / layer, target, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


@pytest.mark.parametrize("layers_inside", [False, True], ids=["uploaded working dir", "wheel"])
def test_the_copy_on_sys_path_runs_not_the_installed_checkray(tmp_path, layers_inside):
    """``ray job submit --working-dir .`` puts the uploaded tree first on the job's path,
    where a node may have another checkray installed (this venv's editable install of the
    repository maps checkray.engine to the repository's engine/): every checkray module,
    and the prompts its code digest reads, must come from the copy."""
    copy = copy_source(tmp_path / "copy", layers_inside)
    code = (
        "import json, sys\n"
        "import checkray, checkray.jobs.cli, checkray.engine.stages, checkray.engine.code as code\n"
        "files = {n: m.__file__ for n, m in sys.modules.items() if n.split('.')[0] == 'checkray'}\n"
        "finders = [type(f).__name__ for f in sys.meta_path]\n"
        "prompts = [str(p) for p in code.DATA_OF_MODULE['checkray.engine.prompts']]\n"
        "print(json.dumps({'files': files, 'finders': finders, 'prompts': prompts}))\n"
    )
    done = run_python(code, cwd=copy, pythonpath=copy)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.splitlines()[-1])
    outside = {n: f for n, f in result["files"].items() if not Path(f).resolve().is_relative_to(copy.resolve())}
    assert outside == {} and len(result["files"]) > 10
    assert all(Path(p).resolve().is_relative_to(copy.resolve()) for p in result["prompts"])
    # A wheel's layers are checkray's own subpackages: no finder is installed for them.
    assert ("_LayerFinder" in result["finders"]) is not layers_inside


def test_the_uploaded_working_dir_holds_each_layer_file_once(tmp_path):
    """What ``ray job submit --working-dir .`` zips (Ray's own packaging, the excludes of
    docs/cluster.md's tests): the layers once, at the top, and checkray/ only its own file."""
    import zipfile

    from ray._private.runtime_env.packaging import create_package

    from tests.core.test_job_submit import UPLOAD_EXCLUDES

    package = tmp_path / "working_dir.zip"
    create_package(str(ROOT), package, include_gitignore=True, excludes=UPLOAD_EXCLUDES)
    with zipfile.ZipFile(package) as z:
        names = [info.filename for info in z.infolist() if not info.is_dir()]
    layer_files = sorted(str(p.relative_to(ROOT)) for p in module_files(ROOT).values())
    shipped = sorted(n for n in names if n.endswith(".py") and n.split("/")[0] in ("checkray", *LAYERS))
    assert shipped == layer_files
    assert len(names) == len(set(names))
