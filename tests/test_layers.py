"""The folders are the architecture: imports only point down, and no module imports itself in a circle.

Walks the source with `ast` (every import, also those inside functions or under TYPE_CHECKING), with
memtraffic/ as `memtraffic` and kernels/ as `memtraffic.kernels`, and checks the layer order of
docs/how-it-works.md:

    vocab < host < ncu < runfolder < kernels < inprogram < collect < probes < views < cli, api
                                               inprogram < _inject (runs inside the user's program: nothing
                                                           imports it, it imports nothing above inprogram)
                                                         analysis (beside inprogram, collect and probes: the
                                                         reading side and the measuring side never import
                                                         each other)
    views import nothing of the measuring side (inprogram, collect, probes, _inject)

A failure names each import (file:line) and the rule it breaks.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# layer -> rank; a module may import its own layer and any layer of a lower rank
RANK = {"vocab": 0, "host": 1, "ncu": 2, "runfolder": 3, "kernels": 4, "inprogram": 5, "collect": 6,
        "probes": 7, "analysis": 5, "views": 8, "top": 9, "_inject": 6}
MEASURING = {"inprogram", "collect", "probes", "_inject"}  # never imported by analysis, nor it by them
INJECTED = "_inject"  # started by path inside the user's program (PYTHONPATH, `python launch.py`): no module
# imports it, and it imports nothing above inprogram/ (beside collect: neither imports the other)


def _modules() -> dict[str, Path]:
    """Module name -> file, for memtraffic/ and kernels/ (installed as memtraffic.kernels)."""
    found = {}
    for root, package in ((REPO / "memtraffic", "memtraffic"), (REPO / "kernels", "memtraffic.kernels")):
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    return found


MODULES = _modules()


def layer(module: str) -> str:
    """The layer a module belongs to: its folder under memtraffic/, or 'top' for cli, api, __init__."""
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in RANK and parts[1] != "top":
        return parts[1]
    return "top"


def _resolve(name: str) -> str | None:
    """The memtraffic module that `import name` loads (its longest known prefix), or None if external."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def imports(module: str) -> list[tuple[int, str]]:
    """(line, imported memtraffic module) for every import statement in a module, at any depth."""
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # `from pkg import sub` imports the submodule pkg.sub when there is one
            subs = [f"{source}.{alias.name}" for alias in node.names]
            targets = [sub if sub in MODULES else source for sub in subs]
        else:
            continue
        for target in targets:
            resolved = _resolve(target)
            if resolved is not None and resolved != module and (node.lineno, resolved) not in found:
                found.append((node.lineno, resolved))
    return sorted(found)


GRAPH = {m: imports(m) for m in MODULES}


def _where(module: str, line: int) -> str:
    return f"{MODULES[module].relative_to(REPO)}:{line}"


def test_the_walk_sees_every_layer():
    layers = {layer(m) for m in MODULES}
    assert layers == set(RANK), layers
    assert "memtraffic.kernels.softmax_rows" in MODULES and "memtraffic.cli" in MODULES


def test_no_module_imports_from_a_layer_above_it():
    broken = []
    for module, edges in GRAPH.items():
        mine = layer(module)
        for line, target in edges:
            theirs = layer(target)
            if RANK[theirs] > RANK[mine]:
                broken.append(f"{_where(module, line)}: {module} ({mine}) imports {target} ({theirs}), "
                              f"a layer above it")
            elif mine == "views" and theirs in MEASURING:
                broken.append(f"{_where(module, line)}: {module} ({mine}) imports {target} ({theirs}); "
                              f"views print what the reading side gives, never the measuring side")
            elif {mine, theirs} & MEASURING and "analysis" in {mine, theirs}:
                broken.append(f"{_where(module, line)}: {module} ({mine}) imports {target} ({theirs}); "
                              f"the measuring side and the analysis never import each other")
            elif RANK[theirs] == RANK[mine] and theirs != mine:
                broken.append(f"{_where(module, line)}: {module} ({mine}) imports {target} ({theirs}), "
                              f"a layer beside it")
    assert not broken, "\n" + "\n".join(broken)


def test_nothing_imports_the_code_started_inside_the_users_program():
    """memtraffic/_inject/ is put on the program's path (collect.trace_ops.INJECT_DIR), never imported: an
    import would run its start-up in memtraffic's own process."""
    broken = [f"{_where(module, line)}: {module} imports {target}" for module, edges in GRAPH.items()
              if layer(module) != INJECTED for line, target in edges if layer(target) == INJECTED]
    assert not broken, "\n" + "\n".join(broken)


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for _, w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    return components


def test_no_import_cycle():
    broken = []
    for component in _cycles():
        members = set(component)
        edges = [f"  {_where(m, line)}: {m} imports {t}" for m in component for line, t in GRAPH[m]
                 if t in members]
        broken.append("cycle among " + ", ".join(component) + ":\n" + "\n".join(edges))
    assert not broken, "\n" + "\n".join(broken)


def test_the_walk_finds_imports_inside_functions():
    nested = [(line, t) for line, t in GRAPH["memtraffic.cli.measure_commands"]
              if t.startswith("memtraffic.collect")]
    assert nested, "cli/measure_commands.py imports the measuring side inside its commands"


def private_imports(module: str) -> list[tuple[int, str]]:
    """(line, 'module.name') for each `from memtraffic.X import _name` in a module: a name with a leading
    underscore belongs to its module (dunders such as __version__ are public)."""
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = module.split(".")
            source = ".".join(base[: len(base) - node.level + (1 if is_package else 0)]
                              + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        if _resolve(source) is None:
            continue  # torch's or another package's private names are theirs to keep stable
        found += [(node.lineno, f"{source}.{a.name}") for a in node.names
                  if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_no_private_name_is_imported_across_modules():
    broken = [f"{_where(m, line)}: {m} imports {name}; make it public where shared, or move it to its user"
              for m in MODULES for line, name in private_imports(m)]
    assert not broken, "\n" + "\n".join(broken)


def test_the_private_import_walk_finds_one(tmp_path, monkeypatch):
    """The walk sees `from memtraffic.X import _name`, also relative and inside a function."""
    path = tmp_path / "probe.py"
    path.write_text("def f():\n    from memtraffic.vocab.files import _renamed\n"
                    "    from .files import _link_new\n")
    monkeypatch.setitem(MODULES, "memtraffic.vocab.probe", path)
    assert private_imports("memtraffic.vocab.probe") == [(2, "memtraffic.vocab.files._renamed"),
                                                         (3, "memtraffic.vocab.files._link_new")]


# The CLI's modules: the app (cli/app.py), its commands (cli/read_commands.py, cli/measure_commands.py) and
# their shared options (cli/options.py), all of the top layer. What they may import besides memtraffic.api
# (the work) and each other: how to print (views), errors, the groupings and metric sets they parse, and
# the option records measure and profile fill in (the work of those is api's too).
CLI = ("memtraffic.cli.app", "memtraffic.cli.read_commands", "memtraffic.cli.measure_commands",
       "memtraffic.cli.options", "memtraffic.cli.__main__")
CLI_ALSO = ("memtraffic.views.", "memtraffic.cli.", "memtraffic.vocab.errors", "memtraffic.vocab.version",
            "memtraffic.vocab.grouping", "memtraffic.ncu.metrics", "memtraffic.collect.measure",
            "memtraffic.collect.profile")


def test_the_cli_is_a_shell_over_the_api():
    """Each command parses its options and prints: the work is a memtraffic.api function a notebook calls."""
    broken = [f"{_where(cli, line)}: {cli} imports {target}; give the work an api function"
              for cli in CLI for line, target in GRAPH[cli]
              if target not in ("memtraffic", "memtraffic.api") and not target.startswith(CLI_ALSO)]
    assert not broken, "\n" + "\n".join(broken)


def test_every_cli_module_is_checked():
    assert set(CLI) == {m for m in MODULES if m.startswith("memtraffic.cli.") and m not in (
        "memtraffic.cli.exits", "memtraffic.cli.help_text")}


def test_no_two_modules_share_a_file_name():
    """One name, one concept: `files.py` in two folders would be two homes for one word (a package's
    __init__.py and __main__.py are Python's names)."""
    by_name: dict[str, list[str]] = {}
    for path in sorted((REPO / "memtraffic").rglob("*.py")):
        if path.name not in ("__init__.py", "__main__.py"):
            by_name.setdefault(path.name, []).append(str(path.relative_to(REPO)))
    shared = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert not shared, shared
