# hw4p1: instructor-only
"""Copies of an honest mytorch rewritten to hide from the similarity (issue 60), and the margin
between them and honest pairs, for tests/classroom/test_similarity_disguises.py and the platform
profiles' rows (tests/platforms/). Each disguise rewrites the graded files' syntax tree and writes
it back with ``ast.unparse`` (comments and layout gone, as an automatic rewrite leaves them):

- ``renamed``: every local name and parameter of every function renamed;
- ``reordered``: the classes of each module and the methods of each class in reverse order;
- ``noops-<kind>``: one statement without effect after every assignment of ``forward`` and
  ``backward``, of each kind in NOOPS;
- ``spelling``: ``@`` <-> ``np.matmul``, ``einsum`` products as ``np.matmul`` of swapped axes,
  ``.T`` <-> ``np.transpose``, the arithmetic operators as numpy's ufuncs, ``x op= y`` as
  ``x = x op y``;
- ``split``: each graded class's ``backward`` moved into a mixin class of another module;
- ``combined``: all of the above (no-ops of the first kind).

The honest students are the reference solution and tools/mytorch_styles.py's three styles.

    .venv/bin/python -m tests.classroom.similarity_disguises   # the margin, as docs/results.md
"""
import ast
import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from tools.mytorch_styles import STYLES, student_tree

REPO = Path(__file__).resolve().parents[2]
GRADED = ("mytorch/nn/linear.py", "mytorch/nn/activation.py",
          "mytorch/nn/scaled_dot_product_attention.py", "mytorch/nn/multi_head_attention.py")
# statements without effect, each a template of the assigned target's text
NOOPS = {
    "assert": "assert np.ndim({0}) >= 0, 'shape checked'",
    "dead-store": "_seen = np.shape({0})",
    "bare-call": "np.ndim({0})",
    "self-assign": "{0} = {0}",
    "constant-if": "if False:\n    {0} = None",
    "string": "'''{0} is ready'''",
    "copy-unused": "_spare = np.copy({0}).reshape(-1).sum()",
    "attribute-store": "self._trace = np.shape({0})",
    "identity": "{0} = np.asarray({0})",
    "copy-self": "{0} = np.copy({0})",
}
SPLIT_MODULE = "mytorch/nn/_halves.py"


def reference_tree() -> dict[str, str]:
    """{path: text} of the reference solution's mytorch, as a student would hand it in."""
    return {path.relative_to(REPO).as_posix(): path.read_text()
            for path in sorted((REPO / "mytorch").rglob("*.py"))
            if "__pycache__" not in path.parts}


def honest_trees(folder: Path) -> dict[str, dict[str, str]]:
    """{student: mytorch tree} of the honest students: the reference and the three styles."""
    return {"reference": reference_tree(),
            **{name: student_tree(folder, style) for name, style in STYLES.items()}}


def rewritten(tree: dict[str, str], transform) -> dict[str, str]:
    """``tree`` with each graded file's syntax tree passed through ``transform`` and unparsed."""
    out = dict(tree)
    for path in GRADED:
        module = transform(ast.parse(tree[path]))
        out[path] = ast.unparse(ast.fix_missing_locations(module)) + "\n"
    return out


class Renamer(ast.NodeTransformer):
    """Every local name and parameter without a default (one a caller may name) of every
    function renamed (``self`` kept)."""

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        positional = [*node.args.posonlyargs, *node.args.args]
        arguments = [arg for arg in positional[:len(positional) - len(node.args.defaults)]
                     if arg.arg != "self"]
        kept = {arg.arg for arg in (*positional, *node.args.kwonlyargs)} - {
            arg.arg for arg in arguments}
        local = {arg.arg for arg in arguments} | {
            inner.id for inner in ast.walk(node)
            if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store)} - kept
        names = {name: f"v_{index}_{name[::-1].lower()}" for index, name in enumerate(sorted(local))}
        for arg in arguments:
            arg.arg = names[arg.arg]
        for inner in ast.walk(node):
            if isinstance(inner, ast.Name) and inner.id in names:
                inner.id = names[inner.id]
        return node


def reorder(module: ast.Module) -> ast.Module:
    """Classes and each class's methods in reverse order."""
    classes = [node for node in module.body if isinstance(node, ast.ClassDef)]
    rest = [node for node in module.body if not isinstance(node, ast.ClassDef)]
    for node in classes:
        node.body = node.body[::-1]
    module.body = rest + classes[::-1]
    return module


def with_noops(template: str):
    """A transform inserting ``template`` (NOOPS') after every assignment inside each
    ``forward`` and ``backward`` (a rebinding through numpy only after a local's, never the
    optional mask's: None would become an array)."""
    def insert(body: list[ast.stmt]) -> list[ast.stmt]:
        out = []
        for node in body:
            for field in ("body", "orelse"):
                if isinstance(getattr(node, field, None), list) and not isinstance(
                        node, ast.ClassDef):
                    setattr(node, field, insert(getattr(node, field)))
            out.append(node)
            if isinstance(node, (ast.Assign, ast.AugAssign)):
                target = node.targets[0] if isinstance(node, ast.Assign) else node.target
                if not isinstance(target, ast.Tuple) and (not template.startswith("{0} = np.") or (
                        isinstance(target, ast.Name) and "mask" not in target.id)):
                    out += ast.parse(template.format(ast.unparse(target))).body
        return out

    def transform(module: ast.Module) -> ast.Module:
        for node in ast.walk(module):
            if isinstance(node, ast.FunctionDef) and node.name in ("forward", "backward"):
                node.body = insert(node.body)
        return module
    return transform


def call(name: str, *args: ast.expr) -> ast.Call:
    """``np.<name>(*args)``."""
    return ast.Call(ast.Attribute(ast.Name("np", ast.Load()), name, ast.Load()), list(args), [])


def numpy_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
            node.value.id == "np":
        return node.attr
    return None


class Respelled(ast.NodeTransformer):
    """The spelling disguise: each numpy spelling swapped for an equivalent one."""

    OPERATORS = {ast.Add: "add", ast.Sub: "subtract", ast.Mult: "multiply", ast.Div: "divide",
                 ast.MatMult: "matmul"}

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.Assign:
        load = ast.parse(ast.unparse(node.target), mode="eval").body
        return self.visit(ast.copy_location(
            ast.Assign([node.target], ast.BinOp(load, node.op, node.value)), node))

    def visit_BinOp(self, node: ast.BinOp) -> ast.expr:
        node = self.generic_visit(node)
        strings = any(isinstance(side, (ast.JoinedStr, ast.Constant)) and isinstance(
            getattr(side, "value", None), str) or isinstance(side, ast.JoinedStr)
            for side in (node.left, node.right))
        if type(node.op) in self.OPERATORS and not strings:
            return call(self.OPERATORS[type(node.op)], node.left, node.right)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        node = self.generic_visit(node)
        return call("transpose", node.value) if node.attr == "T" else node

    def visit_Call(self, node: ast.Call) -> ast.expr:
        node = self.generic_visit(node)
        name = numpy_name(node.func)
        if name == "matmul" and len(node.args) == 2:
            return ast.BinOp(node.args[0], ast.MatMult(), node.args[1])
        if name == "einsum" and len(node.args) == 3:
            from autograder.classroom.canonical_code import einsum_product

            product = einsum_product(node.args)
            if product is not None:
                return Swapped().visit(ast.parse(ast.unparse(product), mode="eval").body)
        return node


class Swapped(ast.NodeTransformer):
    """``x.T`` as ``np.swapaxes(x, -1, -2)`` and ``a @ b`` as ``np.matmul(a, b)``."""

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        node = self.generic_visit(node)
        if node.attr != "T":
            return node
        return call("swapaxes", node.value, ast.Constant(-1), ast.Constant(-2))

    def visit_BinOp(self, node: ast.BinOp) -> ast.expr:
        node = self.generic_visit(node)
        if isinstance(node.op, ast.MatMult):
            return call("matmul", node.left, node.right)
        return node


def respell(module: ast.Module) -> ast.Module:
    return Respelled().visit(module)


def split(tree: dict[str, str]) -> dict[str, str]:
    """Each graded class's ``backward`` moved into ``_<Class>Half`` of SPLIT_MODULE (which gets
    every graded file's imports, one level deeper when relative), the class deriving from it."""
    out, halves = dict(tree), []
    imports: list[str] = []
    for path in GRADED:
        module = ast.parse(tree[path])
        for node in module.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                imports.append(ast.unparse(node))
            if not isinstance(node, ast.ClassDef):
                continue
            moved = [item for item in node.body
                     if isinstance(item, ast.FunctionDef) and item.name == "backward"]
            if not moved:
                continue
            node.body = [item for item in node.body if item not in moved]
            node.bases.append(ast.parse(f"_halves._{node.name}Half", mode="eval").body)
            halves.append(ast.ClassDef(f"_{node.name}Half", [], [], moved, []))
        first = next(index for index, node in enumerate(module.body)
                     if not (isinstance(node, ast.ImportFrom) and node.module == "__future__"))
        module.body.insert(first, ast.parse("from . import _halves").body[0])
        out[path] = ast.unparse(ast.fix_missing_locations(module)) + "\n"
    graded = tuple(f"from .{Path(path).stem} " for path in GRADED)  # circular: not needed
    head = [line for line in dict.fromkeys(imports) if "import annotations" not in line
            and not line.startswith(graded)]
    body = ast.unparse(ast.fix_missing_locations(ast.Module(halves, [])))
    out[SPLIT_MODULE] = "from __future__ import annotations\n" + "\n".join(head) + "\n\n" + \
        body + "\n"
    return out


DISGUISES = {
    "renamed": lambda tree: rewritten(tree, Renamer().visit),
    "reordered": lambda tree: rewritten(tree, reorder),
    **{f"noops-{kind}": (lambda template: lambda tree: rewritten(tree, with_noops(template)))(
        template) for kind, template in NOOPS.items()},
    "spelling": lambda tree: rewritten(tree, respell),
    "split": split,
    "combined": lambda tree: split(rewritten(tree, lambda module: reorder(Renamer().visit(
        with_noops(NOOPS["assert"])(respell(module)))))),
}


def disguised_class(folder: Path, victims: list[str] | None = None,
                    disguises: list[str] | None = None) -> dict[str, dict[str, str]]:
    """The honest students and, for each of ``victims`` (all honest students when None), a copy
    of them under each of ``disguises`` (all when None), named ``<disguise>--<victim>``."""
    trees = honest_trees(folder)
    for victim in victims or list(trees):
        for name in disguises or DISGUISES:
            trees[f"{name}--{victim}"] = DISGUISES[name](trees[victim])
    return trees


BEHAVIOUR = """
import hashlib, importlib, json, sys
import numpy as np
found = {}
for name in NAMES:
    sys.path.insert(0, ROOT + '/' + str(NAMES.index(name)))
    nn = importlib.import_module('mytorch.nn')
    rng = np.random.default_rng(0)
    values = []
    layer = nn.Linear(4, 3)
    layer.init_weights(rng.standard_normal((3, 4)), rng.standard_normal(3))
    values += [layer.forward(rng.standard_normal((2, 5, 4))),
               layer.backward(rng.standard_normal((2, 5, 3))), layer.dLdW, layer.dLdb]
    softmax = nn.Softmax()
    values += [softmax.forward(rng.standard_normal((2, 5))),
               softmax.backward(rng.standard_normal((2, 5)))]
    q, k, v = (rng.standard_normal((2, 5, 4)) for _ in range(3))
    attention = nn.ScaledDotProductAttention()
    values += [attention.forward(q, k, v, rng.standard_normal((2, 5, 5)) > 0),
               *attention.backward(rng.standard_normal((2, 5, 4)))]
    heads = nn.MultiHeadAttention(4, 2)
    heads.init_weights(*(rng.standard_normal(shape) for shape in
                         [(4, 4), (4,)] * 4))
    try:  # the styles leave it a stub
        values += [heads.forward(q, k, v), *heads.backward(rng.standard_normal((2, 5, 4)))]
    except NotImplementedError:
        values.append(0.0)
    found[name] = hashlib.sha256(b''.join(  # rounded: an einsum and a matmul sum in other orders
        np.round(np.asarray(x, dtype=float), 9).tobytes() for x in values)).hexdigest()
    sys.path.pop(0)
    for module in [m for m in sys.modules if m.split('.')[0] == 'mytorch']:
        del sys.modules[module]
print(json.dumps(found))
"""


def behaviour(trees: dict[str, dict[str, str]], folder: Path) -> dict[str, str]:
    """{student: digest of what their mytorch's Linear, Softmax, ScaledDotProductAttention and
    MultiHeadAttention compute, forward and backward, on fixed inputs, to 9 decimals}, from Python's own import
    of each tree: the truth that a copy runs its victim's code."""
    names = sorted(trees)
    for index, name in enumerate(names):
        for path, text in trees[name].items():
            (folder / str(index) / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / str(index) / path).write_text(text)
    script = f"NAMES = {names!r}\nROOT = {str(folder)!r}\n" + BEHAVIOUR
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=folder)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


ROWS = {  # make test-platforms' rows: the disguises each runs, on the reference's and einsum's code
    "61 similarity of copies renamed, reordered or split": ["renamed", "reordered", "split"],
    "62 similarity of copies with no-ops of ten kinds": [f"noops-{kind}" for kind in NOOPS],
    "63 similarity of copies respelled, or every disguise at once": ["spelling", "combined"],
}
ROW_VICTIMS = ["reference", "einsum"]
MARGIN = 0.35  # the least a copy must score above every pair of different students' work


def disguise_problems(result: subprocess.CompletedProcess, out: Path) -> list[str]:
    """What ``python -m autograder.classroom.similarity`` got wrong on a disguised_class (none:
    each copy flagged beside its victim, no pair of different students' work flagged, every copy
    at least MARGIN above every such pair)."""
    if result.returncode != 0:
        return [f"exit {result.returncode}: {result.stderr[-3000:]!r}"]
    with open(out / "pairs.csv", newline="", encoding="utf-8") as file:
        rows = [{**row, "similarity": float(row["similarity"]), "flagged": row["flagged"] == "True"}
                for row in csv.DictReader(file)]
    lowest, highest, copies, apart = margin(rows)
    problems = [f"copy not flagged: {row}" for row in copies if not row["flagged"]]
    problems += [f"different students flagged: {row}" for row in apart if row["flagged"]]
    if lowest - highest < MARGIN:
        problems.append(f"lowest copy {lowest}, highest pair apart {highest}")
    return problems


def origin(student: str) -> str:
    """The honest student whose work ``student`` (``<disguise>--<victim>`` or honest) hands in."""
    return student.split("--")[-1]


def margin(rows: list[dict]) -> tuple[float, float, list[dict], list[dict]]:
    """(the lowest similarity of a copy with its victim, the highest of two different students'
    work, disguised or not, the copies' rows, the rows of different students' work) of the
    similarity's ``rows`` over a disguised_class."""
    copies = [row for row in rows if origin(row["student_a"]) == origin(row["student_b"])
              and ("--" in row["student_a"]) != ("--" in row["student_b"])]
    apart = [row for row in rows if origin(row["student_a"]) != origin(row["student_b"])]
    return (min(float(row["similarity"]) for row in copies),
            max(float(row["similarity"]) for row in apart), copies, apart)


def main() -> None:
    from autograder.classroom import similarity
    from tests.classroom.similarity_classes import class_folder, handout_folder

    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        handins = class_folder(folder, disguised_class(folder))
        documents, _, findings = similarity.class_documents(handins)
        rows = similarity.compare(documents, similarity.handout_document(handout_folder(folder)),
                                  folder / "out")
    lowest, highest, copies, apart = margin(rows)
    honest = [row for row in apart if "--" not in row["student_a"] + row["student_b"]]
    for row in sorted(copies + honest, key=lambda row: row["similarity"]):
        print(f"{row['similarity']:.4f}  {row['student_a']}  {row['student_b']}")
    print(f"findings: {findings}")
    top = max(row["similarity"] for row in honest)
    print(f"lowest copy {lowest:.4f}, highest honest pair {top:.4f}, highest pair of different "
          f"students' work (disguised or not) {highest:.4f}, "
          f"margin {lowest - highest:.4f}, threshold {similarity.THRESHOLD}")
    sys.exit(0 if lowest > similarity.THRESHOLD > highest else 1)


if __name__ == "__main__":
    main()
