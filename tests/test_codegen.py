"""Generated kernel modules: correct code, one file per distinct source, machine code cached
on disk and the module remembered under its recipe, so that a new process neither generates nor
compiles the same model again (saddle/compilation/codegen.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from attnphase.saddle.compilation.ahead import IN_PROCESS, IN_WORKER
from attnphase.saddle.compilation.codegen import ModuleSource, Recipe, cache_directory

ROOT = Path(__file__).resolve().parents[1]

BUILD = """
import json, sys
import numpy as np, sympy as sp
from attnphase.saddle.compilation.codegen import ModuleSource
x, y = sp.symbols("x y", real=True)
source = ModuleSource(prox_dimension=1, constants={"_MAX_HALVINGS": 3})
source.scalar("f", [("a", [x, y])], sp.exp(x) * y + x**2)
module = source.load()
value = module.f(np.array([0.5, 2.0]))
stats = module.f.stats
print(json.dumps({"value": value, "hits": sum(stats.cache_hits.values()), "misses": sum(stats.cache_misses.values())}))
"""


def _run(script: str, env: dict[str, str]) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def _source(expr: sp.Expr) -> ModuleSource:
    x, y = sp.symbols("x y", real=True)
    source = ModuleSource(prox_dimension=1, constants={"_MAX_HALVINGS": 3})
    source.scalar("f", [("a", [x, y])], expr)
    source.vector("g", [("a", [x, y])], [x * y, sp.sin(x)])
    return source


def test_generated_functions_evaluate_their_expressions(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNPHASE_CACHE_DIR", str(tmp_path))
    x, y = sp.symbols("x y", real=True)
    module = _source(sp.exp(x) * y + x**2).load()
    assert module.f(np.array([0.5, 2.0])) == pytest.approx(np.exp(0.5) * 2.0 + 0.25, rel=1e-14)
    out = np.empty(2)
    module.g(np.array([0.5, 2.0]), out)
    np.testing.assert_allclose(out, [1.0, np.sin(0.5)], rtol=1e-14)
    assert module.K == 1 and module._MAX_HALVINGS == 3


def test_a_pole_gives_a_non_finite_value_not_an_exception(tmp_path, monkeypatch):
    """A negative integer power of zero is ``inf`` (the kernels flag it), whatever the exponent's
    form; numba's own integer power would raise ``ZeroDivisionError`` there."""
    monkeypatch.setenv("ATTNPHASE_CACHE_DIR", str(tmp_path))
    x, y = sp.symbols("x y", real=True)
    for expr in (x**-2 + y, y / x**3, (x + y - 1) ** -4 * y, x**-1, x ** sp.Rational(-3, 2)):
        module = _source(expr).load()
        assert np.isinf(module.f(np.array([0.0, 1.0]))), expr
        assert module.f(np.array([2.0, 1.0])) == pytest.approx(float(expr.subs({x: 2.0, y: 1.0})), rel=1e-14)


def test_one_module_file_per_distinct_source(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNPHASE_CACHE_DIR", str(tmp_path))
    assert cache_directory() == tmp_path
    x, y = sp.symbols("x y", real=True)
    first = _source(x + y).load()
    again = _source(x + y).load()
    other = _source(x - y).load()
    assert again is first and other is not first
    assert len(list(tmp_path.glob("kernels_*.py"))) == 2
    assert Path(first.__file__).read_text() == _source(x + y).text


@pytest.mark.slow
def test_a_new_process_loads_the_machine_code_from_the_cache(tmp_path):
    """The first process compiles (a cache miss), the second loads it (a hit, no miss)."""
    env = {**os.environ, "ATTNPHASE_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    runs = [_run(BUILD, env) for _ in (1, 2)]
    assert runs[0]["value"] == pytest.approx(np.exp(0.5) * 2.0 + 0.25, rel=1e-14)
    assert runs[0]["misses"] >= 1 and runs[0]["hits"] == 0
    assert runs[1]["hits"] >= 1 and runs[1]["misses"] == 0
    assert runs[1]["value"] == runs[0]["value"]
    assert list((tmp_path / "__pycache__").glob("kernels_*.nbi"))


def test_a_cache_path_that_cannot_be_a_directory_falls_back_to_a_private_one(tmp_path, monkeypatch):
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    monkeypatch.setenv("ATTNPHASE_CACHE_DIR", str(blocked))
    x, y = sp.symbols("x y", real=True)
    module = _source(3 * x + y).load()
    assert module.f(np.array([1.0, 1.0])) == 4.0
    assert Path(module.__file__).parent != blocked and Path(module.__file__).exists()


def test_hoisted_functions_equal_their_expressions_with_the_node_terms_computed_apart(tmp_path, monkeypatch):
    """``hoisted`` splits an envelope-like function of ``z`` into terms of the node alone (computed
    once per node) and the rest; together they give the expression, and its derivatives, exactly."""
    monkeypatch.setenv("ATTNPHASE_CACHE_DIR", str(tmp_path))
    z0, z1, n, p = sp.symbols("z0 z1 n p", real=True)
    teacher = 1 / (1 + sp.exp(-n * p))  # free of z: a node term
    value = (z0 - n) ** 2 / (2 * p) + (teacher - 1 / (1 + sp.exp(z0 * z1))) ** 2 + sp.exp(2 * z0 * z1 - 2 * n)
    gradient = [sp.diff(value, v) for v in (z0, z1)]
    source = ModuleSource(prox_dimension=2, constants={})
    count = source.hoisted("terms", [("n", [n]), ("p", [p])], [z0, z1], {"value": value, "gradient": gradient})
    module = source.load()
    rng = np.random.default_rng(0)
    for _ in range(5):
        z, node, param = rng.normal(size=2), rng.normal(size=1), rng.uniform(0.5, 2.0, size=1)
        terms = np.empty(count)
        module.terms(node, param, terms)
        at = {z0: z[0], z1: z[1], n: node[0], p: param[0]}
        assert module.value(z, terms) == pytest.approx(float(value.subs(at)), rel=1e-13)
        out = np.empty(2)
        module.gradient(z, terms, out)
        np.testing.assert_allclose(out, [float(g.subs(at)) for g in gradient], rtol=1e-12)
    body = source.text.split("def value(", 1)[1].split("@numba", 1)[0]
    assert not re.search(r"\b[np]_0\b", body)  # the node and the parameters enter through the terms


def test_an_exponential_and_its_integer_multiples_are_computed_once(tmp_path, monkeypatch):
    """``exp(x)``, ``exp(-x)``, ``exp(2 x)``, ``exp(3 x + 3 y)`` and ``exp(-(y + x)(y - x) / 2)`` cost
    three exponentials: ``exp(x)``, ``exp(x + y)`` and ``exp((x^2 - y^2) / 2)``."""
    monkeypatch.setenv("ATTNPHASE_CACHE_DIR", str(tmp_path))
    x, y = sp.symbols("x y", real=True)
    expr = (
        sp.exp(x)
        + sp.exp(2 * x) / (1 + sp.exp(3 * x + 3 * y))
        + 1 / (1 + sp.exp(-x))
        + y * sp.exp(-2 * (y + x))
        + sp.exp((x - y) * (x + y) / 2)
        - sp.exp(-(y + x) * (y - x) / 2) ** 3
    )
    source = ModuleSource(prox_dimension=1, constants={})
    source.scalar("f", [("a", [x, y])], expr)
    assert source.text.count("math.exp") == 3
    module = source.load()
    for point in ([0.3, -0.7], [-1.2, 0.4]):
        at = dict(zip((x, y), point, strict=True))
        assert module.f(np.array(point)) == pytest.approx(float(expr.subs(at)), rel=1e-14)


def test_a_local_divided_by_in_several_powers_is_inverted_once(tmp_path, monkeypatch):
    """A softmax's ``1/(1 + e)``, ``e/(1 + e)^2`` and ``e^2/(1 + e)^4``, and ``y/x^3``: one division per
    divisor, the rest products; the values are the expressions', and a zero divisor still gives ``inf``."""
    monkeypatch.setenv("ATTNPHASE_CACHE_DIR", str(tmp_path))
    x, y = sp.symbols("x y", real=True)
    e = sp.exp(x * y)
    expr = 1 / (1 + e) + y * e / (1 + e) ** 2 + e**2 / (1 + e) ** 4 + y / x**3 + y**2 / x
    source = ModuleSource(prox_dimension=1, constants={})
    source.scalar("f", [("a", [x, y])], expr)
    assert source.text.count("/") == 2, source.text  # 1/(1 + e) and 1/x
    module = source.load()
    for point in ([0.3, -0.7], [-1.2, 0.4], [2.0, 30.0]):
        at = dict(zip((x, y), point, strict=True))
        assert module.f(np.array(point)) == pytest.approx(float(expr.subs(at)), rel=1e-13)
    assert np.isinf(module.f(np.array([0.0, 1.0])))


SOURCE_NAME = """
import json, sys
from attnphase.replica.declaration import paper_model
from attnphase.replica.saddle_equations import derive
from attnphase.saddle.compilation.compiled import compile_system
compile_system(derive(paper_model()))
print(json.dumps({"modules": sorted(m for m in sys.modules if m.startswith("attnphase_kernels_"))}))
"""


@pytest.mark.slow
def test_the_generated_source_is_the_same_in_every_process(tmp_path):
    """Sets of sympy objects iterate in an order that depends on the process's hash seed: the
    generated source must not (else two processes compute with different roundings, and a resumed
    scan differs from an uninterrupted one in the last digits)."""
    modules = []
    for seed in ("1", "2"):  # a cache directory each, so that both generate the module
        cache = tmp_path / seed
        env = {**os.environ, "ATTNPHASE_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": seed}
        modules.append(_run(SOURCE_NAME, env)["modules"])
        assert len(list(cache.glob("recipe_*"))) == 1
    assert modules[0] == modules[1] and len(modules[0]) == 1
    recipes = {next((tmp_path / seed).glob("recipe_*")).name for seed in ("1", "2")}
    assert len(recipes) == 1  # the recipe is the same in every process too


REMEMBERED = """
import json
import attnphase.saddle.compilation.compiled as compiled
from attnphase.replica.declaration import paper_model
from attnphase.replica.saddle_equations import derive

def refuse(system):
    raise AssertionError("generated again")

compiled._generate = refuse
system = compiled.compile_system(derive(paper_model()))
print(json.dumps({"module": system.prox.kernel.__module__}))
"""


@pytest.mark.slow
def test_a_new_process_loads_the_generated_module_by_its_recipe(tmp_path):
    """The first process generates the paper's kernel module and remembers it under its recipe; a
    second process with the same cache loads it without generating (the generator is made to fail
    there); a recipe with another expression is another name."""
    env = {**os.environ, "ATTNPHASE_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    first = _run(SOURCE_NAME, env)["modules"]
    again = _run(REMEMBERED, env)["module"]
    assert [again] == first
    x = sp.Symbol("x", real=True)
    assert Recipe([sp.srepr(x)]).name != Recipe([sp.srepr(x + 1)]).name
    assert Recipe([sp.srepr(x)]).name == Recipe([sp.srepr(x)]).name


ONE_SIGNATURE = """
import json
from attnphase.replica.declaration import paper_model
from attnphase.saddle.compilation.compiled import OneSignature
from attnphase.saddle.stability.assessment import assess
from attnphase.saddle.quadrature.rules import GaussHermite
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.search.anchors import AnchorSearch, generic_guess
from attnphase.saddle.settings import SolverSettings
rule = GaussHermite(8)
solver = make_solver(paper_model(), SolverSettings(quadrature=rule, test_quadrature=rule))
point = AnchorSearch(solver)(2.0, solver.branch("semantic"))  # folded nodes, verification, kinks, Sobol check
assess(solver, point)  # quick evaluations away from the point
envelope = solver.in_form("envelope").problem.map
envelope.map_jacobian(envelope.evaluate(point.values, 2.0), 2.0)
solver.problem.engine.fold(generic_guess(solver))  # the symmetry search's own nodes and starts
compiled = solver.problem.compiled
kernels = {name: getattr(compiled, name) for name in ("prox", "energetic", "score", "test_error")}
print(json.dumps({name: len(kernel.kernel.signatures) for name, kernel in kernels.items()}))
"""


@pytest.mark.slow
def test_each_kernel_is_compiled_once_whatever_arrays_the_solver_passes():
    """Rules, folds, checks and work arrays come read-only or writable, C- or Fortran-ordered; the kernels
    see them in one form, so a new process compiles each once (numba compiles per argument type)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    assert set(_run(ONE_SIGNATURE, env).values()) == {1}


AHEAD = """
import json, sys
from attnphase.replica.declaration import paper_model
from attnphase.saddle.compilation import ahead
from attnphase.saddle.quadrature.rules import GaussHermite
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.search.anchors import AnchorSearch
from attnphase.saddle.settings import SolverSettings
if sys.argv[1] == "no-worker":
    ahead.sys.executable = "/nonexistent/python"
rule = GaussHermite(8)
solver = make_solver(paper_model(), SolverSettings(quadrature=rule, test_quadrature=rule))
module = sys.modules[solver.problem.compiled.prox.kernel.py_func.__module__]
compiled = {name: len(getattr(module, name).signatures) for name in ahead.KERNEL_ARGUMENTS}
point = AnchorSearch(solver)(2.0, solver.branch("semantic"))
stats = {name: getattr(module, name).stats for name in ahead.IN_WORKER}
print(json.dumps({
    "compiled": compiled,
    "hits": {name: sum(s.cache_hits.values()) for name, s in stats.items()},
    "misses": {name: sum(s.cache_misses.values()) for name, s in stats.items()},
    "train_loss": point.train_loss,
}))
"""


@pytest.mark.slow
def test_a_new_module_is_compiled_on_both_cores_before_its_first_call(tmp_path):
    """On an empty cache, making the solver compiles every kernel: the prox and the envelope form here,
    the score form and the test error in a second process, whose machine code the first calls load from
    the disk cache. Without the second process (it cannot be started) the same kernels compile at
    their first call, to the same fixed point."""
    runs = {}
    for case in ("worker", "no-worker"):
        env = {**os.environ, "ATTNPHASE_CACHE_DIR": str(tmp_path / case), "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, "-c", AHEAD, case], env=env, capture_output=True, text=True, check=True)
        runs[case] = json.loads(done.stdout)
    for run in runs.values():  # after making the solver, before any call
        assert [run["compiled"][name] for name in IN_PROCESS] == [1] * len(IN_PROCESS)
        assert [run["compiled"][name] for name in IN_WORKER] == [0] * len(IN_WORKER)
    ahead, alone = runs["worker"], runs["no-worker"]
    assert set(ahead["hits"].values()) == {1} and set(ahead["misses"].values()) == {0}
    assert set(alone["hits"].values()) == {0} and set(alone["misses"].values()) == {1}
    assert alone["train_loss"] == ahead["train_loss"]
