"""An independent estimate of a fixed point's quadrature error: its training loss on scrambled Sobol
rules (THEORY.md sec. 5)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnphase.replica.declaration import Interval
from attnphase.saddle.quadrature.rules import QuadratureError, ScrambledSobol
from attnphase.saddle.validation import SEED

#: log2 of the points of each scrambling of an error check (:class:`QuadratureCheck`).
CHECK_LOG2_POINTS = Interval(4, 20, integer=True)
#: The stream of :class:`QuadratureCheck`'s scrambling seeds (one entropy word beside the check's seed).
CHECK_STREAM = 0x51C4EC
#: Independent scramblings of an error check: two at least for a standard error.
CHECK_SCRAMBLINGS = Interval(2, 64, integer=True)


@dataclass(frozen=True)
class QuadratureCheck:
    """An independent estimate of a fixed point's training loss, for its quadrature error.

    ``eps_t = -Phi`` is evaluated at the converged order parameters and conjugates on ``scramblings``
    scrambled Sobol rules of ``2**log2_points`` points, their scrambling seeds drawn from
    ``numpy.random.SeedSequence((CHECK_STREAM, seed))`` (:attr:`seeds`): independent of each other and,
    but with probability ``scramblings / 2**32``, of the scrambling of any rule seeded with a small
    integer, such as the one the point was solved on. Each is an
    unbiased estimate of the exact ``eps_t`` at that point (a randomised rule integrates the
    discontinuous ``M*`` without bias); their mean ``c`` and its standard error ``s`` give the error
    estimate ``|eps_t - c|`` of the reported value, itself known to about ``2 s``
    (:meth:`~attnphase.saddle.equations.observables.FreeEntropy.train_loss_check`). Since ``Phi`` is stationary at a
    fixed point, moving the rule at fixed order parameters moves ``eps_t`` by the quadrature error of
    ``E[M*]`` alone (THEORY.md sec. 5).
    """

    log2_points: int = 11
    scramblings: int = 4
    seed: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "log2_points", CHECK_LOG2_POINTS.check(self.log2_points, "check log2_points", QuadratureError)
        )
        object.__setattr__(
            self, "scramblings", CHECK_SCRAMBLINGS.check(self.scramblings, "check scramblings", QuadratureError)
        )
        object.__setattr__(self, "seed", SEED.check(self.seed, "check seed", QuadratureError))

    @property
    def label(self) -> str:
        """The check's name in tables, e.g. ``sobol-2^11x4-seed1``."""
        return f"sobol-2^{self.log2_points}x{self.scramblings}-seed{self.seed}"

    @property
    def seeds(self) -> tuple[int, ...]:
        """The scrambling seeds of the rules, 32-bit integers drawn from ``seed``."""
        state = np.random.SeedSequence((CHECK_STREAM, self.seed)).generate_state(self.scramblings)
        return tuple(int(s) for s in state)

    def rules(self) -> tuple[ScrambledSobol, ...]:
        """The independently scrambled rules."""
        return tuple(ScrambledSobol(self.log2_points, seed) for seed in self.seeds)
