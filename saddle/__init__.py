"""Numerics of the saddle-point equations (THEORY.md sec. 3-7), one room per role.

Each folder is a room with one job; its ``__init__`` says what lives there and what it may import.
The arrows point one way, from the rooms below to those above them:

* :mod:`~attnphase.saddle.tuning`, :mod:`~attnphase.saddle.validation`: every numerical knob in one
  recorded :class:`~attnphase.saddle.tuning.Tuning`, and the checks of numerical inputs;
* :mod:`~attnphase.saddle.quadrature`: rules, the error check, the kink correction;
* :mod:`~attnphase.saddle.compilation`: sympy expressions to numba kernels;
* :mod:`~attnphase.saddle.geometry`: the order parameters' layout, domain, labels, patterns, seeds, gauge;
* :mod:`~attnphase.saddle.points`: fixed and constrained points as values, and their checks;
* :mod:`~attnphase.saddle.prox`: the prox at every node (its policy, its folds, its memories);
* :mod:`~attnphase.saddle.equations`: the map ``F``, its Jacobian, the free-entropy observables;
* :mod:`~attnphase.saddle.settings`: the solver's settings (rules, form, seed, tuning);
* :mod:`~attnphase.saddle.search`: fixed points, anchors, continuation, constrained points;
* :mod:`~attnphase.saddle.stability`: the Hessian of the training loss and the assessment;
* :mod:`~attnphase.saddle.phases`: the alpha grid: every branch, the global minimum, the thresholds.

Nothing here imports torch, plots or writes files, or knows the paper's branch names: labels come
from the declaration.
"""
