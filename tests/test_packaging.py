"""The distribution owns one import namespace: a non-editable wheel installs ``attnphase`` and nothing else.

The wheel is built from this checkout and installed without its dependencies into a fresh virtual
environment; the dependencies are taken from the running environment's site-packages through
``PYTHONPATH`` (a path there is searched, but its ``.pth`` files, such as an editable install's
finder, are not run), so the installed ``attnphase`` is the wheel's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUBPACKAGES = ("replica", "saddle", "baseline", "experiments")

CHECK = f"""
import importlib, importlib.util, json, sys
import attnphase
modules = {{name: importlib.import_module(f"attnphase.{{name}}").__file__ for name in {SUBPACKAGES!r}}}
print(json.dumps({{
    "attnphase": attnphase.__file__,
    "modules": modules,
    "top_level": {{name: importlib.util.find_spec(name) is not None for name in {SUBPACKAGES!r}}},
    "api": callable(attnphase.scan) and callable(attnphase.derive) and callable(attnphase.simulate),
}}))
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("attnphase-*.whl")
    return built


@pytest.mark.slow
def test_the_wheel_holds_one_top_level_package_and_its_type_marker(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"attnphase"}
    for sub in SUBPACKAGES:
        assert f"attnphase/{sub}/__init__.py" in names
    assert "attnphase/py.typed" in names
    assert "attnphase/saddle/compilation/templates.py" in names and "attnphase/experiments/cli.py" in names


@pytest.mark.slow
def test_a_fresh_environment_imports_attnphase_and_only_attnphase(wheel, tmp_path):
    environment = tmp_path / "venv"
    venv.create(environment, with_pip=True)
    python = environment / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
    )
    dependencies = sysconfig.get_paths()["purelib"]
    env = {**os.environ, "PYTHONPATH": dependencies, "ATTNPHASE_CACHE_DIR": str(tmp_path / "cache")}
    found = subprocess.run(
        [str(python), "-c", CHECK], check=True, capture_output=True, text=True, cwd=tmp_path, env=env
    ).stdout
    import json

    report = json.loads(found)
    installed = str(environment)
    assert report["attnphase"].startswith(installed)
    assert all(path.startswith(installed) for path in report["modules"].values())
    assert report["top_level"] == dict.fromkeys(SUBPACKAGES, False)
    assert report["api"]
    site = Path(report["attnphase"]).parent.parent
    assert not any((site / name).exists() for name in SUBPACKAGES)
    command = subprocess.run(
        [str(environment / "bin" / "attnphase"), "equations"], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert command.returncode == 0, command.stderr
    assert "m_2 = -m" in command.stdout
