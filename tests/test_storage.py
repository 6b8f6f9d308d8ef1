"""Nothing lost: interrupted and killed runs resume, corrupt files are named, resumed points are
verified, --overwrite leaves nothing of the old run, one run per directory, usual permissions."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import typer
from filelock import FileLock
from runs import simulate_into
from typer.testing import CliRunner

import attnphase as ap
from attnphase.experiments import scan as scan_study
from attnphase.experiments import training as simulation
from attnphase.experiments.cli import INTERRUPTED, _caused_by_interrupt, app, reporting_interrupts
from attnphase.experiments.storage import (
    LOCK_FILE,
    CorruptResultsError,
    DirectoryInUseError,
    atomic_write_text,
    exclusive,
    read_json,
    read_table,
    start_run,
    write_json,
)
from attnphase.experiments.study import package_version
from attnphase.experiments.training import SimulationSettings
from attnphase.replica.declaration import paper_model

runner = CliRunner()
SCAN = ["--alphas", "1.8,1.9,2.0,2.1", "--order", "8", "--threshold-order", "0", "--no-stability"]
SCAN_FILES = {"branches.csv", "thresholds.csv", "transitions.csv", "scan.png", "scan.pdf", "run.json"}
SCAN_TABLES = ("branches.csv", "thresholds.csv", "transitions.csv")
TINY = SimulationSettings(d=6, alphas=(1.0,), seeds=2, n_test=50, max_steps=50)

PACKAGE = {"attnphase": package_version()}


def _scan(out: Path, *extra: str):
    return runner.invoke(app, ["scan", "--out", str(out), *SCAN, *extra])


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """An uninterrupted scan (in this process, so that its kernels are loaded for the other tests),
    written under the usual umask 0o022."""
    out = tmp_path_factory.mktemp("reference") / "scan"
    previous = os.umask(0o022)
    try:
        result = _scan(out)
    finally:
        os.umask(previous)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture
def finished(reference, tmp_path) -> Path:
    """A copy of the finished reference scan, to be damaged or resumed."""
    out = tmp_path / "scan"
    shutil.copytree(reference, out)
    return out


def assert_same_tables(directory: Path, reference: Path) -> None:
    """The tables of ``directory`` are those of ``reference``, to the last digit (every column, including
    those that record the solver's path: iterations, residuals, unconverged prox nodes)."""
    for name in SCAN_TABLES:
        assert (directory / name).read_text() == (reference / name).read_text(), name


#: ``python -m attnphase`` with ctrl-c raising KeyboardInterrupt even where the test runs with SIGINT
#: ignored (a job started in the background by a shell without job control inherits that, and a Python
#: started with SIGINT ignored keeps ignoring it).
INTERRUPTIBLE = (
    "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "runpy.run_module('attnphase', run_name='__main__', alter_sys=True)"
)


def _start_scan(out: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", INTERRUPTIBLE, "scan", "--out", str(out), *SCAN],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finished_and_unfinished(out: Path) -> tuple[set[str], set[str]]:
    """The branches whose traces ``run.json`` records as finished, and those with points but no such record."""
    try:  # both files are replaced atomically: each read sees a whole file
        finished = set(json.loads((out / "run.json").read_text()).get("branch_ends", {}))
        written = set(pd.read_csv(out / "branches.csv")["branch"])
    except (FileNotFoundError, json.JSONDecodeError, pd.errors.EmptyDataError):
        return set(), set()
    return finished, written - finished


def _wait_inside_a_branch(process: subprocess.Popen, out: Path, timeout: float = 300) -> None:
    """Until one branch is finished and another is part-way (some of its points written)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the scan ended before it was interrupted: {process.communicate()}")
        finished, unfinished = _finished_and_unfinished(out)
        if finished and unfinished:
            return
        time.sleep(0.01)
    process.kill()
    pytest.fail("no branch was part-way in time")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill"])
def test_a_scan_stopped_inside_a_branch_keeps_its_points_and_its_rerun_ends_identical(reference, tmp_path, sig):
    out = tmp_path / "scan"
    process = _start_scan(out)
    _wait_inside_a_branch(process, out)
    process.send_signal(sig)
    stdout, stderr = process.communicate(timeout=120)
    if sig == signal.SIGINT:
        assert process.returncode == 130
        assert stderr == INTERRUPTED + "\n" and stdout == ""
    else:
        assert process.returncode == -signal.SIGKILL
    assert "Traceback" not in stdout + stderr
    written = pd.read_csv(out / "branches.csv")
    assert json.loads((out / "run.json").read_text())["status"] == "running"
    assert not (out / LOCK_FILE).exists() or sig == signal.SIGKILL  # a killed run leaves its (unlocked) file

    result = _scan(out)
    assert result.exit_code == 0, result.output
    assert_same_tables(out, reference)
    final = pd.read_csv(out / "branches.csv").set_index(["branch", "alpha"])
    kept = written.set_index(["branch", "alpha"])
    pd.testing.assert_frame_equal(final.loc[kept.index], kept, check_dtype=False)  # the points written stay
    assert {p.name for p in out.iterdir()} == SCAN_FILES  # no lock, no temporary file left
    assert json.loads((out / "run.json").read_text())["status"] == "complete"


@pytest.mark.slow
def test_rerunning_a_finished_scan_reuses_every_point_and_accepts_another_spelling(finished, reference):
    result = _scan(finished, "--alphas", "1.8:2.1:0.1")  # the same alphas, spelled otherwise
    assert result.exit_code == 0, result.output
    assert (finished / "branches.csv").read_text() == (reference / "branches.csv").read_text()


@pytest.mark.slow
def test_a_hand_edited_point_is_computed_again(finished, reference, caplog):
    table = pd.read_csv(finished / "branches.csv")
    anchor = (table["branch"] == "positional") & (table["alpha"] == 2.1)  # the branch starts here
    inner = (table["branch"] == "semantic") & (table["alpha"] == 1.9)
    table.loc[anchor, "q"] *= 1.01
    table.loc[inner, "train_loss"] += 1e-4
    table.to_csv(finished / "branches.csv", index=False)
    with caplog.at_level(logging.WARNING, logger="attnphase"):
        result = _scan(finished)
    assert result.exit_code == 0, result.output
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 2
    assert any("alpha = 2.1 on the positional branch" in m and "residual" in m for m in warned)
    assert any("alpha = 1.9 on the semantic branch" in m and "train_loss" in m for m in warned)
    assert all("traced again" in m for m in warned)
    assert_same_tables(finished, reference)  # both branches found afresh: the edits are gone, to the last digit


def _cut_mid_line(text: str) -> str:
    return text[: len(text) - 25]


def _garbage_number(text: str) -> str:
    lines = text.splitlines(keepends=True)
    fields = lines[2].split(",")
    fields[lines[0].split(",").index("q")] = "0.1x3"
    lines[2] = ",".join(fields)
    return "".join(lines)


def _a_line_short(text: str) -> str:
    lines = text.splitlines(keepends=True)
    lines[1] = lines[1].rstrip("\n").rsplit(",", 1)[0] + "\n"
    return "".join(lines)


CORRUPTIONS = {
    ("branches.csv", "cut mid-line"): (_cut_mid_line, "ends in the middle of line"),
    ("branches.csv", "garbage number"): (_garbage_number, "line 3: q = '0.1x3' is not a number"),
    ("branches.csv", "empty"): (lambda text: "", "the file is empty"),
    ("branches.csv", "header missing"): (lambda text: text.split("\n", 1)[1], "the header line is missing"),
    ("branches.csv", "a line short"): (_a_line_short, "fields, the header"),
    ("run.json", "truncated JSON"): (lambda text: text[: len(text) // 2], "is not valid JSON"),
    ("run.json", "empty"): (lambda text: "", "the file is empty"),
    ("run.json", "not an object"): (lambda text: "[1, 2]\n", "not an object"),
    ("run.json", "garbled branch ends"): (
        lambda text: json.dumps({**json.loads(text), "branch_ends": {"semantic": ["x"]}}),
        "its branch ends and anchors cannot be read",
    ),
}


@pytest.mark.parametrize(("name", "damage"), list(CORRUPTIONS), ids=[" ".join(k) for k in CORRUPTIONS])
def test_a_corrupt_file_is_named_in_one_line(finished, name, damage):
    corrupt, problem = CORRUPTIONS[(name, damage)]
    path = finished / name
    path.write_text(corrupt(path.read_text()))
    damaged = path.read_text()
    result = _scan(finished)
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    assert lines[0].startswith(f"error: {path} is corrupt: ") and problem in lines[0]
    assert "--overwrite" in lines[0]
    assert path.read_text() == damaged  # left as it was, for the user to look at


@pytest.mark.slow
def test_overwrite_replaces_a_corrupt_scan(finished, reference):
    (finished / "branches.csv").write_text("alpha,branch\n2.0,sem")
    result = _scan(finished, "--overwrite")
    assert result.exit_code == 0, result.output
    assert (finished / "branches.csv").read_text() == (reference / "branches.csv").read_text()


def test_a_scan_by_another_version_of_the_package_is_not_resumed(finished):
    run = json.loads((finished / "run.json").read_text())
    run["package"]["attnphase"] = "0.0.1"
    (finished / "run.json").write_text(json.dumps(run))
    result = _scan(finished)
    assert result.exit_code == 2
    assert f'package.attnphase differs: "{ap.__version__}" here, "0.0.1" in' in result.output
    assert "--overwrite" in result.output


def test_another_scan_names_the_setting_that_differs(finished):
    result = _scan(finished, "--alphas", "1.8,1.9", "--omega", "0.4")
    assert result.exit_code == 2
    line = result.output.strip()
    assert "\n" not in line and "other settings" in line and "--overwrite" in line
    assert f"options.alphas differs: [1.8, 1.9] here, [1.8, 1.9, 2.0, 2.1] in {finished / 'run.json'}" in line
    assert "model.teacher.omega differs: 0.4 here, 0.3 in" in line


def test_overwrite_removes_every_file_of_the_old_scan_before_it_starts(finished, monkeypatch):
    (finished / ".branches.csv.0123456789ab.tmp").write_text("left by a killed write")

    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # as if the new run were stopped as soon as it starts computing

    monkeypatch.setattr(scan_study, "survey", killed)
    with pytest.raises(KeyboardInterrupt):
        scan_study.scan(
            paper_model(omega=0.4), "1.8,1.9", order=8, threshold_order=0, stability=False, out=finished, overwrite=True
        )
    assert [p.name for p in finished.iterdir()] == ["run.json"]
    run = json.loads((finished / "run.json").read_text())
    assert run["status"] == "running" and run["model"]["teacher"]["omega"] == 0.4
    assert run["options"]["alphas"] == [1.8, 1.9]


def test_overwrite_removes_every_file_of_the_old_simulation(tmp_path, monkeypatch):
    out = tmp_path / "sim"
    (out / "theory").mkdir(parents=True)
    for name in ("simulations.csv", "simulate.png", "simulate.pdf", "theory/branches.csv", "theory/run.json"):
        (out / name).write_text("old")
    write_json(out / "run.json", {"settings": {**TINY.as_dict(), "d": 7}, "status": "complete"})
    refused = runner.invoke(app, ["simulate", "--out", str(out), "--d", "6", "--alphas", "1.0", "--seeds", "2"])
    assert refused.exit_code == 2 and "settings.d differs: 6 here, 7 in" in refused.output

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(simulation, "simulate", killed)
    with pytest.raises(KeyboardInterrupt):
        simulate_into(out, TINY, overwrite=True, outputs=("simulations.csv", "simulate.png", "simulate.pdf", "theory"))
    assert [p.name for p in out.iterdir()] == ["run.json"]
    running = {"settings": json.loads(json.dumps(TINY.as_dict())), "status": "running", "package": PACKAGE}
    assert read_json(out / "run.json") == running


def test_files_without_a_run_record_are_not_taken_over(tmp_path):
    (tmp_path / "thresholds.csv").write_text("alpha_c\n1.2\n")
    result = _scan(tmp_path)
    assert result.exit_code == 2
    assert "holds thresholds.csv but no run.json" in result.output and "--overwrite" in result.output
    assert (tmp_path / "thresholds.csv").read_text() == "alpha_c\n1.2\n"


def test_a_directory_held_by_another_run_is_refused_at_once(finished):
    before = {p.name: p.read_bytes() for p in finished.iterdir()}
    with FileLock(finished / LOCK_FILE, timeout=0):
        started = time.monotonic()
        result = _scan(finished)
        other = runner.invoke(app, ["simulate", "--out", str(finished), "--d", "6", "--alphas", "1.0"])
    assert time.monotonic() - started < 30
    for refused in (result, other):
        assert refused.exit_code == 2
        assert refused.output.strip() == (
            f"error: {finished} is in use by another run (it holds {LOCK_FILE} there); "
            "wait for that run to end, or use another --out"
        )
    assert {p.name: p.read_bytes() for p in finished.iterdir() if p.name != LOCK_FILE} == before


def test_the_lock_is_reentrant_in_one_thread_and_refuses_another(tmp_path):
    refused: list[BaseException] = []

    def other() -> None:
        try:
            with exclusive(tmp_path):
                pass
        except DirectoryInUseError as error:
            refused.append(error)

    with exclusive(tmp_path), exclusive(tmp_path):
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert len(refused) == 1
    assert not (tmp_path / LOCK_FILE).exists()
    with exclusive(tmp_path):  # free again
        pass


def test_resumed_simulations_compare_settings_by_value(tmp_path):
    seen: list[pd.DataFrame] = []
    first = simulate_into(tmp_path, TINY, progress=seen.append)
    same = SimulationSettings(d=6, alphas=(1.0,), seeds=(0, 1), n_test=50, max_steps=50, lr=0.15)  # spelled otherwise
    again = simulate_into(tmp_path, same, progress=seen.append)
    assert len(seen) == len(TINY.inits)
    pd.testing.assert_frame_equal(again, first, check_dtype=False)


def test_an_incomplete_simulation_block_is_computed_again(tmp_path):
    full = simulate_into(tmp_path, TINY)
    full[full["seed"] == 0].to_csv(tmp_path / "simulations.csv", index=False)  # every block lost a seed
    seen: list[pd.DataFrame] = []
    again = simulate_into(tmp_path, TINY, progress=seen.append)
    assert len(seen) == len(TINY.inits) and len(again) == len(full)
    columns = ["alpha", "seed", "init", "train_loss", "q"]
    key = ["init", "seed"]
    pd.testing.assert_frame_equal(
        again[columns].sort_values(key, ignore_index=True), full[columns].sort_values(key, ignore_index=True)
    )


def test_a_corrupt_simulation_table_is_named(tmp_path):
    simulate_into(tmp_path, TINY)
    table = tmp_path / "simulations.csv"
    table.write_text(table.read_text().replace("positional", "", 1))
    with pytest.raises(CorruptResultsError, match=r"simulations.csv is corrupt: line 2: init is empty; rerun with"):
        simulate_into(tmp_path, TINY)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("a,b\n1,2", "ends in the middle of line 2"),
        ("a,b\n1,x\n", "line 2: b = 'x' is not a number"),
        ("a,b\n1,\n", None),  # an empty field is a missing number
        ("a,b\n1,2,3\n", "line 2 has 3 fields, the header 2"),
        ("a,a\n1,2\n", "names a column twice"),
        ('a,b\n1,"2\n', "it is not a CSV table"),
        ("\n\n", "the file is empty"),
    ],
)
def test_tables_are_read_strictly(tmp_path, text, problem):
    path = tmp_path / "t.csv"
    path.write_text(text)
    if problem is None:
        assert read_table(path, numbers=("a", "b")).shape == (1, 2)
        return
    with pytest.raises(CorruptResultsError, match=problem) as caught:
        read_table(path, numbers=("a", "b"))
    assert str(caught.value).startswith(f"{path} is corrupt: ")


def test_start_run_refuses_a_run_json_of_another_study(tmp_path):
    write_json(tmp_path / "run.json", {"settings": {"d": 6}, "status": "complete"})
    with pytest.raises(FileExistsError, match="model differs"):
        start_run(tmp_path, {"model": {"omega": 0.3}}, ("branches.csv",), False, lambda: None)


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_files_get_the_permissions_open_would_give_them(tmp_path, umask):
    previous = os.umask(umask)
    try:
        atomic_write_text(tmp_path / "a.csv", "x\n")
        with open(tmp_path / "b.csv", "w") as handle:
            handle.write("x\n")
    finally:
        os.umask(previous)
    assert (tmp_path / "a.csv").stat().st_mode & 0o777 == 0o666 & ~umask
    assert (tmp_path / "a.csv").stat().st_mode & 0o777 == (tmp_path / "b.csv").stat().st_mode & 0o777
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_scan_writes_its_files_with_the_usual_permissions(reference):
    assert {p.name: p.stat().st_mode & 0o777 for p in reference.iterdir()} == dict.fromkeys(SCAN_FILES, 0o644)


def test_an_interrupt_is_one_line_with_status_130_even_through_compiled_code():
    def numba_interrupted() -> None:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as error:
            raise SystemError("<built-in function prox> returned a result with an exception set") from error

    assert _caused_by_interrupt(KeyboardInterrupt())
    with pytest.raises(SystemError) as caught:
        numba_interrupted()
    assert _caused_by_interrupt(caught.value)
    assert not _caused_by_interrupt(SystemError("something else"))

    toy = typer.Typer()

    @toy.command()
    def run(kind: str = "numba") -> None:
        if kind == "numba":
            numba_interrupted()
        elif kind == "plain":
            raise KeyboardInterrupt
        raise SystemError("a real bug")

    toy.registered_commands[0].callback = reporting_interrupts(run)
    for kind in ("numba", "plain"):
        result = runner.invoke(toy, ["--kind", kind])
        assert result.exit_code == 130 and result.output == INTERRUPTED + "\n"
    bug = runner.invoke(toy, ["--kind", "bug"])
    assert isinstance(bug.exception, SystemError)  # not an interrupt: not hidden
