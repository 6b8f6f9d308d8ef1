"""The paper's figures, one command each (``attnphase figure NAME``, :func:`figure`): each runs the
package's studies and draws their tables in the shared style (:mod:`attnphase.experiments.style`)."""

from attnphase.experiments.gallery.registry import FIGURES, figure, listing

__all__ = ["FIGURES", "figure", "listing"]
