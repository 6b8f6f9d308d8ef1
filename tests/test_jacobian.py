"""The Jacobian of the saddle-point map in closed form (THEORY.md sec. 4), against differences.

``dF/dx`` is the closed-form derivative of the updates times the derivative of the expectations
``E[dM*/dX]``, whose integrands are differentiated in ``replica/`` and whose prox moves with the order
parameters by the implicit function theorem. On a quadrature rule it is the exact derivative of the
rule's map wherever no node's prox changes basin, so central differences with a small step (that moves
the prox of almost no node across a basin boundary) must agree with it: to about 1e-6 in the score
form, whose integrand is continuous, and to the few 1e-4 a basin change at one node moves the envelope
form's discontinuous integrand. The same holds for every residual the root searches build on it (the
scaled residual, the tangent's drift in alpha, the constrained system, arclength's bordered system),
at several settings and on a declaration other than the paper's.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnphase.replica.declaration import paper_model
from attnphase.saddle.equations.residual import ScaledResidual
from attnphase.saddle.equations.saddle_map import MemoisedMap
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.prox.policy import Effort
from attnphase.saddle.quadrature.rules import GaussHermite
from attnphase.saddle.search.anchors import AnchorSearch
from attnphase.saddle.search.arclength import AlphaParameter, ArclengthPath, _Bordered
from attnphase.saddle.search.constrained import ConstrainedResidual, ConstrainedSolver
from attnphase.saddle.settings import SolverSettings

SETTINGS = SolverSettings(quadrature=GaussHermite(12), test_quadrature=GaussHermite(12))

#: (omega, sigma, lambda, A, alpha): the default, a lower omega, another sigma and lambda, the other A.
SETTINGS_GRID = [
    (0.3, 0.5, 0.01, ((0.6, 0.4), (0.4, 0.6)), 1.25),
    (0.2, 0.5, 0.01, ((0.6, 0.4), (0.4, 0.6)), 0.9),
    (0.4, 0.7, 0.1, ((0.6, 0.4), (0.4, 0.6)), 1.5),
    (0.3, 0.5, 0.01, ((0.3, 0.7), (0.8, 0.2)), 2.0),
]


def central_differences(function, x: np.ndarray, relative: float = 1e-6) -> np.ndarray:
    """Columns ``(f(x + h e_j) - f(x - h e_j)) / 2h``, ``h`` relative to ``|x_j|`` (at least 1e-2)."""
    columns = []
    for j in range(x.size):
        h = relative * max(abs(x[j]), 1e-2)
        step = np.eye(x.size)[j] * h
        columns.append((function(x + step) - function(x - step)) / (2 * h))
    return np.stack(columns, axis=1)


def assert_close_to_differences(exact: np.ndarray, differences: np.ndarray, tolerance: float, label: str) -> None:
    scale = np.abs(differences).max()
    assert scale > 0, label
    np.testing.assert_allclose(exact, differences, rtol=0, atol=tolerance * scale, err_msg=label)


def converged_points(solver, alpha):
    """The converged anchor of every branch at ``alpha`` (at least two, among them a non-symmetric one)."""
    search = AnchorSearch(solver)
    points = [search(alpha, branch) for branch in solver.branches]
    points = [p for p in points if p.converged and not solver.problem.geometry.vanishes(p.values)]
    assert len(points) >= 2 and any(p.branch != solver.branches[0].name for p in points)
    return points


@pytest.mark.slow
@pytest.mark.parametrize(("omega", "sigma", "lam", "A", "alpha"), SETTINGS_GRID)
def test_the_map_jacobian_equals_central_differences_of_the_map(omega, sigma, lam, A, alpha):
    """``dF/dx`` (all prox starts) at every converged anchor against central differences of ``F``, in
    both forms of the conjugates. In the score form in every direction, the families a branch holds at
    zero included. In the envelope form on the branch's free entries: across a held family's zero the
    prox's two mirror minima exchange which is lower, and the envelope-form integrand jumps there."""
    solver = make_solver(paper_model(omega=omega, sigma=sigma, lam=lam, A=A), SETTINGS)
    for point in converged_points(solver, alpha):
        for form, tolerance in (("score", 1e-5), ("envelope", 2e-3)):
            evaluate = MemoisedMap(solver.in_form(form).problem.map, alpha, Effort.FULL)
            exact = evaluate.jacobian(point.values)
            differences = central_differences(lambda x, ev=evaluate: ev(x).updated, point.values)
            if form == "envelope":
                free = np.ix_(*[solver.problem.layout.free_mask(solver.branch(point.branch))] * 2)
                exact, differences = exact[free], differences[free]
            assert_close_to_differences(exact, differences, tolerance, f"{form} {point.branch}")


def test_the_alpha_derivative_and_the_scaled_residual_equal_their_differences():
    """``dF/dalpha`` against a central difference in alpha, and the scaled residual's Jacobian (the one
    Newton's method steps with) against central differences of the residual itself, on the free entries
    of a positional point (theta held at zero)."""
    solver = make_solver(paper_model(omega=0.2), SETTINGS)
    point = AnchorSearch(solver)(1.0, solver.branch("positional"))
    assert point.converged and point.branch == "positional"
    h = 1e-6
    saddle_map = solver.problem.map
    maps = {a: MemoisedMap(saddle_map, a, Effort.FULL) for a in (point.alpha - h, point.alpha, point.alpha + h)}
    drift = saddle_map.alpha_derivative(maps[point.alpha](point.values), point.alpha)
    difference = (maps[point.alpha + h](point.values).updated - maps[point.alpha - h](point.values).updated) / (2 * h)
    assert_close_to_differences(drift, difference, 1e-6, "dF/dalpha")
    free = solver.problem.layout.free_mask(solver.branch("positional"))
    residual = ScaledResidual(maps[point.alpha], free, point.values, solver.tuning.roots.outside_domain)
    x = point.values[free]
    assert_close_to_differences(residual.jacobian(x), central_differences(residual, x), 1e-5, "scaled residual")


def test_the_constrained_equations_jacobian_equals_their_differences():
    """The constrained system (m and theta held off any fixed point; unknowns q, V and the two
    multipliers) against central differences of its equations."""
    solver = make_solver(paper_model(), SETTINGS)
    point = AnchorSearch(solver)(1.25, solver.branch("positional"))
    constrained = ConstrainedSolver(solver, ("m", "theta"))
    held = np.array([0.8 * point["m"], 0.05])
    start = constrained.params(point.values[constrained.free], held, point.values)
    saddle_map = solver.problem.map
    multipliers = saddle_map.evaluate(start, 1.25, Effort.QUICK).conjugates[constrained.fixed_index]
    unknowns = np.concatenate([start[constrained.free], multipliers])
    residual = ConstrainedResidual(constrained, MemoisedMap(saddle_map, 1.25, Effort.FULL), held, start)
    exact = residual.jacobian(unknowns)
    assert exact is not None
    assert_close_to_differences(exact, central_differences(residual, unknowns), 1e-5, "constrained")


def test_the_bordered_arclength_jacobian_equals_its_differences():
    """Arclength's corrector system in (free entries, alpha) between two semantic points."""
    solver = make_solver(paper_model(), SETTINGS)
    branch = solver.branch("semantic")
    first = AnchorSearch(solver)(1.5, branch)
    second, _ = solver.solve(1.6, branch, initial=first.values)
    assert first.converged and second.converged
    path = ArclengthPath(branch, [(first.values, 1.5), (second.values, 1.6)], AlphaParameter(solver))
    tangent, length = path.secant()
    predicted = path.points[-1] + 0.5 * length * tangent / path.weights
    bordered = _Bordered(path, Effort.FULL, tangent, predicted)
    exact = bordered.jacobian(predicted)
    assert exact is not None
    assert_close_to_differences(exact, central_differences(bordered, predicted), 1e-5, "bordered")


@pytest.mark.slow
def test_the_jacobian_on_a_three_token_declaration(three_token_model):
    """Nothing is specific to the paper: L = 3 tokens, two positional directions (five order
    parameters, six Gaussian dimensions: Gauss-Hermite 5), score form, at a semantic point."""
    rule = GaussHermite(5)
    solver = make_solver(three_token_model, SolverSettings(quadrature=rule, test_quadrature=rule))
    point = AnchorSearch(solver)(2.0, solver.branch("semantic"))
    assert point.converged and point.branch == "semantic"
    evaluate = MemoisedMap(solver.problem.map, 2.0, Effort.FULL)
    differences = central_differences(lambda x: evaluate(x).updated, point.values)
    assert_close_to_differences(evaluate.jacobian(point.values), differences, 1e-5, point.branch)
