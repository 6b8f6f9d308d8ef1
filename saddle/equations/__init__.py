"""The saddle-point map ``F`` and its Jacobian in closed form; the free-entropy observables (Phi, the
kink correction, the energy, the test error, the quadrature error check); the residuals a root search
drives to zero, guarded at the domain's edge; and the :class:`~attnphase.saddle.equations.problem.Problem`
that wires one model's collaborators together. Imports the rooms below it."""
