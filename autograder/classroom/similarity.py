"""Code similarity across a class: every pair of students' handed-in ``mytorch/``, compared with
copydetect (token fingerprints with winnowing, as MOSS does; names, strings and comments are
normalised away), the handout's own code given as boilerplate so the skeleton never counts.

    python -m autograder.classroom.similarity HANDINS [--handout dist/handout] [--out similarity]
                                    [--part graded|bonus] [--past FOLDER] [--top 25]
    make similarity HANDINS=folder [ARGS='--part bonus --past past-handins']

``HANDINS`` is a bulk download in either layout ``autograder.classroom.regrade`` reads, read as it reads
them (the handin each student's row is graded from; a symlinked archive is read through its
link). Each student's code of one part becomes one document: ``graded`` (the default) the classes
the hidden tests grade, ``bonus`` the bonus track's (compared on its own: the bonus's given code,
the same for everyone, would make every pair look alike). A class is taken where the handin's
package defines it, traced statically as Python binds ``mytorch.nn.<class>`` at import (``from
.impl import *``, ``from .x import A as B``, re-exports in ``__init__``, ``A = B``; never run), with
every definition of the handin it uses, so a copy moved into modules of other names, its methods
reordered and its names changed, is compared as the code it is. Files are extracted by the
grader's own ``safe_tar`` (never run) and decoded as Python decodes them (a PEP 263 coding
declaration is honoured). ``--past`` names a folder of past semesters' handins (in either layout):
each current student is compared with them too (past pairs among themselves are not).

Each handin is read under its own guard (``autograder/classroom/handin_guard.py``): a file or handin that
cannot be read, decoded or parsed (a codec that raises, nesting deep enough to end ``ast.parse``, a
file over ``MAX_PY_FILE_BYTES``) is a finding of that student, and the run goes on.

``OUT`` receives ``pairs.csv`` (every pair, most similar first: the share of each student's own
code, the code outside the handout, found in the other's, the overlapping tokens, and ``flagged``
at or above ``--threshold``), ``runtime_code.csv`` (each student whose mytorch builds code at run
time, and how: ``exec``, ``eval``, ``compile``, ``marshal``, ``zlib`` or ``base64`` decoding, an
importlib loader, an encoded blob: such code hides from a comparison of the source),
``findings.csv`` (each student's findings: what could not be inspected, and each graded file that
defines no graded class of its own, naming where its classes are) and ``report.html`` (small: the
``--top`` flagged pairs, labelled by student, each file by its path in the handin, only the
matching regions and a few lines around them; then the findings). Similarity is a reason to read
two handins, never a verdict.
"""
from __future__ import annotations

import argparse
import ast
import bisect
import collections
import functools
import html
import io
import operator
import re
import tempfile
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from autograder.judging import file_trees, rubric
from autograder.classroom import spreadsheet
from autograder.classroom.handin_guard import guarded, read_bounded
from autograder.classroom.handins import find_handins
from autograder.judging.safe_tar import HandinError, extract_handin
from hw4lib.handin_format import MAX_PY_FILE_BYTES, is_mytorch_source

THRESHOLD = 0.5  # the share of a student's own code found in another's that flags the pair
NOISE_TOKENS = 25  # copydetect's k: matches shorter than this (in normalised characters) are noise
TOP_PAIRS = 25  # flagged pairs shown in report.html
CONTEXT_LINES = 3  # lines shown around each matching region in report.html
PARTS = ("graded", "bonus")
PAST = "past:"  # the name prefix of a past semester's student
COLUMNS = ["student_a", "student_b", "similarity", "share_of_a", "share_of_b", "tokens", "flagged"]


@functools.cache
def part_targets(part: str) -> dict[str, str]:
    """{qualified name: the path of the reference module that defines it} of ``part``: ``graded``,
    ``mytorch.nn.<class>`` of each class rubric.MYTORCH_RUBRIC grades (as the grader imports it);
    ``bonus``, every other name ``mytorch.nn`` and ``mytorch.optim`` export (cached: read only)."""
    import mytorch.nn
    import mytorch.optim

    if part == "graded":
        names = [(mytorch.nn, name) for name in rubric.MYTORCH_RUBRIC]
    else:
        names = [(package, name) for package in (mytorch.nn, mytorch.optim)
                 for name in package.__all__
                 if not (package is mytorch.nn and name in rubric.MYTORCH_RUBRIC)]
    return {f"{package.__name__}.{name}":
            getattr(package, name).__module__.replace(".", "/") + ".py" for package, name in names}


def python_text(data: bytes) -> str:
    """Source bytes decoded as Python decodes them: a BOM or a PEP 263 coding declaration, else
    UTF-8 (undecodable bytes replaced). A codec that fails even so (``idna``) raises."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding, errors="replace")
    except (SyntaxError, LookupError):
        return data.decode("utf-8", errors="replace")


def mytorch_sources(files: dict[str, Path]) -> tuple[dict[str, str], list[str]]:
    """({path: decoded text} of the handed-in mytorch .py files of an extraction's ``files``, the
    findings of those that could not be read: over MAX_PY_FILE_BYTES, or not decodable)."""
    sources, findings = {}, []
    for name in sorted(files):
        if is_mytorch_source(name):
            text, finding = guarded(name, lambda path: python_text(
                read_bounded(path, MAX_PY_FILE_BYTES)), files[name])
            if finding:
                findings.append(finding)
            else:
                sources[name] = text
    return sources, findings


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
    for a class, a function or an assignment), and whether an assignment binds the bare name
    (``A = ...``, not ``A, B = ...``)."""

    index: int
    alias: ast.alias | None
    bare: bool


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
            bindings.setdefault(node.name, []).append(Binding(index, None, True))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bare = {target.id for target in targets if isinstance(target, ast.Name)}
            for name in dict.fromkeys(child.id for target in targets for child in ast.walk(target)
                                      if isinstance(child, ast.Name)):
                bindings.setdefault(name, []).append(Binding(index, None, name in bare))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    stars.append(Binding(index, alias, False))
                else:
                    bound = alias.asname or (alias.name if isinstance(node, ast.ImportFrom)
                                             else alias.name.partition(".")[0])
                    bindings.setdefault(bound, []).append(Binding(index, alias, False))
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
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and binding.bare and node.value:
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
    star_end = (len(stars) if before is None
                else bisect.bisect_left(stars, before, key=INDEX))
    i, j = end - 1, star_end - 1
    while i >= 0 or j >= 0:
        if j < 0 or (i >= 0 and own[i].index > stars[j].index):
            yield own[i]
            i -= 1
        else:
            yield stars[j]
            j -= 1


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


def source_of(text: str, node: ast.stmt) -> str:
    """The lines of ``node`` (its decorators included) in ``text``."""
    first = min([node.lineno, *(item.lineno for item in getattr(node, "decorator_list", []))])
    return "".join(text.splitlines(keepends=True)[first - 1:node.end_lineno])


@dataclass
class Inspection:
    """What the class tools read in one handin's mytorch: the document of one part (the code of
    its classes wherever they live, each under its file's path), where it builds code at run time,
    and its findings (files that could not be inspected, graded files that define no graded class
    of their own)."""

    document: str = ""
    runtime: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)


def inspect_mytorch(files: dict[str, Path], part: str = "graded") -> Inspection:
    """The Inspection of the mytorch .py files among an extraction's ``files`` (never run)."""
    sources, findings = mytorch_sources(files)
    runtime = []
    for path in sorted(sources):  # one file at a time: one that cannot be parsed is its finding
        found, finding = guarded(path, runtime_code, {path: sources[path]})
        runtime += found or []
        findings += [finding] if finding else []
    resolver = Resolver(sources)
    document = part_document(resolver, part)
    findings += resolver.findings + moved_classes(resolver)
    if resolver.steps > MAX_STEPS:
        findings.append(f"its mytorch's imports could not be traced within {MAX_STEPS} look-ups")
    return Inspection(document, runtime, list(dict.fromkeys(findings)))


def part_document(resolver: Resolver, part: str) -> str:
    """The code of ``part`` in a handin, as one text: each of its classes where the package's
    imports say it is defined, and every definition of the handin it uses, each under its file's
    path (the other part's classes left out); a class that cannot be traced is its reference file,
    when handed in (the file the grader would fail to import)."""
    other = part_targets("bonus" if part == "graded" else "graded")
    stop = {found.key for name in other if (found := resolve_qualified(resolver, name))}
    roots, files = [], []
    for name, reference in part_targets(part).items():
        found = resolve_qualified(resolver, name)
        if found:
            roots.append(found)
        elif reference in resolver.sources:
            files.append(reference)
    texts = [(found.path, source_of(resolver.sources[found.path], found.node))
             for found in resolver.closure(roots, stop)]
    texts += [(path, resolver.sources[path]) for path in dict.fromkeys(files)]
    return "".join(f"# file: {path}\n{text}\n" for path, text in texts)


def resolve_qualified(resolver: Resolver, qualified: str) -> Definition | None:
    module, _, name = qualified.rpartition(".")
    return resolver.resolve(module, name)


def moved_classes(resolver: Resolver) -> list[str]:
    """A finding for each graded file (where the reference defines graded classes) whose graded
    classes all come from elsewhere, or cannot be traced, while the file is handed in and parses
    (one that does not parse fails the grader's import on its own)."""
    by_file: dict[str, list[str]] = {}
    for qualified, reference in part_targets("graded").items():
        by_file.setdefault(reference, []).append(qualified)
    findings = []
    for reference, names in by_file.items():
        if reference not in resolver.sources or resolver.module(reference) is None:
            continue
        found = {name.rpartition(".")[2]: resolve_qualified(resolver, name) for name in names}
        if any(definition and definition.path == reference for definition in found.values()):
            continue
        where = ", ".join(f"{name} is defined in {definition.path}" if definition
                          else f"{name} cannot be traced" for name, definition in found.items())
        findings.append(f"{reference} defines no graded class of its own ({where})")
    return findings


RUNTIME_CALLS = {"exec", "eval", "compile", "__import__", "__builtins__"}
# Modules (None: any use) or their attributes that make or run code other than mytorch's files,
# the families of the worker's audit hook (autograder/sandboxed/refusals.py,
# refuse_code_made_at_run_time):
# text and trees compiled, code objects and functions built by hand, marshal and pickle, import
# machinery, native libraries and raw memory (ctypes), programs, the garbage collector's lists.
RUNTIME_MODULES = {"marshal": None, "zlib": {"decompress"}, "base64": None, "codecs": {"decode"},
                   "importlib": {"util", "machinery", "abc", "spec_from_loader",
                                 "module_from_spec"},
                   "types": {"CodeType", "FunctionType", "LambdaType"}, "builtins": None,
                   "lzma": {"decompress"}, "bz2": {"decompress"}, "pickle": {"loads", "load"},
                   "copyreg": None, "ctypes": None, "_ctypes": None, "runpy": None,
                   "zipimport": None, "_imp": None, "subprocess": None, "_posixsubprocess": None,
                   "pty": {"spawn"}, "gc": {"get_objects", "get_referrers", "get_referents"},
                   "sys": {"_getframe", "meta_path", "path_hooks", "modules", "settrace",
                           "setprofile"},
                   "os": {"system", "popen", "posix_spawn", "posix_spawnp", "execl", "execle",
                          "execlp", "execlpe", "execv", "execve", "execvp", "execvpe", "spawnl",
                          "spawnle", "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp",
                          "spawnvpe"}}
# Attributes that reach the interpreter's own objects: code objects, frames, globals, every class.
INTERPRETER_ATTRIBUTES = {"__code__", "gi_code", "cr_code", "f_code", "f_globals", "f_locals",
                          "f_back", "__globals__", "__subclasses__", "__builtins__"}
BLOB = re.compile(r"[A-Za-z0-9+/=_-]{200,}|(?:\\x[0-9a-fA-F]{2}){50,}")


def runtime_code(sources: dict[str, str]) -> list[str]:
    """Where a mytorch builds or runs code other than its files, as '<what> (<path>:<line>)':
    calls of exec, eval, compile or __import__, the modules and attributes of RUNTIME_MODULES,
    the interpreter's own objects (INTERPRETER_ATTRIBUTES, by attribute or by a ``getattr`` of
    the name), writes to another module's attributes (``writes ast.PyCF_ONLY_AST``, also through
    ``setattr``/``delattr``: such a module's functions then do what the student wrote), and
    string literals that look encoded (a long base64 or escaped-byte run). A mytorch's own
    modules (relative imports, ``mytorch.*``) are not another module."""
    found = []
    for path, text in sorted(sources.items()):
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        aliases: dict[str, str] = {}  # local name -> "module" or "module.attribute"
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] != "mytorch":
                        aliases[alias.asname or alias.name.split(".")[0]] = alias.name.split(".")[0]
            elif (isinstance(node, ast.ImportFrom) and node.module and not node.level
                  and node.module.split(".")[0] != "mytorch"):
                for alias in node.names:
                    aliases[alias.asname or alias.name] = f"{node.module.split('.')[0]}.{alias.name}"
        qualified = {id(node.value) for node in ast.walk(tree)  # read as module.attribute below
                     if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                     and node.value.id in aliases}
        parameters = parameter_reads(tree)
        for node in ast.walk(tree):
            what = None
            if (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
                    and id(node) not in qualified and id(node) not in parameters):
                target = aliases.get(node.id, node.id if node.id in RUNTIME_CALLS else "")
                what = runtime_name(target)
            elif isinstance(node, ast.Attribute):
                what = attribute_use(node, aliases)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
                what = attribute_call(node, aliases)
            elif (isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes))
                  and BLOB.search(node.value if isinstance(node.value, str)
                                  else node.value.decode("latin-1"))):
                what = "an encoded blob"
            if what:
                found.append(f"{what} ({path}:{node.lineno})")
    return sorted(set(found), key=found.index)


def parameter_reads(tree: ast.Module) -> set[int]:
    """The ids of the names in a function's body that read its own parameter named like one of
    RUNTIME_CALLS (``def forward(self, x, eval=False)``): the caller's value, not the builtin
    (a caller or a default that passes the builtin reads it by name, and is flagged there). None
    in a module that declares such a name ``global`` or ``nonlocal``."""
    if any(isinstance(node, (ast.Global, ast.Nonlocal)) and RUNTIME_CALLS & set(node.names)
           for node in ast.walk(tree)):
        return set()
    reads = set()
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            arguments = function.args
            names = RUNTIME_CALLS & {argument.arg for argument in (
                *arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                arguments.vararg, arguments.kwarg) if argument}
            body = function.body if isinstance(function.body, list) else [function.body]
            reads |= {id(node) for statement in body for node in ast.walk(statement)
                      if isinstance(node, ast.Name) and node.id in names}
    return reads


def attribute_use(node: ast.Attribute, aliases: dict[str, str]) -> str | None:
    """What the attribute ``node`` reaches: a write to an imported module, one of
    INTERPRETER_ATTRIBUTES, or a module attribute of RUNTIME_MODULES; else None."""
    written = module_write(node, aliases) if not isinstance(node.ctx, ast.Load) else None
    if written:
        return written
    if node.attr in INTERPRETER_ATTRIBUTES:
        return node.attr
    if isinstance(node.value, ast.Name) and node.value.id in aliases:
        return runtime_name(f"{aliases[node.value.id]}.{node.attr}")
    return None


def module_write(node: ast.Attribute, aliases: dict[str, str]) -> str | None:
    """'writes <module>.<attribute...>' when ``node`` (stored or deleted) is an attribute of an
    imported module, however deep; else None."""
    names = [node.attr]
    value = node.value
    while isinstance(value, ast.Attribute):
        names.append(value.attr)
        value = value.value
    if not isinstance(value, ast.Name) or value.id not in aliases:
        return None
    return "writes " + ".".join([aliases[value.id], *reversed(names)])


def attribute_call(node: ast.Call, aliases: dict[str, str]) -> str | None:
    """What a ``setattr``/``delattr`` on an imported module, or a ``getattr`` of one of
    INTERPRETER_ATTRIBUTES by its literal name, reaches; else None."""
    first, name = node.args[0], node.args[1] if len(node.args) > 1 else None
    literal = name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else "?"
    if (node.func.id in ("setattr", "delattr") and isinstance(first, ast.Name)
            and first.id in aliases):
        return f"writes {aliases[first.id]}.{literal}"
    if node.func.id == "getattr" and literal in INTERPRETER_ATTRIBUTES:
        return literal
    return None


def runtime_name(target: str) -> str | None:
    """``target`` (a builtin, "module" or "module.attribute") when it builds code, else None."""
    if target in RUNTIME_CALLS:
        return target
    module, _, attribute = target.partition(".")
    if module not in RUNTIME_MODULES:
        return None
    names = RUNTIME_MODULES[module]
    if names is None or (attribute and attribute in names):
        return target
    return None


def handout_document(handout: Path, part: str = "graded") -> str:
    """The handout's code of ``part`` (the skeleton students start from), as one text, read as a
    handin's is."""
    package = handout / "mytorch"
    if not package.is_dir():
        raise SystemExit(f"{package} not found: run `make handout` (or give --handout the folder "
                         f"holding the students' mytorch/)")
    return inspect_mytorch({path.relative_to(handout).as_posix(): path
                            for path in package.rglob("*.py")}, part).document


def compare(documents: dict[str, str], boilerplate: str, out: Path,
            threshold: float = THRESHOLD, past: dict[str, str] | None = None,
            top: int = TOP_PAIRS, findings: dict[str, list[str]] | None = None) -> list[dict]:
    """Every pair of ``documents`` ({student: text}), and each student with each of ``past``
    (past semesters' documents, named ``past:<student>``), most similar first; writes pairs.csv
    and report.html (the ``top`` flagged pairs, then ``findings``: {student: what the inspection
    of their handin found}) in ``out``."""
    from copydetect import CopyDetector

    out.mkdir(parents=True, exist_ok=True)
    named = {**documents, **{f"{PAST}{student}": text for student, text in (past or {}).items()}}
    work = Path(tempfile.mkdtemp(prefix="hw4p1-similarity-"))
    try:
        (work / "students").mkdir()
        (work / "boilerplate").mkdir()
        files = {}
        for index, (student, text) in enumerate(sorted(named.items())):
            files[f"{index}.py"] = student
            (work / "students" / f"{index}.py").write_text(text, encoding="utf-8")
        (work / "boilerplate" / "handout.py").write_text(boilerplate, encoding="utf-8")
        detector = CopyDetector(test_dirs=[str(work / "students")],
                                ref_dirs=[str(work / "students")],
                                boilerplate_dirs=[str(work / "boilerplate")], extensions=["py"],
                                noise_t=NOISE_TOKENS, guarantee_t=NOISE_TOKENS,
                                display_t=threshold, silent=True, autoopen=False)
        detector.run()
        students = [files[Path(name).name] for name in detector.test_files]
        rows, regions = [], {}
        for i, a in enumerate(students):
            for j, b in enumerate(students):
                if (a < b and detector.similarity_matrix[i, j, 0] >= 0
                        and not (a.startswith(PAST) and b.startswith(PAST))):
                    share_a, share_b = (float(x) for x in detector.similarity_matrix[i, j])
                    rows.append({"student_a": a, "student_b": b,
                                 "similarity": round(max(share_a, share_b), 4),
                                 "share_of_a": round(share_a, 4), "share_of_b": round(share_b, 4),
                                 "tokens": int(detector.token_overlap_matrix[i, j]),
                                 "flagged": max(share_a, share_b) >= threshold})
                    regions[a, b] = (detector.test_files[i], detector.test_files[j])
        rows.sort(key=lambda row: -row["similarity"])
        shown = [row for row in rows if row["flagged"]][:top]
        write_report(out / "report.html", shown, len(rows), threshold,
                     [matching_regions(detector, *regions[row["student_a"], row["student_b"]])
                      for row in shown], findings or {})
    finally:
        file_trees.remove_tree(work)
    spreadsheet.write_csv(out / "pairs.csv", COLUMNS, rows)
    return rows


def matching_regions(detector, file_a: str, file_b: str) -> tuple[str, str]:
    """Both documents of a pair as HTML: the matching regions highlighted, a few lines of context
    around them and the ``# file:`` line each region is under, the rest left out."""
    from copydetect.utils import highlight_overlap

    if (file_a, file_b) in detector.slice_matrix:
        slices_a, slices_b = detector.slice_matrix[file_a, file_b]
    else:
        slices_b, slices_a = detector.slice_matrix[file_b, file_a]
    return tuple(around_marks(highlight_overlap(detector.file_data[name].raw_code, slices,
                                                "<mark>", "</mark>", escape_html=True)[0])
                 for name, slices in ((file_a, slices_a), (file_b, slices_b)))


def around_marks(marked: str) -> str:
    """The lines of ``marked`` (HTML, regions in <mark>) within CONTEXT_LINES of a highlighted
    line, "..." where lines are left out, each run of lines under the ``# file:`` line it is in."""
    lines = marked.split("\n")
    highlighted, inside = [], False
    for line in lines:
        highlighted.append(inside or "<mark>" in line)
        inside = line.rfind("<mark>") > line.rfind("</mark>") or (inside and "</mark>" not in line)
    near = [any(highlighted[max(0, index - CONTEXT_LINES):index + CONTEXT_LINES + 1])
            for index in range(len(lines))]
    kept, header, shown = [], None, None
    for index, line in enumerate(lines):
        if re.sub("</?mark>", "", line).startswith("# file: "):
            header = index
        if not near[index]:
            continue
        if kept and not near[index - 1]:
            kept.append("...")
            shown = None
        if header is not None and header not in (shown, index):
            kept.append(lines[header])
        shown = header
        kept.append(line)
    return "\n".join(kept)


def write_report(path: Path, rows: list[dict], pairs: int, threshold: float,
                 regions: list[tuple[str, str]], findings: dict[str, list[str]]) -> None:
    """report.html: each of ``rows`` (the pairs shown) with its students, scores and matching
    regions (``# file:`` lines give each region's path in the handin), then each student's
    ``findings``."""
    parts = [f"<!doctype html><meta charset='utf-8'><title>mytorch similarity</title>"
             f"<style>pre{{background:#f6f6f6;padding:6px;overflow-x:auto;font-size:12px}}"
             f"mark{{background:#ffd27a}}td{{vertical-align:top;width:50%}}</style>"
             f"<h1>mytorch similarity</h1><p>{len(rows)} of {pairs} pairs shown: the most "
             f"similar at or above {threshold} (every pair is in pairs.csv). A share is the part "
             f"of a student's own code (outside the handout) found in the other's: a reason to "
             f"read both handins, never a verdict.</p>"]
    if not rows:
        parts.append(f"<p>No pair at or above the threshold {threshold}.</p>")
    for row, (code_a, code_b) in zip(rows, regions):
        a, b = html.escape(row["student_a"]), html.escape(row["student_b"])
        parts.append(f"<h2>{a} &amp; {b}: {row['similarity']:.2f}</h2><p>{a}: "
                     f"{row['share_of_a']:.2f} of their code in {b}'s; {b}: "
                     f"{row['share_of_b']:.2f} in {a}'s; {row['tokens']} tokens in common.</p>"
                     f"<table><tr><th>{a}</th><th>{b}</th></tr><tr><td><pre>{code_a}</pre></td>"
                     f"<td><pre>{code_b}</pre></td></tr></table>")
    if findings:
        parts.append("<h2>Findings</h2><p>Handins (or files of them) that could not be inspected, "
                     "and graded files that define no graded class of their own (their classes, "
                     "wherever they live, are what was compared).</p><ul>")
        parts += [f"<li>{html.escape(student)}: {html.escape(finding)}</li>"
                  for student, found in sorted(findings.items()) for finding in found]
        parts.append("</ul>")
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")


class ClassInspection(NamedTuple):
    """A bulk download read for a comparison: {student: their document of the part}, {student:
    where their mytorch builds code at run time}, {student: their findings}."""

    documents: dict[str, str]
    runtime: dict[str, list[str]]
    findings: dict[str, list[str]]


def class_documents(handins_dir: Path, part: str = "graded") -> ClassInspection:
    """The ClassInspection of a bulk download, each student's handin as the regrade picks it, each
    under its own guard: a handin that cannot be inspected is its finding and left out, as are
    those that cannot be read as archives or hold no code of ``part`` (both named)."""
    documents, runtime, findings = {}, {}, {}
    work = Path(tempfile.mkdtemp(prefix="hw4p1-similarity-extract-"))
    try:
        for index, (student, handin) in enumerate(sorted(find_handins(handins_dir).items())):
            inspection, finding = guarded("its handin", inspect_archive, handin.path,
                                          work / str(index), part)
            if finding:
                findings[student] = [finding]
                print(f"left out {student}: {finding}")
                continue
            if isinstance(inspection, str):
                print(f"left out {student}: {inspection}")
                continue
            if inspection.runtime:
                runtime[student] = inspection.runtime
            if inspection.findings:
                findings[student] = inspection.findings
            if inspection.document:
                documents[student] = inspection.document
            else:
                print(f"left out {student}: no {part} mytorch code")
    finally:
        file_trees.remove_tree(work)
    return ClassInspection(documents, runtime, findings)


def inspect_archive(archive: Path, work: Path, part: str) -> Inspection | str:
    """The Inspection of a handin archive, extracted into ``work`` by the grader's own checks, or
    why the archive cannot be read (the grader refuses it too)."""
    try:
        extraction = extract_handin(archive.resolve(), work)
    except HandinError as error:
        return str(error)
    return inspect_mytorch(extraction.files, part)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Compare every pair of students' mytorch with "
                                                 "copydetect; write pairs.csv, runtime_code.csv "
                                                 "and report.html.")
    parser.add_argument("handins", type=Path, help="the bulk download's folder")
    parser.add_argument("--handout", type=Path, default=Path("dist/handout"),
                        help="the student handout (its mytorch/ is the boilerplate; default: "
                             "dist/handout, from make handout)")
    parser.add_argument("--out", type=Path, default=Path("similarity"))
    parser.add_argument("--threshold", type=float, default=THRESHOLD,
                        help="flag a pair when this share of either student's own code is in the "
                             "other's")
    parser.add_argument("--part", choices=PARTS, default="graded",
                        help="the mytorch files compared: those the hidden tests grade (default) "
                             "or the bonus track's")
    parser.add_argument("--past", type=Path,
                        help="a folder of past semesters' handins (either layout) to compare "
                             "each student with")
    parser.add_argument("--top", type=int, default=TOP_PAIRS,
                        help="flagged pairs shown in report.html (pairs.csv holds every pair)")
    args = parser.parse_args(argv)
    documents, runtime, findings = class_documents(args.handins, args.part)
    past = class_documents(args.past, args.part).documents if args.past else None
    rows = compare(documents, handout_document(args.handout, args.part), args.out,
                   args.threshold, past, args.top, findings)
    spreadsheet.write_csv(args.out / "runtime_code.csv", ["student", "builds_code_at_run_time"],
                          ((student, "; ".join(found)) for student, found in sorted(runtime.items())))
    spreadsheet.write_csv(args.out / "findings.csv", ["student", "finding"],
                          ((student, finding) for student, found in sorted(findings.items())
                           for finding in found))
    flagged = [row for row in rows if row["flagged"]]
    print(f"{len(rows)} pairs, {len(flagged)} flagged (>= {args.threshold}); "
          f"{args.out / 'pairs.csv'}, {args.out / 'report.html'}")
    for row in flagged:
        print(f"  {row['similarity']:.2f}  {row['student_a']}  {row['student_b']}")
    for student, found in sorted(runtime.items()):
        print(f"  {student}: its mytorch builds code at run time ({'; '.join(found)})")
    for student, found in sorted(findings.items()):
        for finding in found:
            print(f"  {student}: {finding}")


if __name__ == "__main__":
    main()
