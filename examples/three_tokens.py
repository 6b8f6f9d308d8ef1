"""A new variant without new solver code: three tokens, two positional directions, and a
token with a different variance. Run: python examples/three_tokens.py"""

import attnphase as ap

model = ap.AttentionModel(
    # token 3 has twice the variance of tokens 1 and 2: its q, V, theta are twice theirs (THEORY.md sec. 2)
    tokens=ap.GaussianTokens(variances=((0.25, 0.25, 0.5),)),
    # p_1 = u_1, p_2 = u_2, p_3 = -(u_1 + u_2)
    positions=ap.PositionalEncodings(coefficients=((1.0, 0.0), (0.0, 1.0), (-1.0, -1.0))),
    teacher=ap.MixedPositionalTeacher(omega=0.3, positional=((0.6, 0.2, 0.2), (0.2, 0.6, 0.2), (0.2, 0.2, 0.6))),
    student=ap.DotProductAttention(),
    regulariser=ap.Ridge(0.01),
)

system = ap.derive(model)  # symbolic: free entropy and saddle-point equations
print("reduced order parameters:", [e.name for e in system.entries])
print("m_3 =", system.per_token["m_3"])
print(system.latex())  # the whole system, paper-ready

# six Gaussian dimensions (L (r + t) = 6): a small tensor order keeps the rule small
point = ap.fixed_point(model, 2.0, "semantic", order=5)
print(point.row())
