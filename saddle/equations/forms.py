"""The two forms of the energetic conjugates (THEORY.md sec. 4), as a value."""

from __future__ import annotations

import enum


class ConjugateForm(enum.StrEnum):
    """How the conjugates of ``q, m, theta`` are integrated (THEORY.md sec. 4): equal in exact arithmetic."""

    SCORE = "score"  # Gaussian integration by parts, E[M* s_X]: a continuous integrand
    ENVELOPE = "envelope"  # E[dM/dX at prox]: discontinuous where the prox jumps between basins
