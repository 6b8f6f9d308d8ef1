"""No grid alpha inside a branch's range is lost silently. On these grids of the paper's model a
continuation step failed at one alpha and the arclength passage went on beyond it, so the branch had no
row there: the global minimum there was another branch, and the changes of minimum reported an island
(``positional -> semantic -> positional`` around omega 0.25, alpha 0.9). The tracer now bridges such an
alpha from its two neighbours; where no strategy reaches a converged point (the rule's map has no root
to the acceptance there), the best attempt is kept flagged with its checks, the gap is recorded with its
own reason, and the global minimum there is left unknown rather than handed to another branch."""

from __future__ import annotations

import numpy as np
import pytest

import attnphase as ap
from attnphase.experiments.options import ScanOptions

pytestmark = pytest.mark.slow

HOLES = [
    pytest.param(0.25, "0.66:1.38:0.08", "positional", 0.9, id="omega0.25-positional-0.9"),
    pytest.param(0.15, "1.14:1.86:0.08", "positional", 1.38, id="omega0.15-positional-1.38"),
    pytest.param(0.45, "1.7:2.5:0.08", "agnostic", 2.1, id="omega0.45-agnostic-2.1"),
]


@pytest.mark.parametrize(("omega", "alphas", "branch", "alpha"), HOLES)
def test_a_hole_in_a_branch_is_bridged_or_kept_flagged_with_its_own_reason(omega, alphas, branch, alpha):
    result = ap.scan(ap.paper_model(omega=omega), alphas, ScanOptions(stability=False), progress=False)
    rows = result.branches[(result.branches["branch"] == branch) & (result.branches["sheet"] == 0)]
    converged = np.sort(rows.loc[rows["converged"].astype(bool), "alpha"].to_numpy())
    inside = [a for a in result.alphas if converged[0] < a < converged[-1]]
    assert set(inside) <= set(rows["alpha"]), "a grid alpha inside the branch's range has no row"
    assert np.isclose(rows["alpha"], alpha).any()
    (here,) = rows[np.isclose(rows["alpha"], alpha)].itertuples()
    gaps = {g.alpha: g.reason for g in result.solution.traces[branch].gaps}
    if not here.converged:  # flagged with the checks it failed, and where bridged, the gap's own reason
        assert here.status != "converged" and here.status.split(":")[0] in {"residual", "energy", "prox", "kink"}
    if alpha in gaps:
        assert f"between its points at alpha = {converged[converged < alpha][-1]:g}" in gaps[alpha]
    changes = list(result.transitions.itertuples())
    for first, second in zip(changes, changes[1:], strict=False):
        island = (first.before, first.after) == (second.after, second.before) and first.above == second.below
        assert not island, f"the minimum goes {first.before} -> {first.after} -> {second.after} at {first.above}"
