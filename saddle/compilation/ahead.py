"""Compiling a new kernel module's kernels on both cores, before their first call.

Numba compiles a jitted function at its first call, one function at a time per process (its compiler
holds a lock), and a generated module's kernels take tens of seconds together. When a module has just
been generated, :func:`compile_ahead` compiles half of them in this process while a second process
compiles the other half into numba's disk cache, from which their first call here then loads them
(``cache=True``). The signatures are those of
:class:`~attnphase.saddle.compilation.compiled.OneSignature`: every array C-contiguous, float64 and read-only.
If the second process cannot be started or fails, the kernels it did not compile are compiled at
their first call, as without this module.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from numba import types

#: The kinds of each kernel's arguments: an array of the given rank, a float or an integer.
KERNEL_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "prox_kernel": ("array2", "array1", "array1", "array3", "float", "int"),
    "energetic": ("array2", "array2", "array1", "array1", "array1"),
    "score": ("array2", "array2", "array1", "array1", "array1"),
    "energetic_jacobian": ("array2", "array2", "array1", "array1", "array1"),
    "score_jacobian": ("array2", "array2", "array1", "array1", "array1"),
    "test_error": ("array2", "array1", "array1", "array1"),
}

#: Compiled here: the prox and the envelope form with its Jacobian (a scan calls them at a vanishing
#: student); about as long as :data:`IN_WORKER`, compiled meanwhile by the second process: the score
#: form (the default), its Jacobian and the test error. Each form's kernels share their integrand's
#: compiled functions, so a form is compiled in one process.
IN_PROCESS = ("prox_kernel", "energetic", "energetic_jacobian")
IN_WORKER = ("score", "score_jacobian", "test_error")

#: Seconds the second process may take before it is stopped and its kernels left to their first call.
WORKER_TIMEOUT = 600.0

_WORKER = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("attnphase_ahead", sys.argv[1])
ahead = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ahead)
ahead.compile_kernels(*sys.argv[2:])
"""


def signature(kinds: Sequence[str]) -> tuple[types.Type, ...]:
    """The numba signature of arguments of the given kinds (:data:`KERNEL_ARGUMENTS`)."""
    scalars = {"float": types.float64, "int": types.int64}
    return tuple(
        types.Array(types.float64, int(kind[-1]), "C", readonly=True) if kind.startswith("array") else scalars[kind]
        for kind in kinds
    )


def load_file(name: str, path: Path) -> ModuleType:
    """The python file at ``path`` imported as the module ``name`` (once per process); a file that does
    not import leaves no module behind (its error is raised)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def compile_kernels(name: str, path: str, kernels: str) -> None:
    """Compile the ``kernels`` (JSON: kernel name to argument kinds) of the generated module ``name`` at
    ``path`` into numba's disk cache: the second process's work (this file is loaded there on its own,
    without the package, whose imports would take seconds)."""
    module = load_file(name, Path(path))
    for kernel, kinds in json.loads(kernels).items():
        getattr(module, kernel).compile(signature(kinds))


def compile_ahead(module: ModuleType) -> None:
    """Compile ``module``'s :data:`IN_PROCESS` kernels here and its :data:`IN_WORKER` kernels in a second
    process at the same time, and wait for it; its kernels then load from the disk cache here."""
    kernels = json.dumps({name: KERNEL_ARGUMENTS[name] for name in IN_WORKER})
    command = [sys.executable, "-c", _WORKER, __file__, module.__name__, str(module.__file__), kernels]
    try:
        # this interpreter, this file and a module the package generated: no outside input
        worker = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # noqa: S603
    except OSError:
        worker = None
    for name in IN_PROCESS:
        getattr(module, name).compile(signature(KERNEL_ARGUMENTS[name]))
    if worker is None:
        return
    try:
        worker.wait(timeout=WORKER_TIMEOUT)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()
