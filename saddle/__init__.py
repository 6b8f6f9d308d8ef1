"""Numerics of the saddle-point equations: compiled kernels, quadrature, fixed points, branches, thresholds."""
