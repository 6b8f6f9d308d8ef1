"""Compile sympy expressions and the kernel templates into one numba module per model.

Each expression group becomes one function of flat float arrays ``(z, nodes, params,
consts)`` whose body is the common-subexpression-eliminated expression printed as plain
Python (``math`` functions), with every distinct exponential computed once (``exp(2 x)`` as the
square of ``exp(x)``, ``exp(-x)`` as its reciprocal). The envelope and its derivatives, which the
prox evaluates many times at one node, are split by :meth:`ModuleSource.hoisted`: their
subexpressions free of ``z`` (the teacher's attention, the student field's mean) are computed once
per node. Those functions and the kernels of :mod:`saddle.compilation.templates` instantiated over them are
written to a module file named by the hash of its source, in the cache directory
(``ATTNPHASE_CACHE_DIR``, else ``$XDG_CACHE_HOME/attnphase``, else ``~/.cache/attnphase``), and
jitted there with ``cache=True``: a later process with the same model loads the machine code
instead of compiling it again. The source is generated from the derived sympy objects and this
package's templates only; nothing user-supplied is ever evaluated.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import logging
import numbers
import os
import re
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType

import numba
import sympy as sp
from sympy.printing.pycode import PythonCodePrinter

from attnphase.saddle.compilation.ahead import load_file


class _KernelPrinter(PythonCodePrinter):
    """Python source for numba: a negative integer power ``x**(-n)`` (``n > 1``) is printed as the
    division ``1.0/(x**n)``. Numba raises ``ZeroDivisionError`` for a float zero to a negative integer
    power even under ``error_model='numpy'``, whereas the division gives ``inf``, which the kernels
    treat as a non-finite (flagged) value."""

    def _print_Pow(self, expr: sp.Pow, rational: bool = False) -> str:
        exponent = expr.exp
        if exponent.is_Integer and exponent < -1:
            return f"1.0/({self._print(sp.Pow(expr.base, -exponent, evaluate=False))})"
        return super()._print_Pow(expr, rational=rational)


logger = logging.getLogger("attnphase")
_PRINTER = _KernelPrinter({"fully_qualified_modules": True})
_HEADER = "import math\n\nimport numba\nimport numpy as np\n\n"

Groups = Sequence[tuple[str, Sequence[sp.Symbol]]]


def _number(value: int | float) -> str:
    """The source of a module constant: an integer as an integer, anything else as a float."""
    return str(int(value)) if isinstance(value, numbers.Integral) else repr(float(value))


def cache_directory() -> Path:
    """Where generated kernel modules and numba's cached machine code live."""
    configured = os.environ.get("ATTNPHASE_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "attnphase"


class ModuleSource:
    """The source of one generated kernel module, built function by function."""

    def __init__(self, prox_dimension: int, constants: Mapping[str, int | float]) -> None:
        """A module whose templates see ``K = prox_dimension`` and the numeric ``constants`` they
        read (e.g. ``{"_MAX_HALVINGS": 12}``)."""
        values = {**constants, "K": prox_dimension}
        self.parts = [_HEADER + "".join(f"{name} = {_number(value)}\n" for name, value in values.items())]

    def constant(self, name: str, value: int | float) -> None:
        """A module-level numeric constant the templates read."""
        self.parts.append(f"\n{name} = {_number(value)}\n")

    def scalar(self, name: str, groups: Groups, expr: sp.Expr) -> None:
        """``name(*arrays) -> float``."""
        header, renamed = _header(groups)
        lines, (result,) = _body([expr], renamed)
        signature = f"def {name}({', '.join(g for g, _ in groups)}):"
        self._add([signature, *header, *lines, f"    return {result}"])

    def vector(self, name: str, groups: Groups, exprs: Sequence[sp.Expr], factor: bool = True) -> None:
        """``name(*arrays, out)`` writing ``exprs`` into the flat array ``out``; ``factor``: pull common
        factors out of sums before the elimination (:func:`_eliminated`), which makes the code faster and
        its generation slower (for the many derivatives of the Jacobian, minutes in six dimensions)."""
        header, renamed = _header(groups)
        lines, results = _body(exprs, renamed, factor)
        writes = [f"    out[{i}] = {r}" for i, r in enumerate(results)]
        self._add([f"def {name}({', '.join(g for g, _ in groups)}, out):", *header, *lines, *writes])

    def hoisted(
        self,
        name: str,
        groups: Groups,
        variables: Sequence[sp.Symbol],
        functions: Mapping[str, sp.Expr | Sequence[sp.Expr]],
    ) -> int:
        """Functions of ``variables`` whose every subexpression free of them is computed once per
        point of the other ``groups`` (e.g. per quadrature node), not at every call.

        ``name(*groups, out)`` writes those invariants into ``out``; each entry of ``functions``
        becomes ``f(v, a) -> float`` (a scalar expression) or ``f(v, a, out)`` (a sequence), of the
        variables ``v`` and the invariants ``a``. Returns the number of invariants."""
        hoist = _Hoisting(frozenset(variables))
        reduced = {
            f: [hoist(e) for e in (exprs if isinstance(exprs, Sequence) else [exprs])] for f, exprs in functions.items()
        }
        self.vector(name, groups, list(hoist.invariants) or [sp.Integer(0)])
        inner = [("v", variables), ("a", list(hoist.invariants.values()))]
        for f, exprs in reduced.items():
            if isinstance(functions[f], Sequence):
                self.vector(f, inner, exprs)
            else:
                self.scalar(f, inner, exprs[0])
        return max(1, len(hoist.invariants))

    def template(self, function: Callable, name: str | None = None, parallel: bool = False, **bindings: str) -> None:
        """The source of a :mod:`saddle.compilation.templates` template, renamed to ``name`` and with each
        placeholder ``key`` of ``bindings`` replaced by its value."""
        source = inspect.getsource(function)
        if name is not None:
            source = re.sub(rf"\bdef {function.__name__}\(", f"def {name}(", source, count=1)
        for placeholder, value in bindings.items():
            source = re.sub(rf"\b{placeholder}\b", value, source)
        self._add(source.rstrip().splitlines(), parallel)

    def _add(self, lines: list[str], parallel: bool = False) -> None:
        """A jitted (and disk-cached) function of the generated module."""
        decorator = f"@numba.njit(cache=True, error_model='numpy'{', parallel=True' if parallel else ''})"
        self.parts.append("\n\n" + decorator + "\n" + "\n".join(lines) + "\n")

    @property
    def text(self) -> str:
        """The module's source so far."""
        return "".join(self.parts)

    def load(self) -> ModuleType:
        """Write the module (once per distinct source) and import it."""
        text = self.text
        stamp = f"{text}\n# numba {numba.__version__} python {sys.version_info[:2]}"
        digest = hashlib.sha256(stamp.encode()).hexdigest()[:20]
        return _import(_write_once(f"kernels_{digest}.py", text))


class Recipe:
    """What a generated module is made from: ``parts`` (the printed expressions it is generated from),
    the code that generates it (this module, :mod:`saddle.compilation.templates`,
    :mod:`saddle.compilation.compiled` and the derivation in :mod:`attnphase.replica.saddle_equations`)
    and the versions of python, sympy and numba. A module generated once is remembered under the hash of
    its recipe (``recipe_<hash>`` holds its file name), so a later process loads it without generating it
    again (the common-subexpression elimination of its expressions takes seconds); any change to a part,
    to that code or to a version is another recipe, generated afresh."""

    def __init__(self, parts: Sequence[str]) -> None:
        generators = [_source_of(name) for name in _GENERATORS]
        versions = f"python {sys.version_info[:2]} sympy {sp.__version__} numba {numba.__version__}"
        digest = hashlib.sha256()
        for part in [*parts, *generators, versions]:
            digest.update(hashlib.sha256(part.encode()).digest())
        self.name = f"recipe_{digest.hexdigest()[:20]}"

    def load(self, kernels: Sequence[str] = ()) -> ModuleType | None:
        """The module remembered for this recipe, if its file is still there, imports and defines every one
        of ``kernels``; ``None`` otherwise (a damaged cache entry is logged and generated again)."""
        index = cache_directory() / self.name
        try:
            path = cache_directory() / index.read_text().strip()
        except (OSError, UnicodeDecodeError, ValueError):
            return None
        if not path.is_file():
            return None
        try:
            module = _import(path)
        except Exception as error:  # a file cut short, or not python: generated again
            logger.warning("the cached kernel module %s does not load (%s); it is generated again", path, error)
            return None
        missing = [name for name in kernels if not hasattr(module, name)]
        if missing:
            logger.warning("the cached kernel module %s lacks %s; it is generated again", path, ", ".join(missing))
            sys.modules.pop(module.__name__, None)
            return None
        return module

    def remember(self, module: ModuleType) -> None:
        """Remember ``module`` (a generated module) for this recipe; nothing if the cache is not writable."""
        path = Path(str(module.__file__))
        if path.parent == cache_directory():
            try:
                _write_once(self.name, path.name)
            except OSError:
                pass


#: The modules whose code generates a kernel module (:class:`Recipe`).
_GENERATORS = (
    "attnphase.saddle.compilation.codegen",
    "attnphase.saddle.compilation.templates",
    "attnphase.saddle.compilation.compiled",
    "attnphase.replica.saddle_equations",
)


def _source_of(module_name: str) -> str:
    return Path(str(importlib.import_module(module_name).__file__)).read_text()


def _import(path: Path) -> ModuleType:
    """The generated module at ``path``, imported once per process under a name from its file name."""
    return load_file(f"attnphase_{path.stem}", path)


def _write_once(filename: str, text: str) -> Path:
    """``filename`` with ``text`` in the cache directory, written atomically if it is not there
    yet (a private temporary directory if the cache directory is not writable)."""
    for directory in (cache_directory(), None):
        try:
            folder = Path(tempfile.mkdtemp(prefix="attnphase-")) if directory is None else directory
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / filename
            if not path.exists() or path.read_text() != text:
                handle, temporary = tempfile.mkstemp(dir=folder, suffix=".tmp")
                with os.fdopen(handle, "w") as stream:
                    stream.write(text)
                os.replace(temporary, path)
            return path
        except OSError:
            continue
    raise OSError("no writable directory for the generated kernels")


def _header(groups: Groups) -> tuple[list[str], dict[sp.Symbol, sp.Symbol]]:
    """Unpack the argument arrays into locals named ``<array>_<i>`` (never a keyword)."""
    lines, renamed = [], {}
    for array, symbols in groups:
        for i, s in enumerate(symbols):
            local = sp.Symbol(f"{array}_{i}", real=True)
            renamed[s] = local
            lines.append(f"    {local.name} = {array}[{i}]")
    return lines, renamed


def _body(
    exprs: Sequence[sp.Expr], renamed: dict[sp.Symbol, sp.Symbol], factor: bool = True
) -> tuple[list[str], list[str]]:
    """The statements computing ``exprs`` (arguments ``renamed`` to their locals) and the results:
    every distinct exponential first (:func:`_exponentials`), then the common subexpressions."""
    exprs, exponents = _exponentials([sp.sympify(e).xreplace(renamed) for e in exprs])
    lines, arguments = _eliminated(list(exponents.values()), "u_", factor)
    lines += [f"    {s.name} = math.exp({a})" for s, a in zip(exponents, arguments, strict=True)]
    more, results = _eliminated(exprs, "t_", factor)
    return lines + more, results


def _eliminated(exprs: Sequence[sp.Expr], prefix: str, factor: bool = True) -> tuple[list[str], list[str]]:
    """``exprs`` after common-subexpression elimination: the statements of the subexpressions (named
    ``prefix`` and a number) and the printed reduced expressions; ``factor``: with sympy's basic
    optimisations first (common factors pulled out of sums)."""
    if not exprs:
        return [], []
    optimizations = "basic" if factor else None
    replacements, reduced = sp.cse(exprs, symbols=sp.numbered_symbols(prefix), optimizations=optimizations)
    return _with_reciprocals(replacements, reduced)


def _with_reciprocals(
    replacements: Sequence[tuple[sp.Symbol, sp.Expr]], reduced: Sequence[sp.Expr]
) -> tuple[list[str], list[str]]:
    """The statements and printed results of a common-subexpression elimination, every division by a
    local ``s`` (a power ``s**-k``) made a product with its reciprocal ``rcp_s = 1.0/s``, computed
    once after ``s`` (first, for an argument or an exponential): a division costs several
    multiplications, and a local is typically divided by in several powers (a softmax's ``1/(1 + e)``,
    ``e/(1 + e)**2``, ``e**2/(1 + e)**4``)."""

    def divides(x: sp.Expr) -> bool:  # a local to a negative integer power
        return x.is_Pow and x.base.is_Symbol and x.exp.is_Integer and x.exp < 0

    expressions = [*(e for _, e in replacements), *reduced]
    bases = sorted({p.base for e in expressions for p in e.atoms(sp.Pow) if divides(p)}, key=lambda b: b.name)
    reciprocal = {b: sp.Symbol(f"rcp_{b.name}", real=True) for b in bases}

    def multiplied(expr: sp.Expr) -> sp.Expr:
        return expr.replace(divides, lambda x: reciprocal[x.base] ** -x.exp)

    def inverse(base: sp.Symbol) -> str:
        return f"    {reciprocal[base].name} = 1.0/{base.name}"

    defined = {s for s, _ in replacements}
    lines = [inverse(b) for b in bases if b not in defined]
    for s, e in replacements:
        lines.append(f"    {s.name} = {_PRINTER.doprint(multiplied(e))}")
        if s in reciprocal:
            lines.append(inverse(s))
    return lines, [_PRINTER.doprint(multiplied(e)) for e in reduced]


class _Hoisting:
    """Replaces the maximal subexpressions free of ``variables`` by symbols ``a_k`` (a sum or product
    with such terms among others gives them one symbol together); ``invariants`` maps each
    replaced subexpression to its symbol, in the order found."""

    def __init__(self, variables: frozenset[sp.Symbol]) -> None:
        self.variables = variables
        self.invariants: dict[sp.Expr, sp.Symbol] = {}

    def __call__(self, expr: sp.Expr) -> sp.Expr:
        expr = sp.sympify(expr)
        if not expr.free_symbols & self.variables:
            return self._symbol(expr)
        if expr.is_Atom:
            return expr
        if expr.is_Add or expr.is_Mul:
            free = [a for a in expr.args if not a.free_symbols & self.variables]
            bound = [self(a) for a in expr.args if a.free_symbols & self.variables]
            if free:
                bound.append(self._symbol(expr.func(*free)))
            return expr.func(*bound)
        return expr.func(*[self(a) for a in expr.args])

    def _symbol(self, expr: sp.Expr) -> sp.Expr:
        if expr.is_Number:
            return expr
        if expr not in self.invariants:
            self.invariants[expr] = sp.Symbol(f"a_{len(self.invariants)}", real=True)
        return self.invariants[expr]


def _exponentials(exprs: Sequence[sp.Expr]) -> tuple[list[sp.Expr], dict[sp.Symbol, sp.Expr]]:
    """``exprs`` with every exponential replaced by a power of a symbol ``exp_k``, and each symbol's
    exponent: ``exp(p x / q)``, with ``x`` the exponent's primitive part and its sign made canonical
    (:func:`_canonical_exponent`) and ``p / q`` in lowest terms, is ``exp_k**p`` with ``exp_k`` the
    symbol of ``exp(x / q)``. So ``exp(x)``, ``exp(-x)`` and ``exp(2 x)`` cost one exponential (a softmax
    over two tokens has ``exp(s)`` and ``exp(-s)``), as do ``exp(x / 2)`` and ``exp(-3 x / 2)``: every
    distinct exponential is computed once."""
    symbols: dict[sp.Expr, sp.Symbol] = {}

    def symbol(exponent: sp.Expr) -> sp.Symbol:
        if exponent not in symbols:
            symbols[exponent] = sp.Symbol(f"exp_{len(symbols)}", real=True)
        return symbols[exponent]

    replacements: dict[sp.Expr, sp.Expr] = {}
    for expr in exprs:
        for atom in sp.ordered(expr.atoms(sp.exp)):  # a set: ordered, so the source is the same in every process
            if atom in replacements:
                continue
            content, primitive = _canonical_exponent(atom.args[0])
            replacements[atom] = symbol(primitive / content.q) ** content.p
    return [e.xreplace(replacements) for e in exprs], {s: exponent for exponent, s in symbols.items()}


def _canonical_exponent(exponent: sp.Expr) -> tuple[sp.Rational, sp.Expr]:
    """``(c, x)`` with ``exponent = c x``: ``x`` the primitive part of the expanded ``exponent``, of the one
    sign of ``+-x`` that sympy's ``could_extract_minus_sign`` does not prefer to negate (so ``x`` and
    ``-x``, in any factored form, have one ``x``), and ``c`` a rational number."""
    content, primitive = sp.expand(exponent).as_content_primitive()
    if primitive.could_extract_minus_sign():
        return -content, -primitive
    return content, primitive
