"""The compiled system: a :class:`~attnphase.replica.saddle_equations.ReplicaSystem` turned into numba
kernels over quadrature nodes (the prox, the integrals, the expectations' Jacobian) and numpy
callables for the closed-form updates, generated once per model and cached on disk. Knows nothing of
attention; imports :mod:`attnphase.replica`, :mod:`~attnphase.saddle.quadrature` and the tuning."""
