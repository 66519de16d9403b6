"""Where a handin's mytorch builds or runs code other than its own files (``exec``, ``eval``,
``marshal``, an importlib loader, an encoded blob...): an AST read, never run, by the judge's static
inspection (``autograder/judging/intake/static_inspection.py``). Such code hides from a comparison
of the source; the worker's audit hook refuses it at run time
(``autograder/sandboxed/refusals.py``). Standard library only."""
from __future__ import annotations

import ast
import re

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
