# hw4p1: instructor-only
"""Where the resolver (``autograder.judging.intake.mytorch_resolver``) finds each name of small
handins, as Python binds it at import: each kind of binding, the last binding winning (own
statements and star imports interleaved, an assignment read before later statements), relative
imports of each level, statements under if/try/with, the look-ups cached and counted, the import
depth and the look-ups at exactly their bounds, and the closure of a part.

    .venv/bin/python -m pytest -q tests/classroom/test_mytorch_resolver_units.py

Truths written by hand: the file and line Python's import would bind each name to.
"""
import ast
import dataclasses

import pytest

from autograder.judging.intake.mytorch_resolver import Definition, Resolver, resolve_qualified

# A handin's package p: {path: source}.
PACKAGE = {
    "p/__init__.py": "from .a import A\nfrom .a import B as Renamed\nfrom . import sub\n",
    "p/a.py": "class A:\n    pass\nclass B:\n    pass\n_hidden = 1\n",
    "p/c.py": "class C:\n    pass\nA = 7\n",
    "p/empty.py": "x = 1\n",
    "p/sub/__init__.py": "from ..a import *\nfrom .deep import D\n",
    "p/sub/deep.py": "from ..a import B\nclass D:\n    pass\n",
    "p/sub/inner/__init__.py": "from ...c import C\n",
    "p/sub/inner/leaf.py": "from ...a import A\nfrom . import C\n",
    "p/dup.py": "class Dup:\n    pass\n",
    "p/dup/__init__.py": "class Dup:\n    pass\n",
    "p/kinds.py": (
        "import numpy as np\n"                          # 1
        "import p.sub\n"                                # 2
        "import p.c as pc\n"                            # 3
        "from . import a\n"                             # 4
        "class Last:\n    pass\n"                       # 5
        "Last = 1\n"                                    # 7: the last binding wins
        "Tuple, Other = A, 2\n"                         # 8: not a bare name: not followed
        "Alias = A\n"                                   # 9: an alias of A, not bound yet
        "from .a import A\n"                            # 10
        "Follow = A\n"                                  # 11
        "Made = type('Made', (), {})\n"                 # 12: made by a call
        "Np = np.zeros\n"                               # 13: numpy's
        "Sub = p.sub.D\n"                               # 14
        "Pc = pc.C\n"                                   # 15
        "Mod = a.B\n"                                   # 16
        "Unbound = nowhere.B\n"                         # 17
        "class klass:\n    pass\n"                      # 18
        "Klass = klass.B\n"                             # 20: a class, not a module
        "Annotated: int\n"                              # 21
        "AnnFollow: type = A\n"                         # 22
        "class Imported:\n    pass\n"                   # 23
        "import Imported\n"                             # 25
        "class Named:\n    pass\n"                      # 26
        "from .a import B as Named\n"                   # 28
        "class Attribute:\n    pass\n"                 # 29
        "Attribute = a.B\n"                             # 31
        "from p.a import A as Absolute\n"               # 32
        "from numpy import zeros\n"                     # 33
    ),
    "p/stars.py": (
        "from .a import *\n"                            # 1
        "class A:\n    pass\n"                          # 2: own, after the star: wins
        "class B:\n    pass\n"                          # 4
        "from .c import *\n"                            # 6: C and A of c.py (A = 7) after B
        "from .empty import *\n"                        # 7: binds none of them
        "Before = C\n"                                  # 8
    ),
    "p/branches.py": (
        "try:\n    from .a import A\nexcept ImportError:\n    class A:\n        pass\n"  # 1-5
        "if A:\n    class B:\n        pass\nelse:\n    B = 2\n"                          # 6-10
        "with open('x') as f:\n    class W:\n        pass\n"                            # 11-13
        "try:\n    pass\nfinally:\n    F = 3\n"                                         # 14-17
        "try:\n    pass\nexcept* ValueError:\n    class S:\n        pass\n"              # 18-22
    ),
}

WHERE = {
    "p.A": ("p/a.py", 1), "p.Renamed": ("p/a.py", 3), "p.sub": None, "p.missing": None,
    "p.a._hidden": ("p/a.py", 5), "p.sub._hidden": None, "p.sub.A": ("p/a.py", 1),
    "p.sub.D": ("p/sub/deep.py", 2), "p.sub.deep.B": ("p/a.py", 3),
    "p.sub.inner.C": ("p/c.py", 1), "p.sub.inner.leaf.A": ("p/a.py", 1),
    "p.sub.inner.leaf.C": ("p/c.py", 1),
    "p.dup.Dup": ("p/dup/__init__.py", 1),
    "p.kinds.np": None, "p.kinds.Last": ("p/kinds.py", 7), "p.kinds.Tuple": ("p/kinds.py", 8),
    "p.kinds.Alias": None, "p.kinds.Follow": ("p/a.py", 1), "p.kinds.Made": ("p/kinds.py", 12),
    "p.kinds.Np": None, "p.kinds.Sub": ("p/sub/deep.py", 2), "p.kinds.Pc": ("p/c.py", 1),
    "p.kinds.Mod": ("p/a.py", 3), "p.kinds.Unbound": None, "p.kinds.Klass": None,
    "p.kinds.Annotated": ("p/kinds.py", 21), "p.kinds.AnnFollow": ("p/a.py", 1),
    "p.kinds.Imported": None, "p.kinds.Named": ("p/a.py", 3),
    "p.kinds.Attribute": ("p/a.py", 3), "p.kinds.Absolute": ("p/a.py", 1), "p.kinds.zeros": None,
    "p.stars.A": ("p/c.py", 3), "p.stars.B": ("p/stars.py", 4), "p.stars.C": ("p/c.py", 1),
    "p.stars.Before": ("p/c.py", 1), "p.stars.x": ("p/empty.py", 1),
    "p.branches.A": ("p/branches.py", 4), "p.branches.B": ("p/branches.py", 10),
    "p.branches.W": ("p/branches.py", 12), "p.branches.F": ("p/branches.py", 17),
    "p.branches.S": ("p/branches.py", 21),
}


def where(definition: Definition | None) -> tuple[str, int] | None:
    return definition and (definition.path, definition.node.lineno)


@pytest.mark.parametrize("qualified", WHERE)
def test_each_name_is_found_where_python_binds_it(qualified):
    assert where(resolve_qualified(Resolver(PACKAGE), qualified)) == WHERE[qualified]


def test_every_name_found_in_one_resolver_as_in_a_fresh_one():
    """The cache answers as a fresh look-up, whatever order the names come in (an assignment's
    value read before later statements is never the cached whole-module answer)."""
    resolver = Resolver(PACKAGE)
    for qualified in reversed(WHERE):
        assert where(resolve_qualified(resolver, qualified)) == WHERE[qualified], qualified
    shadowed = Resolver({"q.py": "class B:\n    pass\nA = B\nB = 1\n"})
    assert where(shadowed.resolve("q", "B")) == ("q.py", 4)
    assert where(shadowed.resolve("q", "A")) == ("q.py", 1)


def test_a_star_before_an_assignment_binds_and_one_after_it_does_not():
    sources = {"q/__init__.py": "", "q/m.py": "from .r import *\nX = A\nfrom .s import *\nY = A\n",
               "q/r.py": "class A:\n    pass\n", "q/s.py": "\n\nclass A:\n    pass\n"}
    resolver = Resolver(sources)
    assert [where(resolver.resolve("q.m", name)) for name in ("X", "Y", "A")] == [
        ("q/r.py", 1), ("q/s.py", 3), ("q/s.py", 3)]


def test_each_look_up_counts_one_step_and_a_repeated_one_is_cached():
    resolver = Resolver(PACKAGE)
    assert resolver.steps == 0
    resolver.resolve("p.a", "A")
    assert resolver.steps == 1
    resolver.resolve("p", "A")  # p, then p.a's A (cached: the step is counted, nothing read)
    assert resolver.steps == 3
    resolver.resolve("p", "A")
    assert resolver.steps == 4
    resolver.resolve("p.kinds", "Mod")  # Mod, a's module (one step), then p.a's B
    assert resolver.steps == 7


def chain(kind: str, hops: int) -> dict[str, str]:
    """A package whose name A is followed ``hops`` times before its class (each hop one import
    level deeper)."""
    if kind == "assign":
        lines = ["class A0:\n    pass\n"] + [f"A{index} = A{index - 1}\n"
                                             for index in range(1, hops + 1)]
        return {"q/__init__.py": "", "q/m.py": "".join(lines)}
    sources = {"q/__init__.py": "", f"q/m{hops}.py": "class A:\n    pass\n"}
    for index in range(hops):
        sources[f"q/m{index}.py"] = {
            "from": f"from .m{index + 1} import A\n", "star": f"from .m{index + 1} import *\n",
            "attribute": f"from . import m{index + 1}\nA = m{index + 1}.A\n"}[kind]
    return sources


@pytest.mark.parametrize("kind", ["from", "star", "assign", "attribute"])
@pytest.mark.parametrize("hops, found", [(50, True), (51, False)])
def test_imports_and_aliases_are_followed_50_deep(kind, hops, found):
    resolver = Resolver(chain(kind, hops))
    module, name = ("q.m", f"A{hops}") if kind == "assign" else ("q.m0", "A")
    definition = resolver.resolve(module, name)
    assert (definition is not None) is found
    assert definition is None or isinstance(definition.node, ast.ClassDef)


@pytest.mark.parametrize("start, found", [(19_998, True), (19_999, False)])
def test_look_ups_end_past_20000(start, found):
    """Two look-ups: the module's, then the star's that binds nothing; the class before it is
    still found at exactly 20000."""
    resolver = Resolver({"q/__init__.py": "", "q/m.py": "class A:\n    pass\nfrom .r import *\n",
                         "q/r.py": "x = 1\n"})
    resolver.steps = start
    assert where(resolver.resolve("q.m", "A")) == (("q/m.py", 1) if found else None)
    assert resolver.steps == start + 2


def helpers(count: int) -> dict[str, str]:
    """q.py: class R using functions h0.. h<count - 1>; h1 and h2 both use h3, and h3 uses h4."""
    body = [f"def h{index}():\n    pass\n" for index in range(count)]
    body[1] = "def h1():\n    return h3\n"
    body[2] = "def h2():\n    return h3\n"
    body[3] = "def h3():\n    return h4\n"
    uses = ", ".join(f"h{index}" for index in range(3))
    return {"q.py": f"class R:\n    def f(self):\n        return ({uses},)\n" + "".join(body)}


def test_the_closure_holds_every_definition_used_once_breadth_first():
    resolver = Resolver(helpers(5))
    root = resolver.resolve("q", "R")
    assert [definition.node.name for definition in resolver.closure([root], set())] == [
        "R", "h0", "h1", "h2", "h3", "h4"]
    stop = {resolver.resolve("q", "h3").key}
    assert [definition.node.name for definition in resolver.closure([root], stop)] == [
        "R", "h0", "h1", "h2"]


def test_the_closure_holds_at_most_500_definitions():
    resolver = Resolver({"q.py": "class R:\n    def f(self):\n        return ("
                         + ", ".join(f"h{index}" for index in range(600)) + ",)\n"
                         + "".join(f"def h{index}():\n    pass\n" for index in range(600))})
    used = resolver.closure([resolver.resolve("q", "R")], set())
    assert len(used) == 500 and used[-1].node.name == "h498"


def test_a_definition_is_keyed_by_its_place_and_cannot_change():
    node = ast.parse("x = 1\n\n  # a comment\nclass A:\n    pass\n").body[1]
    definition = Definition("q.py", node)
    assert definition.key == ("q.py", 4, 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        definition.path = "r.py"
