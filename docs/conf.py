"""Sphinx configuration of the attnphase documentation.

Build (from the repository root)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html
"""

import shutil
import sys
from importlib.metadata import version as _version
from pathlib import Path

import sphinx.ext.autosummary as _autosummary
from sphinx.util.nodes import make_refnode

project = "attnphase"
author = "the attnphase developers"
copyright = "the attnphase developers"
release = _version("attnphase")
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "myst_nb",
    "cli_reference",  # docs/_ext: the command-line reference, generated from the typer app
]
sys.path.insert(0, str(Path(__file__).parent / "_ext"))
cli_reference_app = "attnphase.experiments.cli:app"  # every command and option of it must be documented
cli_reference_prog = "attnphase"

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = ["_build", "jupyter_execute", "**.ipynb_checkpoints", "Thumbs.db", ".DS_Store"]

# -- API reference -------------------------------------------------------------------------
# One page per module in docs/generated/ (git-ignored); the module template
# (_templates/autosummary/module.rst) documents the members on that page. The folder is
# emptied on every build so that a module removed from the package leaves no stale page.
shutil.rmtree(Path(__file__).parent / "generated", ignore_errors=True)
autosummary_generate = True
autosummary_generate_overwrite = True
autosummary_imported_members = False
autosummary_ignore_module_all = False  # the top-level namespace lists what its __all__ exports
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_preserve_defaults = True
python_use_unqualified_type_names = True
# The summary tables show a docstring's first sentence; autosummary ends a sentence at any
# ". ", so teach it the abbreviations of the citations ("THEORY.md sec. 6", "paper eq. 15").
if hasattr(_autosummary, "WELL_KNOWN_ABBREVIATIONS"):
    _autosummary.WELL_KNOWN_ABBREVIATIONS = (
        *_autosummary.WELL_KNOWN_ABBREVIATIONS,
        *("sec.", "Sec.", "secs.", "eq.", "eqs.", "Eq.", "App.", "Fig.", "fig.", "cf."),
    )
add_module_names = False
toc_object_entries_show_parents = "hide"  # the sidebar lists a class's members by their own names
nitpicky = False

# -- MyST and notebooks --------------------------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
nb_execution_mode = "force"
nb_execution_raise_on_error = True
nb_execution_timeout = 900  # seconds per cell: the tutorial's scan takes about 370 s on 2 idle cores
nb_execution_in_temp = True  # a notebook that writes files leaves nothing in docs/
nb_execution_show_tb = True
nb_kernel_rgx_aliases = {".*": "python3"}

# -- HTML ----------------------------------------------------------------------------------
html_theme = "alabaster"
html_title = "attnphase"
html_theme_options = {
    "description": "The replica theory of a solvable model of dot-product attention",
    "fixed_sidebar": True,
    "page_width": "1200px",
    "sidebar_width": "260px",
}
# the page's own contents (for a module: its classes and functions) below the site navigation
html_sidebars = {"**": ["about.html", "searchfield.html", "navigation.html", "localtoc.html", "relations.html"]}


# -- The top-level namespace re-exports --------------------------------------------------
def _alias_reexports(app, env):
    """Index what ``attnphase`` re-exports as aliases of the objects' own documentation.

    The top-level page documents the names of ``attnphase.__all__`` (``attnphase.FixedPoint``),
    and the module pages document the same objects where they are defined
    (``attnphase.saddle.points.fixed_point.FixedPoint``). An unqualified cross-reference, such as a
    type in a signature whose annotation stayed a string, would find both; marked as an alias
    (as autodoc's ``:canonical:`` does), the top-level name still resolves when written in
    full, and an unqualified one goes to the defining module.
    """
    import attnphase

    objects = env.get_domain("py").objects
    for name in getattr(attnphase, "__all__", ()):
        obj = getattr(attnphase, name, None)
        module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
        if not (isinstance(module, str) and isinstance(qualname, str)):
            continue
        alias, canonical = f"attnphase.{name}", f"{module}.{qualname}"
        if alias == canonical:
            continue
        for entry in list(objects):
            if entry == alias or entry.startswith(alias + "."):
                target = canonical + entry[len(alias) :]
                if target in objects and not objects[target].aliased:
                    objects[entry] = objects[entry]._replace(aliased=True)


# -- References to the package's own objects that the Python domain does not find --------
_SUBPACKAGES = ("replica.", "saddle.", "baseline.", "experiments.")


def _resolve_internal(app, env, node, contnode):
    """Link a docstring's reference to one of the package's objects that the domain missed.

    Docstrings name modules as the repository's folders do (``saddle.prox.kernel`` for
    ``attnphase.saddle.prox.kernel``), and a docstring shown on the top-level page keeps its
    references relative to its own module (``SaddlePointSolver.solve``), as do annotations
    that stayed strings. The first kind is looked up under ``attnphase.``; the others link when
    exactly one object of the package ends with the name. Anything else stays plain text.
    """
    if node.get("refdomain") != "py":
        return None
    domain = env.get_domain("py")
    target, role = node["reftarget"], node["reftype"]
    if target.startswith(_SUBPACKAGES):
        return domain.resolve_xref(env, node["refdoc"], app.builder, role, "attnphase." + target, node, contnode)
    if target.startswith((".", "~")):
        return None
    name = target.rsplit(".", 1)[-1]
    matches = [
        (full, entry)
        for full, entry in domain.find_obj(env, None, None, target, role, 1)
        if full.startswith("attnphase.") and not entry.aliased and full.rsplit(".", 1)[-1] == name
    ]
    if len(matches) != 1:
        return None
    full, entry = matches[0]
    return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode, full)


def setup(app):
    app.connect("env-updated", _alias_reexports)
    app.connect("missing-reference", _resolve_internal)
