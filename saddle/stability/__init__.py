"""The stability of a fixed point: the Hessian of the training loss in the overlaps (by elimination
from the Hessian of Phi, from constrained points, or a cusp at the vanishing student) and the
assessment that records it on the point. Imports :mod:`~attnphase.saddle.search` and below."""
