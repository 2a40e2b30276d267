"""``python -m tools.trace``: how far a member action travels, from its cog to the ledger row.

It follows, statically, the calls a reader follows from an entry (default: the ``/video``
slash command's callback, ``cogs.video:VideoCog.video``) until the first call of a target
(default: ``bot.storage.repos.ledger:LedgerStore.insert_charge``, the charge's row), and
prints three figures:

- **files entered**: the distinct modules of ours the trace enters: those of the functions on
  the route, and of every function they call before the target is reached;
- **steps**: the calls into our own functions it meets on the way, one per function;
- **returns to a higher layer**: how many of those calls go down a layer and come back
  without reaching the target, handing control back up (an adapter that runs the use case
  itself goes down and back up once per part: price, threshold, queue status, submit...).

The route is the functions from which the target can be reached; they are entered and read in
full, in source order, depth first. A call off the route counts as one step into its file (and
one return if it goes down a layer) but is not followed inside, as a reader notes a helper and
moves on. ``--whole`` follows every call instead (each function once): a bigger, noisier
figure of everything the command may run before the charge.

The layers are the ones ``tests/test_layout.py`` holds (its ``LAYERS``, read from that file
without importing it), as ``docs/architecture.md`` draws them; the ground (logs, settings,
clock, redaction, i18n) is neither entered nor counted, since every layer uses it.

How calls are resolved (an approximation, read with ``ast``; nothing is imported or run): by
the names a module imports, the annotations of parameters and return values, the attributes a
class declares, sets in ``__init__`` (``self.generation = services.generation``) or returns
from a property (``db.jobs``) and
``Interaction[GenBot].client``; a method call on a receiver of unknown
type is resolved when exactly one class of ours, at the caller's layer or below, defines a
method of that name. Decorators are not calls of the function. Missed: calls through a
variable holding a function, ``getattr``, a method name two classes share on an untyped
receiver; and the branch order is the source's (``/video`` with several takes is met before
the single one). The figures are therefore an approximation, the same from one run to the
next: good for comparing the code before and after a change, not to the unit.

Options: ``--entry module:Qualname``, ``--target module:Qualname``, ``--whole``, and
``--steps`` to print each step (the caller's layer, the caller, the callee).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bot", "cogs")
DEFAULT_ENTRY = "cogs.video:VideoCog.video"
DEFAULT_TARGET = "bot.storage.repos.ledger:LedgerStore.insert_charge"


def read_layers() -> tuple[tuple[str, ...], ...]:
    """``LAYERS`` of tests/test_layout.py, outside in, read from its source."""
    tree = ast.parse((ROOT / "tests" / "test_layout.py").read_text("utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "LAYERS" for t in node.targets
        ):
            value: tuple[tuple[str, ...], ...] = ast.literal_eval(node.value)
            return value
    raise SystemExit("tests/test_layout.py has no LAYERS")


LAYERS = read_layers()
GROUND = len(LAYERS) - 1
"""The last layer: used by all, never entered by the trace."""


def layer(module: str) -> int:
    """The index of ``module``'s layer in :data:`LAYERS` (0: the cogs); -1 above them all."""
    for index, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    return -1


@dataclass
class Module:
    """One module of ours, parsed: what its names stand for, its functions and classes."""

    name: str
    path: Path
    tree: ast.Module
    names: dict[str, str] = field(default_factory=dict)
    """A local name -> what it stands for: ``module`` or ``module:Qualname``."""
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    aliases: dict[str, ast.expr] = field(default_factory=dict)


Type = tuple[str, str | None]
"""A type of ours: (``module:Class``, None), or a generic of another library over one of ours,
(``generic``, ``module:Class``), as ``discord.Interaction[GenBot]``."""


class Index:
    """Every module of ``bot/`` and ``cogs/``: their names, functions, classes and attributes."""

    def __init__(self) -> None:
        self.modules: dict[str, Module] = {}
        for package in PACKAGES:
            for path in sorted((ROOT / package).rglob("*.py")):
                parts = list(path.relative_to(ROOT).with_suffix("").parts)
                if parts[-1] == "__init__":
                    parts.pop()
                name = ".".join(parts)
                self.modules[name] = Module(name, path, ast.parse(path.read_text("utf-8")))
        for module in self.modules.values():
            self._read(module)
        self.methods: dict[str, list[str]] = {}
        self.attributes: dict[str, dict[str, set[str]]] = {}
        for module in self.modules.values():
            for cls in module.classes:
                for qual in module.functions:
                    if qual.startswith(cls + "."):
                        method = qual.split(".", 1)[1]
                        self.methods.setdefault(method, []).append(f"{module.name}:{qual}")
                self.attributes[f"{module.name}:{cls}"] = self._class_attributes(module, cls)
        self.by_attribute: dict[str, set[str]] = {}
        for types in self.attributes.values():
            for attr, classes in types.items():
                self.by_attribute.setdefault(attr, set()).update(classes)

    def _read(self, module: Module) -> None:
        is_package = module.path.name == "__init__.py"
        package = module.name if is_package else module.name.rpartition(".")[0]
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] in PACKAGES:
                        module.names[alias.asname or alias.name.split(".")[0]] = alias.name
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                if base.split(".")[0] not in PACKAGES:
                    continue
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    module.names[alias.asname or alias.name] = (
                        full if full in self.modules else f"{base}:{alias.name}"
                    )
        for node in module.tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                module.functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                module.classes[node.name] = node
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        module.functions[f"{node.name}.{item.name}"] = item
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if isinstance(target, ast.Name) and isinstance(node.value, ast.Subscript):
                    module.aliases[target.id] = node.value

    def lookup(self, module: Module, name: str) -> str | None:
        """What a bare name of ``module`` stands for: ``module:Qualname`` or a module."""
        if name in module.functions or name in module.classes:
            return f"{module.name}:{name}"
        found = module.names.get(name)
        if found is None or ":" not in found:
            return found
        # Re-exported by a package's __init__: follow it to where it is defined.
        mod, _, attr = found.partition(":")
        if mod in self.modules and attr not in self.modules[mod].functions | dict.fromkeys(
            self.modules[mod].classes
        ):
            inner = self.modules[mod].names.get(attr)
            if inner is not None and inner != found:
                return inner
        return found

    def types_in(self, module: Module, node: ast.expr | None) -> Type | None:
        """The type of ours an annotation names (in ``X | None``, ``list[X]``, ``"X"``...)."""
        if node is None:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                return self.types_in(module, ast.parse(node.value, mode="eval").body)
            except SyntaxError:
                return None
        if isinstance(node, ast.Name):
            if node.id in module.aliases:
                return self.types_in(module, module.aliases[node.id])
            found = self.lookup(module, node.id)
            if found and ":" in found and self.is_class(found):
                return (found, None)
            return None
        if isinstance(node, ast.Attribute):
            return None
        if isinstance(node, ast.Subscript):
            inner = self.types_in(module, node.slice)
            outer = self.types_in(module, node.value)
            if outer is not None:
                return outer
            if inner is not None and isinstance(node.value, ast.Attribute):
                return ("generic", inner[0])  # discord.Interaction[GenBot]
            return inner
        if isinstance(node, ast.BinOp):
            return self.types_in(module, node.left) or self.types_in(module, node.right)
        if isinstance(node, ast.Tuple):
            for element in node.elts:
                found_type = self.types_in(module, element)
                if found_type is not None:
                    return found_type
        return None

    def is_class(self, qual: str) -> bool:
        """Whether ``module:Name`` is a class of ours."""
        mod, _, name = qual.partition(":")
        return mod in self.modules and name in self.modules[mod].classes

    def _class_attributes(self, module: Module, cls: str) -> dict[str, set[str]]:
        """Attribute name -> the classes of ours it holds.

        Read from class annotations, ``self.x: T`` and ``self.x = param`` in ``__init__``, and
        properties' return annotations.
        """
        found: dict[str, set[str]] = {}

        def add(attr: str, typ: Type | None) -> None:
            if typ is not None and typ[0] != "generic":
                found.setdefault(attr, set()).add(typ[0])

        node = module.classes[cls]
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                add(item.target.id, self.types_in(module, item.annotation))
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                decorators = {d.id for d in item.decorator_list if isinstance(d, ast.Name)}
                if "property" in decorators or "cached_property" in decorators:
                    add(item.name, self.types_in(module, item.returns))
        init = module.functions.get(f"{cls}.__init__")
        if init is not None:
            params = {a.arg: a.annotation for a in [*init.args.args, *init.args.kwonlyargs]}
            for sub in ast.walk(init):
                if isinstance(sub, ast.AnnAssign):
                    attr = _self_attr(sub.target)
                    if attr is not None:
                        add(attr, self.types_in(module, sub.annotation))
                elif isinstance(sub, ast.Assign) and len(sub.targets) == 1:
                    attr = _self_attr(sub.targets[0])
                    if attr is not None and isinstance(sub.value, ast.Name):
                        add(attr, self.types_in(module, params.get(sub.value.id)))
        return found


def _self_attr(node: ast.expr) -> str | None:
    """``x`` of ``self.x``, else None."""
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    ):
        return node.attr
    return None


class Resolver:
    """Resolves the calls of one function to functions of ours."""

    def __init__(self, index: Index, qual: str) -> None:
        self.index = index
        mod, _, name = qual.partition(":")
        self.module = index.modules[mod]
        self.node = self.module.functions[name]
        self.cls = f"{mod}:{name.split('.')[0]}" if "." in name else None
        self.locals: dict[str, Type] = {}
        args = self.node.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            typ = self.index.types_in(self.module, arg.annotation)
            if typ is not None:
                self.locals[arg.arg] = typ
        if self.cls is not None and args.args:
            self.locals[args.args[0].arg] = (self.cls, None)
        for sub in ast.walk(self.node):  # flow-insensitive: one pass over assignments
            if isinstance(sub, ast.Assign) and len(sub.targets) == 1:
                self._bind(sub.targets[0], sub.value)
            elif isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name):
                typ = self.index.types_in(self.module, sub.annotation)
                if typ is not None:
                    self.locals[sub.target.id] = typ
            elif isinstance(sub, ast.With | ast.AsyncWith):
                for item in sub.items:
                    if item.optional_vars is not None:
                        self._bind(item.optional_vars, item.context_expr)

    def _bind(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name) and target.id not in self.locals:
            typ = self.infer(value)
            if typ is not None:
                self.locals[target.id] = typ

    def infer(self, node: ast.expr) -> Type | None:
        """The type of ours an expression has, if it can be told."""
        if isinstance(node, ast.Await):
            return self.infer(node.value)
        if isinstance(node, ast.Name):
            return self.locals.get(node.id)
        if isinstance(node, ast.Attribute):
            owner = self.infer(node.value)
            if owner is not None and owner[0] == "generic":
                return (owner[1], None) if node.attr == "client" and owner[1] else None
            if owner is not None:
                for cls in self._mro(owner[0]):
                    held = self.index.attributes.get(cls, {}).get(node.attr)
                    if held and len(held) == 1:
                        return (next(iter(held)), None)
            held = self.index.by_attribute.get(node.attr, set())
            return (next(iter(held)), None) if len(held) == 1 else None
        if isinstance(node, ast.Call):
            func = node.func
            for target in self.resolve(func):
                if self.index.is_class(target):
                    return (target, None)
                mod, _, name = target.partition(":")
                called = self.index.modules[mod].functions.get(name)
                if called is not None:
                    return self.index.types_in(self.index.modules[mod], called.returns)
        return None

    def _mro(self, cls: str) -> Iterator[str]:
        """``cls`` and its bases of ours, nearest first."""
        seen: set[str] = set()
        todo = [cls]
        while todo:
            current = todo.pop(0)
            if current in seen or not self.index.is_class(current):
                continue
            seen.add(current)
            yield current
            mod, _, name = current.partition(":")
            module = self.index.modules[mod]
            for base in module.classes[name].bases:
                typ = self.index.types_in(module, base)
                if typ is not None and typ[0] != "generic":
                    todo.append(typ[0])

    def method(self, cls: str, name: str) -> str | None:
        """``cls``'s method ``name``, its own or a base's, as ``module:Class.name``."""
        for owner in self._mro(cls):
            mod, _, cname = owner.partition(":")
            if f"{cname}.{name}" in self.index.modules[mod].functions:
                return f"{owner}.{name}"
        return None

    def resolve(self, func: ast.expr) -> list[str]:
        """The functions (``module:Qualname``) or classes of ours a call's callee may be."""
        if isinstance(func, ast.Name):
            if func.id in self.locals:
                return []
            found = self.index.lookup(self.module, func.id)
            return [found] if found and ":" in found else []
        if isinstance(func, ast.Attribute):
            if isinstance(func.value, ast.Name) and func.value.id not in self.locals:
                base = self.index.lookup(self.module, func.value.id)
                if base in self.index.modules:
                    return [f"{base}:{func.attr}"]
            owner = self.infer(func.value)
            if owner is not None and owner[0] != "generic":
                found = self.method(owner[0], func.attr)
                if found is not None:
                    return [found]
            # Unknown receiver: the one class of ours with that method, at this layer or below
            # (a call up a layer goes through a port the code is handed, never by name).
            here = layer(self.module.name)
            candidates = [
                c
                for c in self.index.methods.get(func.attr, [])
                if layer(c.partition(":")[0]) >= here
            ]
            if len(candidates) == 1:
                return candidates
        return []

    def calls(self) -> list[str]:
        """The functions of ours this one calls, in source order, each once."""
        found: list[str] = []
        # The body only: decorators run when the module is imported, not at the call.
        nodes = [n for st in self.node.body for n in ast.walk(st) if isinstance(n, ast.Call)]
        nodes.sort(key=lambda n: (n.lineno, n.col_offset))
        for call in nodes:
            for target in self.resolve(call.func):
                if self.index.is_class(target):
                    target = f"{target}.__init__"
                mod, _, name = target.partition(":")
                known = mod in self.index.modules and name in self.index.modules[mod].functions
                itself = target == f"{self.module.name}:{self.node.name}"
                if known and not itself and target not in found:
                    found.append(target)
        return found


@dataclass
class Trace:
    """What a walk found: the modules entered, the steps, the returns up, the chain."""

    files: list[str] = field(default_factory=list)
    steps: list[tuple[str, str]] = field(default_factory=list)
    returns_up: int = 0
    reached: list[str] = field(default_factory=list)
    """The chain of calls from the entry to the target, if reached."""


def module_of(qual: str) -> str:
    """The module of ``module:Qualname``."""
    return qual.partition(":")[0]


def call_graph(index: Index, entry: str) -> dict[str, list[str]]:
    """Every function of ours reachable from ``entry`` -> the ones it calls (ground aside)."""
    graph: dict[str, list[str]] = {}
    todo = [entry]
    while todo:
        qual = todo.pop()
        if qual in graph:
            continue
        graph[qual] = [c for c in Resolver(index, qual).calls() if layer(module_of(c)) != GROUND]
        todo.extend(graph[qual])
    return graph


def on_route(graph: dict[str, list[str]], target: str) -> set[str]:
    """The functions of ``graph`` from which ``target`` can be reached (itself included)."""
    route = {target}
    changed = True
    while changed:
        changed = False
        for qual, callees in graph.items():
            if qual not in route and route.intersection(callees):
                route.add(qual)
                changed = True
    return route


def trace(index: Index, entry: str, target: str, *, whole: bool = False) -> Trace:
    """Walk from ``entry`` depth first, in source order, until ``target`` is called.

    The route (the default) enters only the functions from which ``target`` can be reached;
    every other call they make before it is one step into its file, and, from a higher layer,
    one return. ``whole`` enters every function called instead (each once).
    """
    graph = call_graph(index, entry)
    route = set(graph) if whole else on_route(graph, target)
    result = Trace()
    entered: set[str] = set()

    def enter(qual: str) -> None:
        entered.add(qual)
        if module_of(qual) not in result.files:
            result.files.append(module_of(qual))

    def walk(qual: str, chain: list[str]) -> bool:
        enter(qual)
        if qual == target:
            result.reached = chain
            return True
        for callee in graph.get(qual, []):
            if callee in entered:
                continue
            result.steps.append((qual, callee))
            if callee in route:
                if walk(callee, [*chain, callee]):
                    return True
            else:
                enter(callee)
            if layer(module_of(callee)) > layer(module_of(qual)):
                result.returns_up += 1
        return False

    walk(entry, [entry])
    return result


def main(argv: list[str] | None = None) -> int:
    """Print the figures; exit 1 when the target is not reached."""
    parser = argparse.ArgumentParser(prog="python -m tools.trace", description=__doc__)
    parser.add_argument("--entry", default=DEFAULT_ENTRY, help="module:Qualname to start at")
    parser.add_argument("--target", default=DEFAULT_TARGET, help="module:Qualname to reach")
    parser.add_argument("--steps", action="store_true", help="print every step")
    parser.add_argument(
        "--whole", action="store_true", help="enter every function called, not the route only"
    )
    args = parser.parse_args(argv)
    index = Index()
    for qual in (args.entry, args.target):
        mod, _, name = qual.partition(":")
        if mod not in index.modules or name not in index.modules[mod].functions:
            parser.error(f"no function {qual}")
    result = trace(index, args.entry, args.target, whole=args.whole)
    if args.steps:
        for caller, callee in result.steps:
            print(f"  L{layer(caller.partition(':')[0])} {caller} -> {callee}")
    print(f"entry:  {args.entry}")
    print(f"target: {args.target} ({'reached' if result.reached else 'NOT reached'})")
    print(f"files entered:              {len(result.files)}")
    print(f"steps (functions entered):  {len(result.steps)}")
    print(f"returns to a higher layer:  {result.returns_up}")
    if result.reached:
        print("the chain that reaches the target:")
        for qual in result.reached:
            print(f"  L{layer(qual.partition(':')[0])} {qual}")
    return 0 if result.reached else 1


if __name__ == "__main__":
    sys.exit(main())
