# hw4p1: instructor-only
"""The repository's imports form layers: no module imports one that imports it back, and no
top-level folder imports one above it. Read from the source (every ``import`` statement, at any
depth, a function's included), nothing is executed."""
import ast
from pathlib import Path
from typing import Callable


REPO = Path(__file__).resolve().parents[2]
# Bottom to top: a folder may import the folders before it, never one after it.
LAYERS = ("mytorch", "hw4lib", "datagen", "autograder", "bench", "tools")
# Inside hw4lib, bottom to top: a module may import its own line's rooms and those below, never a
# line above (the factories in utils sit below the trainers; the entry points on top use them all).
HW4LIB_ROOMS = (("hw4lib.grading_numbers", "hw4lib.versions", "hw4lib.handin_format",
                 "hw4lib.numeric_truths", "hw4lib.file_io"),
                ("hw4lib.data",), ("hw4lib.model",), ("hw4lib.config",), ("hw4lib.decoding",),
                ("hw4lib.utils",), ("hw4lib.trainers",),
                ("hw4lib.train", "hw4lib.handin", "hw4lib.numpy_twin", "hw4lib.gpu_check"))
# The grader's rooms by trust, bottom to top (autograder/__init__.py): what runs beside student
# code, the judge, the class tools; the build-time secrets stand alone, imported by no room.
AUTOGRADER_ROOMS = ("autograder.sandboxed", "autograder.judging", "autograder.classroom")
BUILD_TIME = "autograder.build_time"
# Inside the judge, by the step they serve, bottom to top (autograder/judging/__init__.py): the
# handin's intake, the isolation, the scoring; on top the entry points that run them (the judge's
# driver, the platforms' adapters), which no room imports.
JUDGING_ROOMS = ("autograder.judging.intake", "autograder.judging.isolation",
                 "autograder.judging.scoring")
JUDGING_TOP = ("autograder.judging.grade", "autograder.judging.command_line",
               "autograder.judging.grading_run", "autograder.judging.gradescope")


def modules() -> dict[str, Path]:
    """{dotted module name: file} of every layer (a package is its __init__)."""
    found = {}
    for layer in LAYERS:
        for path in (REPO / layer).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported(module: str, path: Path, known: set[str]) -> set[str]:
    """The modules ``module`` imports: for ``from package import name`` the submodule when
    ``name`` is one, else the package; names outside ``known`` kept as written."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for alias in node.names:
                targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {target for target in targets if target != module}


def import_graph() -> dict[str, set[str]]:
    found = modules()
    return {module: imported(module, path, set(found)) for module, path in found.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Groups of modules that import each other, directly or through others (Tarjan)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in graph:
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while not group or group[-1] != node:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                groups.append(sorted(group))

    for node in graph:
        if node not in index:
            visit(node)
    return groups


def test_no_module_imports_one_that_imports_it_back():
    found = cycles(import_graph())
    assert not found, f"import circles (break each, e.g. with a registry): {found}"


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``"<module> imports <target>"`` for each import of a higher layer (or of tests)."""
    upward = []
    for module, targets in sorted(graph.items()):
        layer = module.split(".")[0]
        for target in sorted(targets):
            top = target.split(".")[0]
            if top == layer:
                continue
            if top == "tests" or (top in LAYERS and LAYERS.index(top) > LAYERS.index(layer)):
                upward.append(f"{module} imports {target}")
    return upward


def test_no_folder_imports_a_folder_above_it():
    found = upward_imports(import_graph())
    assert not found, f"imports that run upward ({' < '.join(LAYERS)}): {found}"


def level(module: str) -> int | None:
    """The line of HW4LIB_ROOMS holding ``module``'s room, None outside them (the package)."""
    room = ".".join(module.split(".")[:2])
    return next((number for number, rooms in enumerate(HW4LIB_ROOMS) if room in rooms), None)


def imports_above(graph: dict[str, set[str]], level_of: Callable[[str], int | None]
                  ) -> list[str]:
    """``"<module> imports <target>"`` for each import of a module on a higher level than its
    own (``level_of``: a module's level, None outside the levels it orders)."""
    found = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            here, there = level_of(module), level_of(target)
            if here is not None and there is not None and there > here:
                found.append(f"{module} imports {target}")
    return found


def upward_rooms(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a higher room of hw4lib."""
    return imports_above(graph, level)


def test_every_hw4lib_module_sits_in_a_room_and_imports_none_above_it():
    graph = import_graph()
    homeless = [m for m in graph if m.startswith("hw4lib.") and level(m) is None]
    assert not homeless, f"modules in no room of HW4LIB_ROOMS: {homeless}"
    found = upward_rooms(graph)
    assert not found, f"imports of a higher room of hw4lib: {found}"


def entry_point_imports(graph: dict[str, set[str]]) -> list[str]:
    """``"<module> imports <target>"`` for each autograder module importing an entry point of
    hw4lib (the top line of HW4LIB_ROOMS)."""
    return [f"{module} imports {target}" for module, targets in sorted(graph.items())
            if module.startswith("autograder.") for target in sorted(targets)
            if level(target) == len(HW4LIB_ROOMS) - 1]


def test_the_autograder_imports_no_entry_point_of_hw4lib():
    # The grader measures with hw4lib's rooms (data, model, metric); an entry point (training,
    # packing) would pull every room above them into the grading processes.
    found = entry_point_imports(import_graph())
    assert not found, f"the autograder imports hw4lib's entry points: {found}"


def autograder_room(module: str) -> str | None:
    """The room of AUTOGRADER_ROOMS (or BUILD_TIME) holding ``module``; None for the package."""
    room = ".".join(module.split(".")[:2])
    return room if room in (*AUTOGRADER_ROOMS, BUILD_TIME) else None


def room_crossings(graph: dict[str, set[str]]) -> list[str]:
    """``"<module> imports <target>"`` for each autograder import of a higher room, and for each
    import of the build-time room by another room (its secrets never reach shipped code)."""
    found = []
    for module, targets in sorted(graph.items()):
        here = autograder_room(module)
        for target in sorted(targets):
            there = autograder_room(target)
            if here is None or there is None or here == there:
                continue
            if BUILD_TIME in (here, there) or (
                    AUTOGRADER_ROOMS.index(there) > AUTOGRADER_ROOMS.index(here)):
                found.append(f"{module} imports {target}")
    return found


def test_every_grader_module_sits_in_a_room_and_imports_none_above_it():
    graph = import_graph()
    homeless = [m for m in graph if m.startswith("autograder.") and autograder_room(m) is None]
    assert not homeless, f"autograder modules outside the rooms {AUTOGRADER_ROOMS}: {homeless}"
    found = room_crossings(graph)
    assert not found, f"imports across the grader's rooms ({' < '.join(AUTOGRADER_ROOMS)}): {found}"


def judging_level(module: str) -> int | None:
    """The line of ``module`` in the judge: its room's index in JUDGING_ROOMS, one above them for
    JUDGING_TOP; None for the judging package and modules outside it."""
    if module in JUDGING_TOP:
        return len(JUDGING_ROOMS)
    room = ".".join(module.split(".")[:3])
    return JUDGING_ROOMS.index(room) if room in JUDGING_ROOMS else None


def judging_crossings(graph: dict[str, set[str]]) -> list[str]:
    """Each import, inside the judge, of a higher line."""
    return imports_above(graph, judging_level)


def test_every_judging_module_sits_in_a_room_and_imports_none_above_it():
    graph = import_graph()
    homeless = [m for m in graph
                if m.startswith("autograder.judging.") and judging_level(m) is None]
    assert not homeless, f"judging modules in no room of {JUDGING_ROOMS}, nor on top: {homeless}"
    found = judging_crossings(graph)
    order = " < ".join((*JUDGING_ROOMS, "the top"))
    assert not found, f"imports across the judge's rooms ({order}): {found}"


def test_the_checks_see_a_planted_circle_and_an_upward_import():
    graph = {"hw4lib.a": {"hw4lib.b"}, "hw4lib.b": {"hw4lib.c"}, "hw4lib.c": {"hw4lib.a"},
             "hw4lib.d": {"hw4lib.a", "numpy"}, "mytorch.e": {"hw4lib.d"},
             "autograder.f": {"tests.numeric_checks", "hw4lib.d"}}
    assert cycles(graph) == [["hw4lib.a", "hw4lib.b", "hw4lib.c"]]
    assert upward_imports(graph) == ["autograder.f imports tests.numeric_checks",
                                     "mytorch.e imports hw4lib.d"]
    assert upward_rooms({"hw4lib.utils.x": {"hw4lib.trainers.y", "hw4lib.config"}}) == [
        "hw4lib.utils.x imports hw4lib.trainers.y"]
    assert entry_point_imports({"autograder.g": {"hw4lib.train", "hw4lib.data"}}) == [
        "autograder.g imports hw4lib.train"]
    assert room_crossings({"autograder.sandboxed.w": {"autograder.judging.j"},
                           "autograder.judging.j": {"autograder.sandboxed.w",
                                                    "autograder.build_time.s"},
                           "autograder.classroom.c": {"autograder.judging.j"}}) == [
        "autograder.judging.j imports autograder.build_time.s",
        "autograder.sandboxed.w imports autograder.judging.j"]
    assert judging_crossings({"autograder.judging.intake.a": {"autograder.judging.isolation.b"},
                              "autograder.judging.isolation.b": {"autograder.judging.intake.a",
                                                                 "autograder.judging.grade"},
                              "autograder.judging.scoring.c": {"autograder.judging.isolation.b",
                                                               "autograder.judging.intake.a"},
                              "autograder.judging.grade": {"autograder.judging.scoring.c"}}) == [
        "autograder.judging.intake.a imports autograder.judging.isolation.b",
        "autograder.judging.isolation.b imports autograder.judging.grade"]
