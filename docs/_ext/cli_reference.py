"""A command-line reference generated from the commands themselves (``guide/cli.md``).

The ``attnphase`` command line is a typer app. ``typer.main.get_command(app)`` gives the click
command that parses the command line, and the directive below renders, from that object, every
subcommand (its usage, its help and every option with its help and default) at build time, so the
page cannot drift from ``--help``. ``docs/conf.py`` names the app and the program
(``cli_reference_app = "module:attribute"``, ``cli_reference_prog``), and a page says::

    ```{eval-rst}
    .. typer-reference::
    ```

The click command is built once, when the builder starts, before any page is read: autodoc (with
``autodoc_preserve_defaults``) replaces the signatures of the functions it documents, the commands'
callbacks among them, and typer reads its options from those signatures.

Each option is declared with Sphinx's ``program``/``option`` directives, so it is indexed and can
be linked (``{option}`` role with the program, e.g. ``attnphase-scan --order``). Help texts are
shown as plain text, never parsed as markup. Once the pages are read, every command and option of
the app is checked to be on the page, each with a help text; one that is not is a warning (an
error under ``-W``).

(``sphinx-click`` renders click commands, but typer 0.26 and later build their commands on a
copy of click of their own, which ``sphinx-click`` does not recognise; this extension reads the
commands through attributes that both copies share.)
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx import addnodes
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

#: What the environment records of the rendered reference: per document, the commands' programs.
ENV_KEY = "cli_reference_programs"
#: The default a typer help record appends to an option's help, which the reference shows apart.
DEFAULT_SUFFIX = re.compile(r"\s*\[(?:default: [^\]]*|required)\]\s*$")


#: The click command of each app, by ``module:attribute``, built when the builder starts.
_COMMANDS: dict[str, Any] = {}


def load_app(path: str) -> Any:
    """The object at ``module:attribute``."""
    module, _, attribute = path.partition(":")
    if not module or not attribute:
        raise ValueError(f"expected module:attribute, got {path!r}")
    return getattr(importlib.import_module(module), attribute)


def root_command(path: str) -> Any:
    """The click command (a group) of the typer app at ``path`` (or the click command there), built
    once (:func:`build_commands`)."""
    if path not in _COMMANDS:
        app = load_app(path)
        if hasattr(app, "list_commands"):
            _COMMANDS[path] = app
        else:
            import typer

            _COMMANDS[path] = typer.main.get_command(app)
    return _COMMANDS[path]


def build_commands(app: Any) -> None:
    """Build the configured app's click command before any page is read (module docstring)."""
    if app.config.cli_reference_app:
        root_command(app.config.cli_reference_app)


def context(command: Any, name: str, parent: Any = None) -> Any:
    """A click context of ``command`` run as ``name`` (nothing is parsed)."""
    return command.context_class(command, info_name=name, parent=parent)


def subcommands(root: Any, prog: str) -> Iterator[tuple[str, Any, Any]]:
    """``(name, command, context)`` of every visible subcommand, in the order the app lists them."""
    ctx = context(root, prog)
    for name in root.list_commands(ctx):
        command = root.get_command(ctx, name)
        if command is not None and not getattr(command, "hidden", False):
            yield name, command, context(command, name, ctx)


def options(command: Any) -> list[Any]:
    """The visible options of ``command`` (not its arguments; ``--help`` is not among its params)."""
    return [
        p for p in command.params if getattr(p, "param_type_name", None) == "option" and not getattr(p, "hidden", False)
    ]


def program_key(program: str) -> str:
    """``program`` as Sphinx's ``program`` directive records it (spaces as dashes)."""
    return re.sub(r"\s+", "-", program.strip())


def signature(option: Any, ctx: Any) -> str:
    """The option's names with its value's placeholder, comma-separated as Sphinx's ``option``
    directive reads them: ``--order <int>``, ``--stability, --no-stability``."""
    names, _ = option.get_help_record(ctx)
    return ", ".join(part.strip() for part in names.split(" / "))


def default_text(option: Any) -> str | None:
    """The option's default as the command line shows it, or ``None`` where none is shown."""
    shown = getattr(option, "show_default", None)
    if isinstance(shown, str):
        return shown
    if shown is False:
        return None
    value = option.default
    if option.is_flag and option.secondary_opts:
        return (option.opts if value else option.secondary_opts)[0]
    if value is None or value == () or value == []:
        return None
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return str(value)


def plain(*children: nodes.Node) -> nodes.paragraph:
    """A paragraph of ``children`` shown as the terminal shows them (no smart quotes or dashes:
    ``--model`` stays two hyphens)."""
    paragraph = nodes.paragraph("", "", *children)
    paragraph["support_smartquotes"] = False
    return paragraph


def paragraphs(text: str) -> list[nodes.paragraph]:
    """``text`` as plain paragraphs (split at blank lines, lines joined), never parsed as markup."""
    blocks = re.split(r"\n\s*\n", (text or "").strip())
    return [plain(nodes.Text(" ".join(line.strip() for line in block.splitlines()))) for block in blocks if block]


def first_sentence(text: str) -> str:
    """The first line of a command's help."""
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


class TyperReference(SphinxDirective):
    """``.. typer-reference::``: the whole command line of ``cli_reference_app`` as
    ``cli_reference_prog`` (``:prog:`` overrides the program's name)."""

    option_spec = {"prog": directives.unchanged_required}

    def run(self) -> list[nodes.Node]:
        path = self.config.cli_reference_app
        if not path:
            raise self.error("set cli_reference_app = 'module:attribute' in conf.py")
        root = root_command(path)
        prog = self.options.get("prog") or self.config.cli_reference_prog or root.name
        commands = list(subcommands(root, prog))
        result: list[nodes.Node] = []

        overview = nodes.literal_block("", f"{prog} [OPTIONS] COMMAND [ARGS]...\n{prog} COMMAND --help")
        overview["language"] = "shell"
        result += [*paragraphs(root.help), overview]
        listing = nodes.bullet_list()
        for name, command, _ in commands:
            section_id = nodes.make_id(f"{prog}-{name}")
            link = nodes.reference("", "", nodes.literal("", f"{prog} {name}"), refid=section_id, internal=True)
            item = plain(link, nodes.Text(f": {first_sentence(command.help)}"))
            listing += nodes.list_item("", item)
        result.append(listing)

        recorded = self.env.__dict__.setdefault(ENV_KEY, {}).setdefault(self.env.docname, set())
        for name, command, ctx in commands:
            result.append(self._command_section(prog, name, command, ctx))
            recorded.add(program_key(f"{prog} {name}"))
        result += self._parse([".. program:: None"])
        return result

    def _parse(self, lines: list[str]) -> list[nodes.Node]:
        holder = nodes.container()
        self.state.nested_parse(StringList(lines, source=self.get_source_info()[0]), self.content_offset, holder)
        return list(holder.children)

    def _command_section(self, prog: str, name: str, command: Any, ctx: Any) -> nodes.section:
        program = f"{prog} {name}"
        section = nodes.section(ids=[nodes.make_id(f"{prog}-{name}")], names=[nodes.fully_normalize_name(program)])
        section += nodes.title("", "", nodes.literal("", program))
        self.state.document.note_implicit_target(section, section)
        usage = nodes.literal_block("", f"{program} {' '.join(command.collect_usage_pieces(ctx))}".strip())
        usage["language"] = "shell"
        section += self._parse([f".. program:: {program}"])
        section += [usage, *paragraphs(command.help)]
        chosen = options(command)
        if not chosen:
            section += plain(nodes.Text("No options besides --help."))
        for option in chosen:
            parsed = self._parse([f".. option:: {signature(option, ctx)}"])
            content = next(iter(n for p in parsed for n in p.findall(addnodes.desc_content)), None)
            if content is None:  # pragma: no cover - Sphinx always gives an option a content node
                raise self.error(f"{program}: the option {option.opts} was not rendered")
            content += paragraphs(DEFAULT_SUFFIX.sub("", option.help or ""))
            default = default_text(option)
            if default is not None:
                content += plain(nodes.Text("default: "), nodes.literal("", default))
            section += parsed
        return section


def expected(app_path: str, prog: str) -> tuple[set[str], set[tuple[str, str]], list[tuple[str, str]]]:
    """The programs (``attnphase-scan``, ...) and ``(program, option)`` pairs the app has, and the
    options without a help text."""
    root = root_command(app_path)
    programs, pairs, silent = set(), set(), []
    for name, command, _ in subcommands(root, prog):
        program = program_key(f"{prog} {name}")
        programs.add(program)
        for option in options(command):
            pairs |= {(program, o) for o in (*option.opts, *option.secondary_opts)}
            if not (option.help or "").strip():
                silent.append((program, option.opts[0]))
    return programs, pairs, silent


def check_reference(app: Any, env: Any) -> None:
    """Warn about every command or option of the configured app that no page documents."""
    path, prog = app.config.cli_reference_app, app.config.cli_reference_prog
    if not path:
        return
    programs, pairs, silent = expected(path, prog)
    rendered = set().union(*getattr(env, ENV_KEY, {}).values())
    documented = set(env.get_domain("std").progoptions)
    for program in sorted(programs - rendered):
        logger.warning("the command-line reference does not document the command %r", program)
    for program, option in sorted(pairs - documented):
        logger.warning("the command-line reference does not document the option %s of %r", option, program)
    for program, option in silent:
        logger.warning("the option %s of %r has no help text", option, program)


def purge(app: Any, env: Any, docname: str) -> None:
    getattr(env, ENV_KEY, {}).pop(docname, None)


def merge(app: Any, env: Any, docnames: set[str], other: Any) -> None:
    mine = env.__dict__.setdefault(ENV_KEY, {})
    for docname, programs in getattr(other, ENV_KEY, {}).items():
        if docname in docnames:
            mine[docname] = programs


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("typer-reference", TyperReference)
    app.add_config_value("cli_reference_app", "", "env")
    app.add_config_value("cli_reference_prog", "", "env")
    app.connect("builder-inited", build_commands)
    app.connect("env-purge-doc", purge)
    app.connect("env-merge-info", merge)
    app.connect("env-check-consistency", check_reference)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
