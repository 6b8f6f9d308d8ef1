"""The geometry of the order parameters at given constants: their layout (names, families, a branch's
free entries), the domain and Cauchy-Schwarz bounds, the label of a point, the vanishing student, the
symmetry pattern of a point, the seeds of an anchor search, the gauge of the declaration's rotations,
and the branches as invariant subspaces. Evaluates no integral; imports :mod:`attnphase.replica` and the
tuning."""
