"""A first point of a branch at an alpha, without a prior solution (THEORY.md sec. 4, 6).

:class:`AnchorSearch` runs an ordered list of strategies, each a small class that states its one rule
and acts only where that rule says (most act only while no candidate has been found):

1. :class:`RefineCoarse`: the whole search on the coarser rule of the same kind, its point refined on
   this rule (cheap evaluations find the basin; the refinement is the anchor where it converges, and
   where the coarse search found no point of the branch, nothing better is to be had here);
2. :class:`SymmetricPoint`: a branch with no free overlap family is the symmetric point;
3. :class:`SeededStarts`: the symmetric point and the generic guess with the branch's overlaps seeded, on
   every way of putting them on the student's columns, each a trial that gives way; the lowest training
   loss among those that land, else the best tried;
4. :class:`QuadratureChecked`: the candidate's quadrature error is checked;
5. :class:`Rays`: where the candidate is not on the branch, rays from the points of the branches it
   contains (:mod:`saddle.search.rays`).

The coarse search runs the first three on its own rule. The search remembers the symmetric point per
alpha (every branch's seeds start from it) and its coarse search; a renewed solver gets a new search.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from attnphase.saddle.geometry.branches import Branch
from attnphase.saddle.points.fixed_point import FixedPoint
from attnphase.saddle.search.solver import SaddlePointSolver

#: The converged points of a subspace branch a ray may start from, at the anchor's alpha.
SubspacePoints = Callable[[Branch, float], Sequence[FixedPoint]]


def generic_guess(solver: SaddlePointSolver) -> np.ndarray:
    """The alpha -> 0 limit of the equations (conjugates zero) with ``q = rho/2``; where that limit is not
    finite (no ridge term: ``V`` is infinite; the elastic net's potential is a function of the field's
    spread, zero there), the equations at ``qhat = Vhat = guess_spread`` instead."""
    problem = solver.problem
    layout, geometry = problem.layout, problem.geometry
    conjugates = np.zeros(len(layout.names))
    with np.errstate(all="ignore"):  # at lambda = 0 the limit is not finite: the solve reports it
        x = problem.map.orders(conjugates)
        if not np.isfinite(x).all():
            conjugates[layout.q_entries | layout.responses] = solver.tuning.anchors.guess_spread
            x = problem.map.orders(conjugates)
    for i, e in enumerate(layout.entries):
        if e.family == "q" and e.entry[0] == e.entry[1]:
            x[i] = 0.5 * geometry.rho(e.group)
        elif e.family in ("m", "theta"):
            x[i] = 0.0
    return x


def lands_on(point: FixedPoint, branch: Branch) -> bool:
    """``point`` is a converged point of ``branch`` (labelled with its name)."""
    return point.converged and point.branch == branch.name


class AnchorStrategy(Protocol):
    """One rule of the anchor search: given the best candidate so far (``None`` before any), a new one, or
    the same where the rule does not act. A strategy works through the search's operations alone
    (:class:`AnchorSearch`), so it can be tried on its own against any object that offers them."""

    def __call__(
        self, search: AnchorSearch, alpha: float, branch: Branch, found: FixedPoint | None
    ) -> FixedPoint | None: ...


class RefineCoarse:
    """Search on the coarser rule and refine the point found there on this rule: a converged refinement
    (on the branch, or, since the branch's subspace holds it, a more symmetric point) is the candidate,
    and so is the best of the refinement and the symmetric point where the coarse search found no point of
    the branch. Where the refinement does not converge, or the coarse search ended at the vanishing
    student (an invariant set of the map that a refinement cannot leave), the next strategies search on
    this rule."""

    def __call__(self, search: AnchorSearch, alpha: float, branch: Branch, found: FixedPoint | None):
        coarse = None if found is not None else search.coarse()
        if coarse is None:
            return found
        rough = coarse(alpha, branch)
        if search.vanishes(rough.values):
            return None
        point = search.solve(alpha, branch, rough.values)
        if point.converged:
            return point
        if not lands_on(rough, branch):
            return search.best_of(alpha, [point])
        return None


class SymmetricPoint:
    """A branch that leaves no overlap family free is the symmetric point (every overlap zero)."""

    def __call__(self, search: AnchorSearch, alpha: float, branch: Branch, found: FixedPoint | None):
        if found is None and not search.free_families(branch):
            return search.symmetric_point(alpha)
        return found


class SeededStarts:
    """Seeded trials (:meth:`AnchorSearch.seeded_starts`), each giving way after the tuning's budget of
    evaluations; for each way of putting the seeds on the student's columns, the first trial that lands on
    the branch. The candidate is the lowest training loss among those that land, else the best trial
    (:meth:`AnchorSearch.best_of`)."""

    def __call__(self, search: AnchorSearch, alpha: float, branch: Branch, found: FixedPoint | None):
        if found is not None:
            return found
        tried: list[FixedPoint] = []
        landed: list[FixedPoint] = []
        for starts in search.seeded_starts(alpha, branch):
            for start in starts:
                point = search.solve(alpha, branch, start, trial=True)
                tried.append(point)
                if lands_on(point, branch):
                    landed.append(point)
                    break
        if landed:
            return min(landed, key=lambda p: p.train_loss)
        return search.best_of(alpha, tried)


class QuadratureChecked:
    """The candidate's training loss is evaluated again for its quadrature error (:meth:`SaddlePointSolver.checked`)."""

    def __call__(self, search: AnchorSearch, alpha: float, branch: Branch, found: FixedPoint | None):
        return None if found is None else search.checked(found)


class Rays:
    """Where the candidate is not on the branch: a ray (:func:`~attnphase.saddle.search.rays.along_ray`)
    from each converged point of every branch that holds one more overlap family at zero, at which that
    family vanishes, along the family, until one meets the branch. ``subspace_points(b, alpha)``: those
    points of a branch ``b`` (a scan's traces, every sheet); by default the anchor of ``b`` found by the
    same search."""

    def __init__(self, subspace_points: SubspacePoints | None = None) -> None:
        self.subspace_points = subspace_points

    def __call__(self, search: AnchorSearch, alpha: float, branch: Branch, found: FixedPoint | None):
        if found is None or lands_on(found, branch):
            return found
        for subspace, family in search.subspaces(branch):
            if self.subspace_points is None:
                points = [search(alpha, subspace)]
            else:
                points = self.subspace_points(subspace, alpha)
            for point in points:
                if point.converged and family not in search.nonzero_families(point.values):
                    met = search.along_ray(point, family, branch)
                    if met is not None:
                        return met
        return found


#: The strategies of a search on a coarser rule (module docstring).
COARSE_STRATEGIES: tuple[AnchorStrategy, ...] = (RefineCoarse(), SymmetricPoint(), SeededStarts())


def default_strategies(rays: Rays | None = None) -> tuple[AnchorStrategy, ...]:
    """The strategies of a search: the coarse ones, the quadrature check, and ``rays`` if given."""
    return (*COARSE_STRATEGIES, QuadratureChecked(), *(() if rays is None else (rays,)))


class AnchorSearch:
    """The first point of a branch at an alpha on ``solver``, by ``strategies`` in order (module
    docstring); the coarse search runs :data:`COARSE_STRATEGIES` on the coarser rule. Its other methods are
    the operations the strategies are made of."""

    def __init__(self, solver: SaddlePointSolver, strategies: Sequence[AnchorStrategy] | None = None) -> None:
        self.solver = solver
        self.strategies = tuple(strategies) if strategies is not None else default_strategies()
        self._symmetric: dict[float, FixedPoint] = {}
        self._coarse: AnchorSearch | None = None
        self._coarse_made = False

    @classmethod
    def with_rays(cls, solver: SaddlePointSolver, subspace_points: SubspacePoints | None = None) -> AnchorSearch:
        """The whole search on ``solver``, rays included (:class:`Rays`; by default their subspace points are
        the anchors of the contained branches): what a single point's search needs. Keep one per solver:
        it remembers the symmetric points and the coarse search."""
        return cls(solver, default_strategies(Rays(subspace_points)))

    def __call__(self, alpha: float, branch: Branch) -> FixedPoint:
        """The point the strategies end with: labelled by what it converged to, and flagged if it did not."""
        found: FixedPoint | None = None
        for strategy in self.strategies:
            found = strategy(self, alpha, branch, found)
        if found is None:
            raise ValueError("the anchor search's strategies gave no point: the seeded starts belong among them")
        return found

    # ------------------------------------------------------------------ the operations of the strategies
    def coarse(self) -> AnchorSearch | None:
        """The search on the solver's coarser rule (:meth:`GaussHermite.coarser`, :meth:`ScrambledSobol.coarser`,
        at the tuning's floor) at the same constants, or ``None`` if the rule is already the coarsest."""
        if not self._coarse_made:
            rule = self.solver.settings.quadrature.coarser(self.solver.tuning.anchors)
            self._coarse = None if rule is None else AnchorSearch(self.solver.on_rule(rule), COARSE_STRATEGIES)
            self._coarse_made = True
        return self._coarse

    def solve(self, alpha: float, branch: Branch, initial: np.ndarray, trial: bool = False) -> FixedPoint:
        """The solver's point on ``branch`` at ``alpha`` from ``initial``, without the quadrature check (the
        search checks only the point it returns); a ``trial`` gives way after the tuning's budget."""
        budget = self.solver.tuning.anchors.seeded_trial_evaluations if trial else None
        point, _ = self.solver.solve(alpha, branch, initial=initial, error_check=False, budget=budget)
        return point

    def checked(self, point: FixedPoint) -> FixedPoint:
        """``point`` with its quadrature error checked (:meth:`SaddlePointSolver.checked`)."""
        return self.solver.checked(point)

    def vanishes(self, values: np.ndarray) -> bool:
        """The student vanishes at ``values`` (W = 0)."""
        return self.solver.problem.layout.vanishes(values)

    def free_families(self, branch: Branch) -> tuple[str, ...]:
        """The overlap families ``branch`` leaves free."""
        return self.solver.problem.layout.free_families(branch)

    def nonzero_families(self, values: np.ndarray) -> tuple[str, ...]:
        """The overlap families that do not vanish at ``values`` (what a point's label reads)."""
        return self.solver.problem.geometry.nonzero_families(values)

    def subspaces(self, branch: Branch) -> list[tuple[Branch, str]]:
        """Every branch that holds exactly one more overlap family at zero than ``branch``, with that family."""
        return [(b, next(iter(set(b.zero) - set(branch.zero)))) for b in self.solver.branches if branch.contains(b)]

    def seeded_starts(self, alpha: float, branch: Branch) -> list[list[np.ndarray]]:
        """For each way of putting the branch's seeds on the student's columns
        (:meth:`~attnphase.saddle.geometry.seeds.Seeds.columns`), the starts in the order they are tried: the
        symmetric point, then the generic guess, with the branch's free overlaps at each of the tuning's seed
        strengths times their Cauchy-Schwarz bounds."""
        seeds = self.solver.problem.seeds
        bases = (self.symmetric_point(alpha).values, generic_guess(self.solver))
        strengths = self.solver.tuning.anchors.seeds
        return [
            [seeds.seeded(base, branch, strength, columns) for base, strength in itertools.product(bases, strengths)]
            for columns in seeds.columns(branch)
        ]

    def along_ray(self, point: FixedPoint, family: str, branch: Branch) -> FixedPoint | None:
        """The point of ``branch`` the ray from ``point`` along ``family`` meets
        (:func:`~attnphase.saddle.search.rays.along_ray`), on this search's rule and its coarse search's."""
        from attnphase.saddle.search.rays import along_ray

        return along_ray(self, point, family, branch)

    def symmetric_point(self, alpha: float) -> FixedPoint:
        """The fixed point with all overlaps zero at ``alpha``, from the generic guess, or the vanishing
        student (:meth:`vanishing_point`) if that search does not converge and the vanishing student does;
        remembered, since every branch's seeds start from it."""
        if alpha not in self._symmetric:
            solver = self.solver
            most_symmetric = solver.branches[0]
            point, _ = solver.solve(alpha, most_symmetric, initial=generic_guess(solver), error_check=False)
            if not point.converged:
                vanishing = self.vanishing_point(alpha)
                point = vanishing if vanishing.converged else point
            self._symmetric[alpha] = point
        return self._symmetric[alpha]

    def vanishing_point(self, alpha: float) -> FixedPoint:
        """The vanishing student ``W = 0`` at ``alpha``: ``q``, every overlap and every conjugate but the
        responses' zero, the responses ``V`` solved from the generic guess's. ``W = 0`` is a stationary point
        of the training loss when the scores are quadratic in the weights, and ``q = 0`` an invariant set of
        ``F``; the point is a fixed point where the prox stays at ``z = 0`` and the responses' equations have
        a root (its checks say)."""
        solver = self.solver
        start = np.where(solver.problem.layout.responses, generic_guess(solver), 0.0)
        point, _ = solver.solve(alpha, solver.branches[0], initial=start, error_check=False)
        return point

    def best_of(self, alpha: float, tried: list[FixedPoint]) -> FixedPoint:
        """Where no search for a branch at ``alpha`` landed on it: the best point ``tried``, labelled by what
        it converged to, and where none converged, the symmetric point if that has."""
        if not any(p.converged for p in tried):
            parent = self.symmetric_point(alpha)
            if parent.converged:
                return parent  # where every search stalls, the point they started from, converged
        return min(tried, key=lambda p: (not p.converged, p.residual))
