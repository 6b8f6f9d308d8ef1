"""The stability of a fixed point: the Hessian of the training loss in the overlaps (by elimination
from the Hessian of Phi, from constrained points, or a cusp at the vanishing student) and the
assessment that records it on the point; the replicon, the stability of the replica-symmetric point
against replica-symmetry breaking (THEORY.md sec. 12). Imports :mod:`~attnphase.saddle.search` and below."""
