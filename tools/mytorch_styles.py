"""Independently written mytorch implementations in three styles, and planted copies of them: the
class the similarity tests (``tests/classroom/test_similarity.py``) and the realistic class
(``tools/class_fixture.py``) are built from.

A student's tree is ``{repo-relative path: source text}``: the handout's mytorch (every solution
region stubbed out) with :data:`FILES` filled in one of :data:`STYLES`.
"""
import ast
import dataclasses
import re
from pathlib import Path

from tools.handout_regions import file_regions, restore, stub_out

REPO = Path(__file__).resolve().parents[1]
FILES = ("mytorch/nn/linear.py", "mytorch/nn/activation.py",
         "mytorch/nn/scaled_dot_product_attention.py")
# Each style fills the six regions of FILES in order: Linear.forward, Linear.backward,
# Softmax.forward, Softmax.backward, ScaledDotProductAttention.forward and .backward.
STYLES = {
    "einsum": [
        """flat = A.reshape(-1, self.in_features)
out = np.einsum("bi,oi->bo", flat, self.W) + self.b
return out.reshape(self.output_shape)""",
        """g = dLdZ.reshape(-1, self.out_features)
x = self.A.reshape(-1, self.in_features)
self.dLdW = np.einsum("bo,bi->oi", g, x)
self.dLdb = np.einsum("bo->o", g)
return np.einsum("bo,oi->bi", g, self.W).reshape(self.input_shape)""",
        """shifted = Z - np.max(Z, axis=self.dim, keepdims=True)
e = np.exp(shifted)
self.A = e / np.sum(e, axis=self.dim, keepdims=True)
return self.A""",
        """inner = np.sum(dLdA * self.A, axis=self.dim, keepdims=True)
return self.A * (dLdA - inner)""",
        """d = Q.shape[-1]
logits = np.einsum("...le,...se->...ls", Q, K) / math.sqrt(d)
if mask is not None:
    logits = np.where(mask, logits - self.eps, logits)
self.attention_weights = self.softmax.forward(logits)
return np.einsum("...ls,...sv->...lv", self.attention_weights, V)""",
        """c = 1.0 / math.sqrt(self.Q.shape[-1])
P = self.attention_weights
dV = np.einsum("...ls,...lv->...sv", P, dLdZ)
dP = np.einsum("...lv,...sv->...ls", dLdZ, self.V)
dS = self.softmax.backward(dP)
if self.mask is not None:
    dS = np.where(self.mask, 0.0, dS).astype(dS.dtype)
dQ = c * np.einsum("...ls,...se->...le", dS, self.K)
dK = c * np.einsum("...ls,...le->...se", dS, self.Q)
return dQ, dK, dV""",
    ],
    "verbose": [
        """number_of_rows = int(np.prod(self.input_shape[:-1]))
matrix = np.reshape(A, (number_of_rows, self.in_features))
result = np.dot(matrix, self.W.transpose())
result = result + self.b[np.newaxis, :]
return np.reshape(result, self.output_shape)""",
        """number_of_rows = int(np.prod(self.input_shape[:-1]))
upstream = np.reshape(dLdZ, (number_of_rows, self.out_features))
inputs = np.reshape(self.A, (number_of_rows, self.in_features))
self.dLdW = np.dot(upstream.transpose(), inputs)
self.dLdb = upstream.sum(axis=0)
gradient = np.dot(upstream, self.W)
return np.reshape(gradient, self.input_shape)""",
        """moved = np.moveaxis(Z, self.dim, -1)
peak = moved.max(axis=-1)[..., None]
exponentials = np.exp(moved - peak)
probabilities = exponentials / exponentials.sum(axis=-1)[..., None]
self.A = np.moveaxis(probabilities, -1, self.dim)
return self.A""",
        """outputs = np.moveaxis(self.A, self.dim, -1)
upstream = np.moveaxis(dLdA, self.dim, -1)
weighted_total = (outputs * upstream).sum(axis=-1)[..., None]
return np.moveaxis(outputs * (upstream - weighted_total), -1, self.dim)""",
        """keys_transposed = np.swapaxes(K, -2, -1)
raw_scores = np.matmul(Q, keys_transposed)
raw_scores = raw_scores / math.sqrt(float(K.shape[-1]))
if mask is not None:
    raw_scores = raw_scores - self.eps * mask.astype(raw_scores.dtype)
weights = self.softmax.forward(raw_scores)
self.attention_weights = weights
return np.matmul(weights, V)""",
        """factor = 1.0 / math.sqrt(float(self.K.shape[-1]))
weights_transposed = np.swapaxes(self.attention_weights, -2, -1)
gradient_values = np.matmul(weights_transposed, dLdZ)
gradient_weights = np.matmul(dLdZ, np.swapaxes(self.V, -2, -1))
gradient_scores = self.softmax.backward(gradient_weights)
if self.mask is not None:
    gradient_scores = gradient_scores * (1 - self.mask.astype(gradient_scores.dtype))
gradient_queries = factor * np.matmul(gradient_scores, self.K)
gradient_keys = factor * np.matmul(np.swapaxes(gradient_scores, -2, -1), self.Q)
return gradient_queries, gradient_keys, gradient_values""",
    ],
    "loops": [
        """out = np.empty(self.output_shape, dtype=np.result_type(A, self.W))
for index in np.ndindex(*self.input_shape[:-1]):
    out[index] = self.W @ A[index] + self.b
return out""",
        """self.dLdW = np.zeros_like(self.W)
self.dLdb = np.zeros_like(self.b)
dLdA = np.empty(self.input_shape, dtype=np.result_type(dLdZ, self.W))
for index in np.ndindex(*self.input_shape[:-1]):
    self.dLdW += np.outer(dLdZ[index], self.A[index])
    self.dLdb += dLdZ[index]
    dLdA[index] = dLdZ[index] @ self.W
return dLdA""",
        """top = np.amax(Z, axis=self.dim, keepdims=True)
numerator = np.exp(np.subtract(Z, top))
denominator = np.add.reduce(numerator, axis=self.dim, keepdims=True)
self.A = np.divide(numerator, denominator)
return self.A""",
        """projection = np.add.reduce(np.multiply(dLdA, self.A), axis=self.dim, keepdims=True)
return np.multiply(self.A, np.subtract(dLdA, projection))""",
        """scale = 1 / math.sqrt(K.shape[-1])
S = np.matmul(Q, K.swapaxes(-1, -2)) * scale
if mask is not None:
    S[mask] -= self.eps
self.attention_weights = self.softmax.forward(S)
out = np.matmul(self.attention_weights, V)
return out""",
        """scale = 1 / math.sqrt(self.K.shape[-1])
Pt = self.attention_weights.swapaxes(-1, -2)
dLdV = np.matmul(Pt, dLdZ)
G = self.softmax.backward(np.matmul(dLdZ, self.V.swapaxes(-1, -2)))
if self.mask is not None:
    G[self.mask] = 0
dLdQ = np.matmul(G, self.K) * scale
dLdK = np.matmul(G.swapaxes(-1, -2), self.Q) * scale
return dLdQ, dLdK, dLdV""",
    ],
}


def skeleton(path: str) -> list[str]:
    """The handout's version of a mytorch file: every region stubbed out."""
    text = (REPO / path).read_text()
    return stub_out(text.splitlines(keepends=True), file_regions(path, text))


def filled(path: str, bodies: list[str]) -> str:
    """The handout's file with its regions filled by ``bodies`` (one per region, in order)."""
    regions = file_regions(path, (REPO / path).read_text())
    assert len(regions) == len(bodies), (path, len(regions), len(bodies))
    regions = [dataclasses.replace(region, body=tuple(
        region.indent + line + "\n" for line in body.splitlines())) for region, body in
        zip(regions, bodies)]
    return "".join(restore(skeleton(path), regions))


def student_tree(folder: Path, style: list[str] | None) -> dict[str, str]:
    """{path: text} of a student's mytorch: the skeleton, with FILES filled in ``style``."""
    files = {path.relative_to(REPO).as_posix(): path
             for path in (REPO / "mytorch").rglob("*.py") if "__pycache__" not in path.parts}
    tree = {path: "".join(skeleton(path)) for path in files}
    for index, path in enumerate(FILES):
        if style is not None:
            tree[path] = filled(path, style[2 * index:2 * index + 2])
    return tree


def disguised(tree: dict[str, str], names: dict[str, str], reorder: bool) -> dict[str, str]:
    """A planted copy: local names renamed, comments rewritten, blank lines and spacing changed,
    and (``reorder``) each class's methods in reverse order."""
    out = {}
    for path, text in tree.items():
        for old, new in names.items():
            text = re.sub(rf"\b{old}\b", new, text)
        if reorder:
            text = reverse_methods(text)
        text = re.sub(r"#[^\n]*", "# my own note", text)
        text = text.replace(" = ", "  =  ").replace("\n\n", "\n\n\n")
        out[path] = text
    return out


def reverse_methods(text: str) -> str:
    """The same module with the methods of each class in reverse order."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    for node in sorted((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)),
                       key=lambda n: -n.lineno):
        methods = [n for n in node.body if isinstance(n, ast.FunctionDef)]
        if len(methods) < 2:
            continue
        first, last = methods[0].lineno - 1, methods[-1].end_lineno
        chunks = ["".join(lines[m.lineno - 1:m.end_lineno]) + "\n" for m in methods]
        lines[first:last] = ["".join(reversed(chunks))]
    return "".join(lines)

