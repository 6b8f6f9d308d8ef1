"""The prox at every quadrature node: the compiled kernel at fixed constants, the policy that chooses
which stationary point of the envelope a node takes and from which starts (the global minimiser,
:class:`~attnphase.saddle.prox.policy.GlobalMinimum`), the fold of the rule under the envelope's
symmetries, and the engine that holds the memories (warm starts per symmetry pattern, the last full
proxes). Imports :mod:`~attnphase.saddle.compilation`, :mod:`~attnphase.saddle.geometry` and the tuning."""
