"""Compile sympy expressions into numba scalar kernels.

Each expression group becomes one function of flat float arrays ``(z, nodes, params,
consts)`` whose body is the common-subexpression-eliminated expression printed as plain
Python (``math`` functions), then jitted by numba. The source is generated from the derived
sympy objects only; nothing user-supplied is ever evaluated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numba
import sympy as sp
from sympy.printing.pycode import PythonCodePrinter

_PRINTER = PythonCodePrinter({"fully_qualified_modules": True})


Groups = Sequence[tuple[str, Sequence[sp.Symbol]]]


def _header(groups: Groups) -> tuple[list[str], dict[sp.Symbol, sp.Symbol]]:
    """Unpack the argument arrays into locals named ``<array>_<i>`` (never a keyword)."""
    lines, renamed = [], {}
    for array, symbols in groups:
        for i, s in enumerate(symbols):
            local = sp.Symbol(f"{array}_{i}", real=True)
            renamed[s] = local
            lines.append(f"    {local.name} = {array}[{i}]")
    return lines, renamed


def _body(exprs: Sequence[sp.Expr], renamed: dict[sp.Symbol, sp.Symbol]) -> tuple[list[str], list[str]]:
    exprs = [sp.sympify(e).xreplace(renamed) for e in exprs]
    replacements, reduced = sp.cse(exprs, symbols=sp.numbered_symbols("t_"), optimizations="basic")
    lines = [f"    {s.name} = {_PRINTER.doprint(e)}" for s, e in replacements]
    return lines, [_PRINTER.doprint(e) for e in reduced]


def scalar_function(name: str, groups: Groups, expr: sp.Expr):
    """A jitted ``name(*arrays) -> float``."""
    header, renamed = _header(groups)
    lines, (result,) = _body([expr], renamed)
    source = "\n".join([f"def {name}({', '.join(g for g, _ in groups)}):", *header, *lines, f"    return {result}"])
    return _jit(name, source)


def vector_function(name: str, groups: Groups, exprs: Sequence[sp.Expr]):
    """A jitted ``name(*arrays, out)`` writing ``exprs`` into the flat array ``out``."""
    header, renamed = _header(groups)
    lines, results = _body(exprs, renamed)
    writes = [f"    out[{i}] = {r}" for i, r in enumerate(results)]
    source = "\n".join([f"def {name}({', '.join(g for g, _ in groups)}, out):", *header, *lines, *writes])
    return _jit(name, source)


def _jit(name: str, source: str):
    namespace: dict[str, object] = {"math": math}
    exec(compile(source, f"<attnphase-{name}>", "exec"), namespace)  # noqa: S102 - generated from sympy
    return numba.njit(cache=False, fastmath=False, error_model="numpy")(namespace[name])
