"""Where a handin's mytorch defines each name, read from its sources as Python would bind it at
import time, never run: the resolver the static inspection
(``autograder/judging/intake/static_inspection.py``) traces each graded and bonus class with.
Standard library only."""
from __future__ import annotations

import ast
import bisect
import collections
import heapq
import operator
from dataclasses import dataclass
from typing import NamedTuple

from autograder.judging.intake.handin_guard import guarded


def parse_module(text: str) -> ast.Module | None:
    """The module's syntax tree, or None on a SyntaxError or a null byte: an ordinary mistake that
    fails the grader's import too (scored there), no finding. Whatever else ``ast.parse`` raises
    (RecursionError or MemoryError on nesting no honest code has) goes to the caller's guard."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


@dataclass(frozen=True)
class Definition:
    """A module-level statement that binds a name: a class, a function or an assignment."""

    path: str
    node: ast.stmt

    @property
    def key(self) -> tuple[str, int, int]:
        return self.path, self.node.lineno, self.node.col_offset


MAX_IMPORT_DEPTH = 50  # imports and aliases followed from one name
MAX_STEPS = 20_000  # name look-ups in one handin (each reads one module's statements at most)
MAX_DEFINITIONS = 500  # definitions a part's document holds


class Binding(NamedTuple):
    """A statement of a module that binds a name: its index, the import alias that binds it (None
    for a class, a function or an assignment), and whether it is an assignment of the bare name
    (``A = ...``, not ``A, B = ...``: the one whose value is followed)."""

    index: int
    alias: ast.alias | None = None
    bare: bool = False


INDEX = operator.attrgetter("index")


class Module(NamedTuple):
    """A parsed module: its statements run at import, and where each name is bound, in order."""

    statements: list[ast.stmt]
    bindings: dict[str, list[Binding]]  # name -> its bindings, by index
    stars: list[Binding]  # ``from x import *``, by index


def indexed(tree: ast.Module) -> Module:
    """The Module of ``tree``: each name's bindings found once, so that a look-up costs the
    bindings it passes, never a scan of the module."""
    statements = list(top_level(tree.body))
    bindings: dict[str, list[Binding]] = {}
    stars = []
    for index, node in enumerate(statements):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            bindings.setdefault(node.name, []).append(Binding(index))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bare = {target.id for target in targets if isinstance(target, ast.Name)}
            for name in dict.fromkeys(child.id for target in targets for child in ast.walk(target)
                                      if isinstance(child, ast.Name)):
                bindings.setdefault(name, []).append(Binding(index, None, name in bare))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    stars.append(Binding(index, alias))
                else:
                    bound = alias.asname or (alias.name if isinstance(node, ast.ImportFrom)
                                             else alias.name.partition(".")[0])
                    bindings.setdefault(bound, []).append(Binding(index, alias))
    return Module(statements, bindings, stars)


class Resolver:
    """Where each name of a handin's mytorch is defined, read from its sources as Python would bind
    it at import time (never run): ``from .x import *``, ``from .x import A as B``, ``import a.b as
    m`` then ``m.A``, ``A = B``; the last binding of a module wins. What is built by calls
    (``A = type(...)``, ``globals()[...]``) is its assignment, not followed further. The work is
    bounded: MAX_STEPS look-ups in all, MAX_IMPORT_DEPTH deep."""

    def __init__(self, sources: dict[str, str]):
        self.sources = sources
        self.findings: list[str] = []
        self.steps = 0
        self._modules: dict[str, Module | None] = {}
        self._resolved: dict[tuple[str, str], Definition | None] = {}

    def module_path(self, module: str) -> str | None:
        """The handed-in file of ``module`` (a package's __init__.py first, as Python looks)."""
        base = module.replace(".", "/")
        return next((path for path in (f"{base}/__init__.py", f"{base}.py")
                     if path in self.sources), None)

    def module(self, path: str) -> Module | None:
        """The parsed module of ``path``, those statements under if, try and with included; None
        when it does not parse (a guarded failure is a finding)."""
        if path not in self._modules:
            tree, finding = guarded(path, parse_module, self.sources[path])
            if finding:
                self.findings.append(finding)
            self._modules[path] = None if tree is None else indexed(tree)
        return self._modules[path]

    def resolve(self, module: str, name: str, before: int | None = None,
                depth: int = 0) -> Definition | None:
        """The definition ``module.name`` is bound to, by the statements before ``before`` (all of
        them when None); None when it is not in the handin (numpy's, a module, not found)."""
        self.steps += 1
        if before is None and (module, name) in self._resolved:
            return self._resolved[module, name]
        if depth > MAX_IMPORT_DEPTH or self.steps > MAX_STEPS:
            return None
        path = self.module_path(module)
        parsed = self.module(path) if path else None
        found = None
        if parsed is not None:
            for binding in last_first(parsed.bindings.get(name, []), parsed.stars, before):
                bound, found = self.bound_to(module, path, parsed, binding, name, depth)
                if bound or self.steps > MAX_STEPS:
                    break
        if before is None:
            self._resolved[module, name] = found
        return found

    def bound_to(self, module: str, path: str, parsed: Module, binding: Binding, name: str,
                 depth: int) -> tuple[bool, Definition | None]:
        """(whether ``binding`` binds ``name``: a star import may not, what it binds it to)."""
        node = parsed.statements[binding.index]
        if isinstance(node, ast.ImportFrom):
            source = absolute_module(module, path, node.level, node.module)
            if binding.alias.name != "*":
                return True, self.resolve(source, binding.alias.name, depth=depth + 1)
            found = None if name.startswith("_") else self.resolve(source, name, depth=depth + 1)
            return found is not None, found
        if isinstance(node, ast.Import):
            return True, None
        if binding.bare and node.value:
            dotted = dotted_name(node.value)
            if dotted and "." not in dotted:
                return True, self.resolve(module, dotted, binding.index, depth + 1)
            if dotted:
                base, _, attribute = dotted.rpartition(".")
                source = self.module_of(module, path, parsed, binding.index, base)
                return True, source and self.resolve(source, attribute, depth=depth + 1)
        return True, Definition(path, node)

    def module_of(self, module: str, path: str, parsed: Module, before: int,
                  dotted: str) -> str | None:
        """The module of the handin the dotted name ``dotted`` (``m``, ``m.sub``) of ``module``
        names by its last binding before statement ``before`` (an import), else None."""
        head, _, rest = dotted.partition(".")
        self.steps += 1
        binding = next(last_first(parsed.bindings.get(head, []), [], before), None)
        if binding is None or binding.alias is None:
            return None
        node = parsed.statements[binding.index]
        if isinstance(node, ast.ImportFrom):
            found = f"{absolute_module(module, path, node.level, node.module)}.{binding.alias.name}"
        else:
            found = binding.alias.name if binding.alias.asname else head
        full = f"{found}.{rest}" if rest else found
        return full if self.module_path(full) else None

    def closure(self, roots: list[Definition], stop: set[tuple[str, int, int]]
                ) -> list[Definition]:
        """``roots`` and, breadth first, every definition of the handin they use by name (a base
        class, a helper, a given check), once each, none of ``stop``; at most MAX_DEFINITIONS."""
        found: dict[tuple[str, int, int], Definition] = {}
        queue = collections.deque(roots)
        while queue and len(found) < MAX_DEFINITIONS:
            definition = queue.popleft()
            if definition.key in found:
                continue
            found[definition.key] = definition
            module = module_name(definition.path)
            for name in dict.fromkeys(node.id for node in ast.walk(definition.node)
                                      if isinstance(node, ast.Name)
                                      and isinstance(node.ctx, ast.Load)):
                used = self.resolve(module, name)
                if used and used.key not in stop and used.key not in found:
                    queue.append(used)
        return list(found.values())


def last_first(own: list[Binding], stars: list[Binding], before: int | None):
    """The bindings of ``own`` and ``stars`` (each by index) before statement ``before`` (all when
    None), the last first."""
    end = len(own) if before is None else bisect.bisect_left(own, before, key=INDEX)
    star_end = len(stars) if before is None else bisect.bisect_left(stars, before, key=INDEX)
    return heapq.merge(map(own.__getitem__, reversed(range(end))),
                       map(stars.__getitem__, reversed(range(star_end))), key=INDEX, reverse=True)


def top_level(body: list[ast.stmt]):
    """The statements of ``body`` Python runs when it imports the module, those under if, try and
    with included (any branch may bind), in source order."""
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.TryStar, ast.With)):
            for block in ("body", "orelse", "finalbody"):
                yield from top_level(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                yield from top_level(handler.body)


def dotted_name(node: ast.expr) -> str | None:
    """``a.b.c`` for a name or a chain of attributes of a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def absolute_module(module: str, path: str, level: int, target: str | None) -> str:
    """The module ``from <level dots><target> import ...`` names when written in ``module``."""
    if not level:
        return target or ""
    package = module if path.endswith("/__init__.py") else module.rpartition(".")[0]
    for _ in range(level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{target}" if target else package


def module_name(path: str) -> str:
    """``mytorch.nn.linear`` of ``mytorch/nn/linear.py``, ``mytorch.nn`` of its __init__.py."""
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")



def resolve_qualified(resolver: Resolver, qualified: str) -> Definition | None:
    """What ``qualified`` (``mytorch.nn.Linear``) is bound to in the handin, as Resolver.resolve."""
    module, _, name = qualified.rpartition(".")
    return resolver.resolve(module, name)
