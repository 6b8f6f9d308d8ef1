"""Every numerical choice of the solver in one recorded value: :class:`Tuning`.

A :class:`Tuning` is a frozen tree of small dataclasses, one per room of :mod:`attnphase.saddle`
(the prox, the geometry of the order parameters, the root finder, the checks a fixed point must
pass, the anchor searches, continuation in alpha and in arclength, the stability assessment, the
thresholds, the quadrature rule per dimension). Its defaults are the values the package's results
are computed with; it is passed down to the objects that use it, never imported as globals, and
written to every ``run.json`` (:meth:`Tuning.record`), so two results made under different
heuristics can be told apart, and a run is resumed only under the same tuning.

Each field is declared with :func:`knob`: its default, its allowed range (checked on construction,
an error naming the field otherwise) and one line saying what it trades. The docs' knob table is
generated from these declarations (``docs/tuning.md``).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from attnphase.replica.declaration import InputTypeError, Interval, shown
from attnphase.saddle.validation import ParameterError

POSITIVE = Interval(0.0, 1e300, low_open=True)
FRACTION = Interval(0.0, 1.0, low_open=True)
UNIT = Interval(0.0, 1.0)
COUNT = Interval(0, 10_000, integer=True)
POSITIVE_COUNT = Interval(1, 10_000, integer=True)


def knob(default: Any, allowed: Interval | None, trades: str, measured: str = "") -> Any:
    """A field of a tuning dataclass: its ``default``, its ``allowed`` range (per number where the
    value is a tuple of numbers, or of pairs; ``None``: an enum or a flag, checked by type), what
    changing it ``trades`` and where its value was ``measured`` (for the knob table)."""
    return field(default=default, metadata={"allowed": allowed, "trades": trades, "measured": measured})


class RootMethod(enum.StrEnum):
    """How a root of the fixed-point residual is searched (:class:`~attnphase.saddle.search.roots.RootFinder`)."""

    NEWTON = "newton"
    BROYDEN = "broyden"
    HYBR = "hybr"
    DAMPED = "damped"


class DescentStart(enum.StrEnum):
    """Where the local prox policy's descent starts at every node (THEORY.md sec. 12)."""

    CAVITY_MEAN = "cavity-mean"  # z = omega: GAMP's output step from each sample's cavity mean
    ZERO = "zero"  # z = 0: the rule of the authors' notebook


class _Knobs:
    """A tuning dataclass: each field checked against its :func:`knob` range on construction."""

    def __post_init__(self) -> None:
        for spec in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, spec.name)
            object.__setattr__(self, spec.name, _checked(value, spec, type(self).__name__))


def _checked(value: Any, spec: dataclasses.Field, owner: str) -> Any:
    name, allowed, default = spec.name, spec.metadata.get("allowed"), spec.default
    if isinstance(default, _Knobs):
        if not isinstance(value, type(default)):
            raise InputTypeError(f"{name} must be a {type(default).__name__}; got {shown(value)}")
        return value
    if isinstance(default, enum.Enum):
        try:
            return type(default)(value)
        except ValueError:
            choices = ", ".join(m.value for m in type(default))
            raise ParameterError(f"{name} must be one of {choices}; got {shown(value)}") from None
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise InputTypeError(f"{name} must be True or False; got {shown(value)}")
        return value
    if value is None and default is None:
        return None
    if allowed is None:
        return value
    if isinstance(default, tuple) or isinstance(value, list | tuple):
        items = tuple(value) if isinstance(value, list | tuple) else ()
        if not items:
            raise InputTypeError(f"{name} must be a non-empty sequence of numbers {allowed}; got {shown(value)}")
        return tuple(
            tuple(allowed.check(x, name, ParameterError) for x in item)
            if isinstance(item, list | tuple)
            else allowed.check(item, name, ParameterError)
            for item in items
        )
    return allowed.check(value, name, ParameterError)


@dataclass(frozen=True)
class ProxTuning(_Knobs):
    """The multi-start Newton search for the global minimiser of the Moreau envelope (THEORY.md sec. 3),
    and where the local policy's descent starts (sec. 12)."""

    gradient_tolerance: float = knob(
        1e-11,
        Interval(0.0, 1e-3, low_open=True),
        "Newton's stopping gradient: accuracy of the prox against its cost",
    )
    max_iterations: int = knob(60, POSITIVE_COUNT, "Newton iterations per start")
    converged_gradient: float = knob(
        1e-7,
        POSITIVE,
        "gradient below which a node's prox counts as converged (the prox check)",
    )
    extra_directions: int | None = knob(
        None,
        Interval(0, 64, integer=True),
        "random start directions (None: one per prox coordinate above random_starts_above)",
        measured=(
            "three directions find the lower minima the declared starts miss at a three-token point, 12 or 48 "
            "change nothing (tests/test_fixed_points.py::test_more_prox_starts_change_nothing)"
        ),
    )
    random_starts_above: int = knob(
        2,
        COUNT,
        "prox dimension L r above which random start directions are added",
        measured=(
            "two coordinates (the paper's model): eight directions change nothing "
            "(tests/test_fixed_points.py::test_more_prox_starts_change_nothing)"
        ),
    )
    warm_start: bool = knob(
        True,
        None,
        "quick proxes also start from every minimum the last full prox found: fewer full proxes",
    )
    invariance_tolerance: float = knob(
        1e-11,
        POSITIVE,
        "relative tolerance of the envelope's symmetry test at random points",
    )
    descent_start: DescentStart = knob(
        DescentStart.CAVITY_MEAN,
        None,
        "where the local policy's descent starts: the cavity mean (GAMP's output step) or zero",
        measured=(
            "the two give the same positional points within 4e-3 in m at omega 0.15 on Gauss-Hermite 4, 6 "
            "and 20 (docs/validation/prox_policies.py)"
        ),
    )

    def directions(self, prox_dimension: int) -> int:
        """The random start directions at a prox of ``prox_dimension`` (``L r``) coordinates."""
        if self.extra_directions is not None:
            return self.extra_directions
        return prox_dimension if prox_dimension > self.random_starts_above else 0


@dataclass(frozen=True)
class KernelTuning(_Knobs):
    """Constants compiled into the generated kernels (:mod:`saddle.compilation.templates`)."""

    line_search_halvings: int = knob(12, POSITIVE_COUNT, "backtracking halvings of a Newton step before it gives up")
    eigen_sweeps: int = knob(50, POSITIVE_COUNT, "sweeps of the Jacobi iteration for the Hessian's smallest eigenvalue")
    merge_distance: float = knob(
        1e-3,
        POSITIVE,
        "relative distance at which a start is taken to end in a minimum found already",
        measured=(
            "a start stopped at a minimum found before changes no prox "
            "(tests/test_fixed_points.py::test_a_start_that_stops_at_a_minimum_found_before_changes_no_prox)"
        ),
    )
    block: int = knob(256, POSITIVE_COUNT, "nodes per block of the parallel prox loop (memory against scheduling)")

    def template_constants(self) -> dict[str, int | float]:
        """The module constants the kernel templates read."""
        return {
            "_MAX_HALVINGS": self.line_search_halvings,
            "_MAX_SWEEPS": self.eigen_sweeps,
            "BLOCK": self.block,
            "MERGE_DISTANCE": self.merge_distance,
        }


@dataclass(frozen=True)
class GeometryTuning(_Knobs):
    """Thresholds of the order parameters' geometry (THEORY.md sec. 2, 6)."""

    negligible_overlap: float = knob(
        1e-3,
        FRACTION,
        "fraction of its Cauchy-Schwarz bound below which an overlap family counts as zero in a label",
    )
    rounding_zero: float = knob(
        1e-13,
        FRACTION,
        "fraction of its scale below which a flippable entry counts as zero in a zero pattern",
        measured=(
            "tests/test_rank2.py::test_rounding_residue_of_an_off_diagonal_entry_counts_as_zero_in_the_fold_s_pattern"
        ),
    )
    rounding_equal: float = knob(
        1e-12,
        FRACTION,
        "relative difference below which two entries a column permutation exchanges count as equal",
        measured="tests/test_rank2.py::test_a_pattern_records_which_column_exchanges_leave_the_overlaps_unchanged",
    )
    generic_fractions: tuple[tuple[float, float], ...] = knob(
        ((0.2, 0.45), (0.45, 0.7)),
        FRACTION,
        "ranges of the fractions of their scales at which a pattern's symmetries are tested",
        measured="tests/test_symmetry.py::test_entries_of_one_family_are_not_tested_equal",
    )
    vanishing_probe: float = knob(
        1e-10,
        FRACTION,
        "diagonal of q, as a fraction of rho, at which the map's limit at W = 0 is evaluated",
        measured=(
            "the map at W = 0 is the limit of the map as q goes to zero (tests/test_vanishing.py::test_the_map_at_a"
            "_vanishing_student_is_the_limit_of_the_map_as_q_goes_to_zero)"
        ),
    )
    nearly_vanishing: float = knob(
        1e-3,
        FRACTION,
        "fraction of rho below which an unconverged search is repeated from W = 0",
        measured="tests/test_vanishing.py::test_searches_that_run_to_q_zero_end_on_the_vanishing_student",
    )
    q_doublings: int = knob(64, POSITIVE_COUNT, "doublings of q that may bring a start into the domain")
    q_margin_doublings: int = knob(
        2,
        COUNT,
        "doublings past the first q inside the domain",
        measured=(
            "a start just inside theta^2 <= q rho leaves the domain again; a factor 4 inside, the solves converge "
            "(tests/test_vanishing.py::test_a_start_outside_the_domain_is_raised_into_it_along_q_alone)"
        ),
    )
    gauge_angles: int = knob(
        8,
        POSITIVE_COUNT,
        "angles per generator from which the rotation onto a gauge slice is searched",
    )


@dataclass(frozen=True)
class RootTuning(_Knobs):
    """The root search on the fixed-point residual (THEORY.md sec. 4)."""

    method: RootMethod = knob(
        RootMethod.NEWTON,
        None,
        "newton (closed-form Jacobian), broyden, hybr or damped iteration",
        measured=(
            "newton gives up without a fallback: over the 411 searches of the default scan at omega 0.25, "
            "Powell's hybrid method after Newton's stalls spent 2032 of 5154 evaluations and settled 3 "
            "searches, none of them a point the scan kept (tests/test_roots.py; rows compared by "
            "benchmarks/scan_rows.py --compare)"
        ),
    )
    tolerance: float = knob(1e-9, Interval(0.0, 1e-3, low_open=True), "largest scaled residual at which a search stops")
    max_evaluations: int = knob(60, POSITIVE_COUNT, "iterations per stage of a search")
    damping: float = knob(0.5, FRACTION, "step of the damped iteration")
    feasible_halvings: int = knob(30, POSITIVE_COUNT, "halvings of a step in search of a point inside the domain")
    outside_domain: float = knob(
        1e6,
        POSITIVE,
        "the residual's value where the map is not finite or the point lies outside the domain",
        measured=(
            "no search settles on the spurious root outside the domain where V vanishes "
            "(tests/test_vanishing.py::test_a_search_never_settles_outside_the_domain_where_v_vanishes)"
        ),
    )


@dataclass(frozen=True)
class AcceptanceTuning(_Knobs):
    """What a fixed point must satisfy to count as converged (:class:`~attnphase.saddle.points.checks.Check`)."""

    residual: float = knob(1e-8, Interval(0.0, 1e-3, low_open=True), "largest scaled residual of a converged point")
    energy: float = knob(1e-6, FRACTION, "relative gap allowed between the energy and eps_t - line_correction")
    prox_weight: float = knob(1e-6, UNIT, "quadrature weight of nodes whose prox may stay unconverged")
    kink: float = knob(0.05, FRACTION, "largest kink correction, as a fraction of the energy")
    quadrature_error: float = knob(
        0.05,
        FRACTION,
        "largest estimated quadrature error of eps_t, relative to eps_t",
        measured=(
            "converged points of the shipped variants' 20-alpha scans have bounds of 7e-3 at most "
            "(benchmarks/results/variants.json); Gauss-Hermite 12 pruned at 0.9 is off by a factor "
            "(tests/test_faults.py)"
        ),
    )


@dataclass(frozen=True)
class AnchorTuning(_Knobs):
    """The search for a first point of a branch (:mod:`saddle.search.anchors`)."""

    seeds: tuple[float, ...] = knob(
        (0.9, 0.6, 0.3),
        FRACTION,
        "seed strengths of a branch's free overlaps, as fractions of their bounds",
    )
    guess_spread: float = knob(
        1e-2,
        POSITIVE,
        "qhat and Vhat of the generic guess where the equations have no finite value at zero",
    )
    seeded_trial_evaluations: int = knob(
        30,
        POSITIVE_COUNT,
        "evaluations of F after which a seeded trial gives way to the next seed",
        measured=(
            "each of the 31 of 685 seeded trials of 20-alpha scans (the paper's model at six settings, every "
            "variant) that landed did so within 22 evaluations "
            "(tests/test_switching.py::test_a_seeded_trial_gives_way_after_its_evaluation_budget)"
        ),
    )
    coarsest_order: int = knob(
        6,
        Interval(2, 64, integer=True),
        "lowest Gauss-Hermite order of the coarse rule anchors are searched on",
        measured=(
            "on order 4 the semantic anchor of the other target A at alpha 2 is lost; on 6 it is found "
            "(tests/test_quadrature.py::test_a_coarser_rule_is_of_the_same_kind)"
        ),
    )
    coarsest_sobol_log2: int = knob(
        10,
        Interval(4, 24, integer=True),
        "log2 of the fewest Sobol points of the coarse rule",
    )
    ray: tuple[float, ...] = knob(
        (0.005, 0.01, 0.02, 0.04, 0.07, 0.11, 0.16, 0.22, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
        POSITIVE,
        "a ray's steps, as fractions of the family's bound",
    )
    falling: tuple[float, ...] = knob(
        (1.0, 1.15, 1.3, 1.5, 1.75, 2.0, 2.3, 2.6, 3.0, 3.5, 4.0, 5.0, 6.0, 8.0, 10.0),
        POSITIVE,
        "steps beyond the ray of a ray whose loss still falls",
        measured=(
            "the ray from the agnostic point at omega 0.5, sigma 1, lambda 0.1, other A, alpha 2.4 ends at 1.33 "
            "times its starting bound (tests/test_switching.py::test_a_falling_ray_is_followed_past_the_familys_bou"
            "nd_at_its_start_to_the_minimum)"
        ),
    )


@dataclass(frozen=True)
class ContinuationTuning(_Knobs):
    """Continuation of a branch in alpha and the anchors of a trace (:mod:`saddle.search.tracer`)."""

    max_relative_step: float = knob(0.5, POSITIVE, "largest |delta alpha| / alpha of one step")
    max_halvings: int = knob(2, COUNT, "halvings of a failed step")
    max_anchors: int = knob(
        3,
        POSITIVE_COUNT,
        "anchors per branch: both ends and the middle of the grid",
        measured=(
            "tests/test_discovery.py::test_a_branch_lost_inside_the_grid_is_anchored_again_and_found_where_it_goes_on"
        ),
    )
    extra_anchors: int = knob(
        2,
        COUNT,
        "more anchors where a piece was lost inside the grid",
        measured=(
            "tests/test_discovery.py::test_a_branch_lost_inside_the_grid_is_anchored_again_and_found_where_it_goes_on"
        ),
    )
    trusted_merge: int = knob(
        3,
        POSITIVE_COUNT,
        "points of a piece whose merger into a more symmetric branch earns no extra anchor",
        measured="tests/test_fixed_points.py::test_branch_ends_are_classified_and_no_point_is_kept_off_its_branch",
    )
    max_sheets: int = knob(3, POSITIVE_COUNT, "sheets followed past folds from one anchor")


@dataclass(frozen=True)
class ArclengthTuning(_Knobs):
    """Pseudo-arclength continuation past a failed step (:mod:`saddle.search.arclength`)."""

    max_steps: int = knob(40, POSITIVE_COUNT, "arclength steps before the path gives up")
    max_halvings: int = knob(3, COUNT, "halvings of a step whose corrector fails or turns sharply")
    first_step: float = knob(0.25, POSITIVE, "first step, as a fraction of the last two points' distance")
    step_growth: float = knob(1.5, Interval(1.0, 10.0), "growth of the step after a success")
    min_cosine: float = knob(0.5, Interval(-1.0, 1.0), "smallest cosine between consecutive secants")
    wiggle: float = knob(
        0.25,
        POSITIVE,
        "how far back, as a fraction of the last step, the path must come to count as turned at a fold",
        measured=(
            "the discretised map wiggles by a few 1e-3 in alpha near a fold (tests/test_arclength.py::test_the_posi"
            "tional_branch_turns_back_at_a_fold_inside_the_grid_step_beyond_its_last_point)"
        ),
    )
    return_points: int = knob(
        2,
        POSITIVE_COUNT,
        "grid points of a returning sheet solved before continuation in alpha takes over",
    )


@dataclass(frozen=True)
class StabilityTuning(_Knobs):
    """The Hessian of the training loss in the overlaps (:mod:`saddle.stability`)."""

    hessian_step: float = knob(
        1e-2,
        FRACTION,
        "difference step of the gradient, as a fraction of each overlap's bound",
        measured=(
            "1e-2 puts the agnostic point's sign change within 5e-3 of the semantic branch's birth at omega 0.3, "
            "5e-2 6e-3 above it "
            "(tests/test_landscape.py::test_semantic_branch_is_born_where_the_agnostic_point_loses_stability)"
        ),
    )
    smoothing_step: float = knob(
        5e-2,
        FRACTION,
        "relative difference step in q and V (spanning the prox's kinks)",
        measured=(
            "at regular points steps from 1e-2 to 1e-1 give the constrained curvatures to 1e-4; near the positional"
            " fold at omega 0.2 the curvature in m settles from 5e-2 on (tests/test_landscape.py::test_the_hessian_"
            "by_elimination_equals_the_hessian_from_constrained_gradients)"
        ),
    )
    elimination_spread: float = knob(
        0.1,
        POSITIVE,
        "largest spread of a Hessian by elimination kept before constrained points are used",
        measured=(
            "at most 0.041 where the two routes agree (the paper's model at omega 0.1 to 0.5, both targets), 0.22 "
            "to 3.7 where they do not (rank 2) (tests/test_rank2.py::test_a_rank_two_point_is_assessed_on_the_slice"
            "_of_its_gauge_and_from_constrained_points)"
        ),
    )
    hessian_residual: float = knob(
        1e-5,
        POSITIVE,
        "largest residual of a constrained point a Hessian column is read from",
        measured=(
            "a tighter bound stalls the constrained solves of positional points at omega 0.2 at 1e-6 to 4e-6 "
            "(tests/test_landscape.py::test_a_point_wanted_for_its_gradient_has_the_gradient_of_the_converged_one)"
        ),
    )
    domain_halvings: int = knob(
        20,
        POSITIVE_COUNT,
        "halvings of a difference step that leaves the domain",
        measured="tests/test_landscape.py::test_differences_near_the_edge_of_the_domain_stay_inside_it",
    )


@dataclass(frozen=True)
class RepliconTuning(_Knobs):
    """Where replica symmetry holds: the fluctuation response on the nodes
    (:mod:`saddle.stability.replicon`)."""

    log2_points: int = knob(
        15,
        Interval(8, 20, integer=True),
        "log2 of the scrambled Sobol points of the fluctuation response (cost against its noise)",
        measured=("J / a over scramblings along the default scan's branches (docs/validation/replicon.py)"),
    )
    seed: int = knob(1, Interval(0, 2**32 - 1, integer=True), "scrambling seed of the first fluctuation rule")
    scramblings: int = knob(
        3,
        POSITIVE_COUNT,
        "scramblings (seeds seed, seed + 1, ...) that must all find g_out smooth before a point is called so",
        measured=(
            "at the positional point of omega 0.3, alpha 2.4, two of five scramblings of 2^15 points find no jump "
            "(J / a 2e-5, 3e-5), the others 0.04 to 0.19 (docs/validation/replicon.py)"
        ),
    )
    fluctuation: float = knob(
        1e-4,
        Interval(1e-8, 0.5, low_open=True),
        "fluctuation size (node units) at which the jump term is measured (its sqrt(eps) against eps a)",
        measured=(
            "the jump coefficient is the same at 1e-3, 1e-4 and 1e-5 within its noise, and equal to the one on the "
            "jump surface (tests/test_replicon.py::test_the_jump_term_from_two_replica_groups_is_the_one_on_the_"
            "jump_surface)"
        ),
    )
    smooth_below: float = knob(
        1e-3,
        Interval(0.0, 1.0),
        "|J / a| at or below which g_out is smooth at the rule's resolution",
        measured=(
            "|J / a| at most 6e-5 on the semantic branches of omega 0.1 to 0.3 from alpha 1.5 "
            "(docs/validation/replicon.py)"
        ),
    )
    jumps_above: float = knob(
        1e-2,
        Interval(0.0, 1e6, low_open=True),
        "J / a at or above which the jump set carries weight (between the two bounds: unresolved)",
        measured=(
            "150 times the largest smooth value; 0.1 to 4 at the positional, agnostic and mixed points of omega 0.1 to "
            "0.5, and 0.01 to 0.06 on the semantic branch of omega 0.3 from alpha 1.2 to 1.35, on scramblings "
            "that see the jump set (docs/validation/replicon.py)"
        ),
    )


@dataclass(frozen=True)
class ThresholdTuning(_Knobs):
    """alpha_c, alpha_l and the changes of global minimum (:mod:`saddle.phases.thresholds`)."""

    xtol: float = knob(1e-7, POSITIVE, "absolute tolerance of Brent's method in alpha")
    continuation_halvings: int = knob(3, COUNT, "halvings of a step inside a bracket")
    max_bracket_moves: int = knob(
        3,
        COUNT,
        "grid brackets alpha_l's search may move by",
        measured="tests/test_thresholds.py::test_alpha_l_moves_to_the_bracket_where_the_root_rule_puts_it",
    )


@dataclass(frozen=True)
class RuleChoice(_Knobs):
    """A default tensor Gauss-Hermite quadrature: the rule of ``F`` and of the test error, and alpha_l's."""

    order: int = knob(20, Interval(2, 64, integer=True), "Gauss-Hermite points per dimension")
    prune: float = knob(1e-8, Interval(0.0, 1.0, high_open=True), "relative weight below which a node is dropped")
    threshold_order: int = knob(
        32,
        Interval(0, 64, integer=True),
        "Gauss-Hermite order of alpha_l's root (0: the scan's rule)",
    )


@dataclass(frozen=True)
class QuadratureTuning(_Knobs):
    """The default rules, per Gaussian dimension, and the kink correction (:mod:`saddle.quadrature`)."""

    low_dimensions: int = knob(4, POSITIVE_COUNT, "largest Gaussian dimension L (r + t) of the low-dimension rule")
    low: RuleChoice = knob(
        RuleChoice(),
        None,
        "the default rule up to low_dimensions Gaussian dimensions",
        measured=(
            "Gauss-Hermite 20 is within 1e-5 of scrambled Sobol 2^20 at alpha 1.25 and 2 on both branches, 12 and "
            "16 are not within 5e-5; alpha_l on 32 within 5e-4 of its extrapolation in the order (python "
            "benchmarks/quadrature.py --table; "
            "tests/test_quadrature.py::test_default_rule_is_within_its_stated_error)"
        ),
    )
    high: RuleChoice = knob(
        RuleChoice(8, 1e-6, 0),
        None,
        "the default rule beyond",
        measured=(
            "in six dimensions Gauss-Hermite 8 is within 8.5e-4 of 12 at every branch's anchor at alpha 1.5 of L3, "
            "untied and rank2, and prune 1e-6 moves eps_t by 1.7e-4 at most (python benchmarks/six_dimensions.py "
            "prune NAME; validation/quadrature)"
        ),
    )
    sobol_log2: int = knob(
        20, Interval(4, 24, integer=True), "log2 of the points of a Sobol rule asked for without an order"
    )
    kink_flag_ratio: float = knob(
        0.03, POSITIVE, "chord against trapezoid of the prox's slopes above which an interval has a kink"
    )
    kink_min_weight: float = knob(1e-5, UNIT, "least Gaussian weight of an interval searched for a kink")
    kink_step: float = knob(1e-3, POSITIVE, "step of the central differences of M* at an interval's ends")
    kink_panels: int = knob(2, POSITIVE_COUNT, "panels of 8-point Gauss-Legendre on an interval with a kink")
    slope_step: float = knob(1e-5, POSITIVE, "step of the difference giving the prox's slope in the kink correction")

    def choice(self, dimension: int) -> RuleChoice:
        """The default rule for integrals over ``dimension`` Gaussian variables."""
        return self.low if dimension <= self.low_dimensions else self.high


@dataclass(frozen=True)
class Tuning(_Knobs):
    """Every numerical choice of the solver (module docstring); the defaults are the package's."""

    prox: ProxTuning = knob(ProxTuning(), None, "")
    kernels: KernelTuning = knob(KernelTuning(), None, "")
    geometry: GeometryTuning = knob(GeometryTuning(), None, "")
    roots: RootTuning = knob(RootTuning(), None, "")
    acceptance: AcceptanceTuning = knob(AcceptanceTuning(), None, "")
    anchors: AnchorTuning = knob(AnchorTuning(), None, "")
    continuation: ContinuationTuning = knob(ContinuationTuning(), None, "")
    arclength: ArclengthTuning = knob(ArclengthTuning(), None, "")
    stability: StabilityTuning = knob(StabilityTuning(), None, "")
    replicon: RepliconTuning = knob(RepliconTuning(), None, "")
    thresholds: ThresholdTuning = knob(ThresholdTuning(), None, "")
    quadrature: QuadratureTuning = knob(QuadratureTuning(), None, "")

    def record(self) -> dict[str, Any]:
        """The tuning as plain JSON values (nested dicts, lists, strings for enums)."""
        return _recorded(self)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Tuning:
        """The tuning :meth:`record` wrote (``ValueError`` naming the field that does not fit)."""
        return _restored(cls, record, "tuning")

    def replaced(self, **parts: Any) -> Tuning:
        """This tuning with some of its parts, or of their fields, replaced: ``parts`` maps a part
        (``prox``) to a new part or to a dict of its fields (``{"max_iterations": 80}``)."""
        changed = {}
        for name, value in parts.items():
            current = getattr(self, name)
            changed[name] = dataclasses.replace(current, **value) if isinstance(value, Mapping) else value
        return dataclasses.replace(self, **changed)


def _recorded(value: Any) -> Any:
    if isinstance(value, _Knobs):
        return {f.name: _recorded(getattr(value, f.name)) for f in dataclasses.fields(value)}  # type: ignore[arg-type]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple):
        return [_recorded(v) for v in value]
    return value


def _restored(kind: type, record: Any, where: str) -> Any:
    if not isinstance(record, Mapping):
        raise ValueError(f"{where} must be a mapping of {kind.__name__}'s fields; got {shown(record)}")
    fields = {f.name: f for f in dataclasses.fields(kind)}
    unknown = sorted(set(record) - set(fields))
    if unknown:
        raise ValueError(f"{where} has no field {unknown[0]!r} ({kind.__name__} has {', '.join(fields)})")
    values = {}
    for name, value in record.items():
        default = fields[name].default
        if isinstance(default, _Knobs):
            values[name] = _restored(type(default), value, f"{where}.{name}")
        elif isinstance(value, list):
            values[name] = tuple(tuple(v) if isinstance(v, list) else v for v in value)
        else:
            values[name] = value
    return kind(**values)


def knob_table(tuning: Tuning | None = None) -> list[dict[str, str]]:
    """One row per knob of ``tuning`` (default: the package's): its path (``prox.max_iterations``), value,
    allowed range, what it trades and where it was measured: the docs' knob table."""
    rows: list[dict[str, str]] = []

    def walk(part: _Knobs, prefix: str, inherited: str = "") -> None:
        for spec in dataclasses.fields(part):  # type: ignore[arg-type]
            value = getattr(part, spec.name)
            measured = spec.metadata.get("measured", "") or inherited
            if isinstance(value, _Knobs):
                walk(value, f"{prefix}{spec.name}.", measured)
                continue
            allowed = spec.metadata.get("allowed")
            rows.append(
                {
                    "knob": prefix + spec.name,
                    "value": repr(value.value if isinstance(value, enum.Enum) else value),
                    "allowed": "" if allowed is None else str(allowed),
                    "trades": spec.metadata.get("trades", ""),
                    "measured": measured,
                }
            )

    walk(tuning or Tuning(), "")
    return rows


__all__ = [
    "AcceptanceTuning",
    "AnchorTuning",
    "ArclengthTuning",
    "ContinuationTuning",
    "DescentStart",
    "GeometryTuning",
    "KernelTuning",
    "ProxTuning",
    "QuadratureTuning",
    "RootMethod",
    "RootTuning",
    "RuleChoice",
    "StabilityTuning",
    "ThresholdTuning",
    "Tuning",
    "knob",
    "knob_table",
]
