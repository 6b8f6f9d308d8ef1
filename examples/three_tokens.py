"""A new variant without new solver code: three tokens, two positional directions, and a
token with a different variance. Run: python examples/three_tokens.py"""

from attnphase.replica.declaration import (
    AttentionModel,
    DotProductAttention,
    GaussianTokens,
    MixedPositionalTeacher,
    PositionalEncodings,
    Ridge,
)
from attnphase.replica.latex import latex
from attnphase.replica.saddle_equations import derive
from attnphase.saddle.fixed_point import SEMANTIC, SolverSettings
from attnphase.saddle.quadrature import GaussHermite
from attnphase.saddle.scan import make_solver

model = AttentionModel(
    # token 3 has twice the variance of tokens 1 and 2: two covariance classes
    tokens=GaussianTokens(variances=((0.25, 0.25, 0.5),)),
    # p_1 = u_1, p_2 = u_2, p_3 = -(u_1 + u_2)
    positions=PositionalEncodings(coefficients=((1.0, 0.0), (0.0, 1.0), (-1.0, -1.0))),
    teacher=MixedPositionalTeacher(omega=0.3, positional=((0.6, 0.2, 0.2), (0.2, 0.6, 0.2), (0.2, 0.2, 0.6))),
    student=DotProductAttention(),
    regulariser=Ridge(0.01),
)

system = derive(model)
print("reduced order parameters:", [e.name for e in system.entries])
print("m_3 =", system.per_token["m_3"])
print("V_2 update:", latex(system.order_updates[system.parameters.V[1][0, 0]]))

solver = make_solver(model, SolverSettings(quadrature=GaussHermite(5), test_quadrature=GaussHermite(5)))
point = solver.anchor(2.0, SEMANTIC)
print(point.row())
