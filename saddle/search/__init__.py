"""The search for fixed points: the root finder and its passes, the solver (solve, observe, tangent),
the anchor search as an ordered list of strategies, rays from contained branches, constrained saddle
points, continuation in alpha and in pseudo-arclength behind one interface, and the branch tracer with
its records. Imports :mod:`~attnphase.saddle.equations` and the rooms below it."""
