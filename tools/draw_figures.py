"""Draw the architecture diagrams in figures/ (used by the README and the notebook).

    .venv/bin/python -m tools.draw_figures        # or: make figures

Every figure is drawn from code with matplotlib's Agg backend and the DejaVu Sans font bundled with
matplotlib, and saved without a timestamp, so the same matplotlib version rewrites identical PNGs.
Data flows bottom to top, as in the Transformer paper's figures; boxes are named after the modules
of hw4lib.model and mytorch.nn, with tensor shapes on the arrows (N batch, T sequence length,
D = d_model, H heads, L queries, S keys, E features).
"""
import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import Circle, FancyBboxPatch, Rectangle

FIGURES_DIR = Path(__file__).resolve().parents[1] / "figures"
DPI = 150
UNIT_INCHES = 0.62  # one diagram unit on paper

# One colour per kind of operation, the same in every figure.
COLOURS = {
    "norm": "#fdf0c2",
    "attention": "#fbd5b5",
    "linear": "#cfe2f3",
    "activation": "#d9ead3",
    "dropout": "#e8e8e8",
    "embedding": "#f4cccc",
    "softmax": "#e1d5e7",
    "mask": "#f9e0e0",
    "group": "#fafafa",
}


class Diagram:
    """A blank canvas in diagram units (x to the right, y upwards) with drawing helpers."""

    def __init__(self, width: float, height: float, title: str):
        self.fig = plt.figure(figsize=(width * UNIT_INCHES, height * UNIT_INCHES))
        self.ax = self.fig.add_axes((0, 0, 1, 1))
        self.ax.set_xlim(0, width)
        self.ax.set_ylim(0, height)
        self.ax.set_aspect("equal")
        self.ax.axis("off")
        self.ax.text(width / 2, height - 0.35, title, ha="center", va="center", fontsize=11,
                     fontweight="bold")

    def box(self, x, y, w, h, text, kind, fontsize=9):
        """A rounded box centred at (x, y); returns its (left, right, bottom, top) edges."""
        self.ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h,
                                         boxstyle="round,pad=0,rounding_size=0.12",
                                         facecolor=COLOURS[kind], edgecolor="#333333", linewidth=1.1,
                                         zorder=2))
        self.ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, zorder=3)
        return x - w / 2, x + w / 2, y - h / 2, y + h / 2

    def group(self, left, bottom, right, top, label, label_side="left"):
        """A dashed frame around several boxes, labelled in its top corner."""
        self.ax.add_patch(Rectangle((left, bottom), right - left, top - bottom, fill=True,
                                    facecolor=COLOURS["group"], edgecolor="#777777",
                                    linestyle=(0, (4, 3)), linewidth=1.0, zorder=0))
        x, ha = (left + 0.12, "left") if label_side == "left" else (right - 0.12, "right")
        self.ax.text(x, top - 0.12, label, ha=ha, va="top", fontsize=8.5, style="italic",
                     color="#444444", zorder=1)

    def adder(self, x, y, radius=0.2):
        """The residual addition node, a circled plus."""
        self.ax.add_patch(Circle((x, y), radius, facecolor="white", edgecolor="#333333",
                                 linewidth=1.1, zorder=2))
        self.ax.text(x, y, "+", ha="center", va="center", fontsize=12, zorder=3)

    def arrow(self, *points, label=None, label_offset=(0.1, 0.0), label_ha="left", dashed=False):
        """A polyline through ``points`` with an arrow head at the last one, optionally labelled
        next to the middle of its first segment."""
        xs, ys = zip(*points)
        style = (0, (4, 3)) if dashed else "solid"
        if len(points) > 2:
            self.ax.plot(xs[:-1], ys[:-1], color="#333333", linewidth=1.2, linestyle=style,
                         solid_joinstyle="miter", zorder=1)
        self.ax.annotate("", xy=points[-1], xytext=points[-2], zorder=1,
                         arrowprops=dict(arrowstyle="-|>", color="#333333", linewidth=1.2,
                                         linestyle=style, shrinkA=0, shrinkB=0,
                                         mutation_scale=12))
        if label:
            (x0, y0), (x1, y1) = points[0], points[1]
            self.ax.text((x0 + x1) / 2 + label_offset[0], (y0 + y1) / 2 + label_offset[1], label,
                         ha=label_ha, va="center", fontsize=8, color="#222222", zorder=3)

    def line(self, *points, dashed=False):
        """A polyline without an arrow head (e.g. the first part of a branch)."""
        xs, ys = zip(*points)
        self.ax.plot(xs, ys, color="#333333", linewidth=1.2, linestyle=(0, (4, 3)) if dashed else "solid",
                     zorder=1)

    def dot(self, x, y):
        """A branch point where one tensor feeds several consumers."""
        self.ax.add_patch(Circle((x, y), 0.06, facecolor="#333333", edgecolor="none", zorder=3))

    def label(self, x, y, text, ha="center", fontsize=8.5, **kwargs):
        self.ax.text(x, y, text, ha=ha, va="center", fontsize=fontsize, zorder=3, **kwargs)

    def save(self, path: Path) -> None:
        # No "Software" entry: the PNG then depends only on what is drawn.
        self.fig.savefig(path, dpi=DPI, facecolor="white", metadata={"Software": None})
        plt.close(self.fig)


def draw_sdpa(path: Path) -> None:
    """Scaled dot-product attention, left to right: softmax(Q K^T / sqrt(E) + mask) V."""
    d = Diagram(13.0, 5.6, "Scaled dot-product attention")
    row = 3.0  # centre line of the score chain
    d.label(0.95, 3.85, "Q\n(N, …, H, L, E)", fontsize=8)
    d.label(0.95, 2.25, "K\n(N, …, H, S, E)", fontsize=8)
    d.label(0.95, 0.75, "V\n(N, …, H, S, Ev)", fontsize=8)
    d.box(3.2, row, 1.4, 0.8, "MatMul\nQ Kᵀ", "linear")
    d.arrow((1.9, 3.85), (2.2, 3.85), (2.2, row + 0.2), (2.5, row + 0.2))
    d.arrow((1.9, 2.25), (2.2, 2.25), (2.2, row - 0.2), (2.5, row - 0.2))
    d.box(5.3, row, 1.4, 0.8, "Scale\n÷ √E", "linear")
    d.arrow((3.9, row), (4.6, row))
    d.label(4.25, row - 0.65, "(…, L, S)", fontsize=7.5)
    d.box(7.4, row, 1.4, 0.8, "Mask\n(optional)", "mask")
    d.arrow((6.0, row), (6.7, row))
    d.label(7.4, 4.55, "mask (…, L, S), True = ignore: add −eps", fontsize=8)
    d.arrow((7.4, 4.3), (7.4, row + 0.4))
    d.box(9.5, row, 1.4, 0.8, "Softmax\nover S", "softmax")
    d.arrow((8.1, row), (8.8, row))
    d.box(11.6, 2.0, 1.4, 0.8, "MatMul\nA V", "linear")
    d.arrow((10.2, row), (10.6, row), (10.6, 2.2), (10.9, 2.2))
    d.label(9.5, row - 0.65, "A (…, L, S)", fontsize=7.5)
    d.arrow((1.9, 0.75), (10.6, 0.75), (10.6, 1.8), (10.9, 1.8))
    d.arrow((11.6, 2.4), (11.6, 3.9))
    d.label(11.6, 4.25, "output\n(N, …, H, L, Ev)", fontsize=8)
    d.save(path)


def draw_mha(path: Path) -> None:
    """Multi-head attention: project, split into H heads, attend per head, concatenate, project."""
    d = Diagram(11.4, 9.4, "Multi-head attention")
    columns = {"query": 1.6, "key": 3.8, "value": 6.0}
    shapes = {"query": "(N, L, E)", "key": "(N, S, E)", "value": "(N, S, E)"}
    projections = {"query": "q_proj", "key": "k_proj", "value": "v_proj"}
    for name, x in columns.items():
        d.label(x, 0.45, f"{name}\n{shapes[name]}")
        d.box(x, 1.75, 1.7, 0.7, f"Linear\n{projections[name]}", "linear")
        d.arrow((x, 0.85), (x, 1.4))
        d.box(x, 3.05, 1.7, 0.7, "split heads", "dropout")
        d.arrow((x, 2.1), (x, 2.7))
        d.arrow((x, 3.4), (x, 4.25))
    d.label(columns["query"] + 0.12, 3.83, "(N, H, L, E/H)", ha="left", fontsize=7.5)
    masks_x = 9.0
    d.label(masks_x, 0.45, "key_padding_mask (N, S)\nattn_mask (L, S)", fontsize=8)
    d.box(masks_x, 3.05, 2.2, 0.7, "merge masks", "mask")
    d.arrow((masks_x, 0.85), (masks_x, 2.7))
    d.arrow((masks_x, 3.4), (masks_x, 4.25))
    d.label(masks_x + 0.12, 3.83, "(N, H, L, S)", ha="left", fontsize=7.5)
    # H heads attend in parallel: a stack of scaled dot-product attention boxes.
    left, width = 0.6, 9.6
    for offset in (0.3, 0.15):
        d.ax.add_patch(FancyBboxPatch((left + offset, 4.25 + offset), width, 0.9,
                                      boxstyle="round,pad=0,rounding_size=0.12",
                                      facecolor=COLOURS["attention"], edgecolor="#333333",
                                      linewidth=1.0, zorder=1.5))
    d.box(left + width / 2, 4.7, width, 0.9,
          "Scaled dot-product attention, one per head (H in parallel)", "attention")
    d.box(4.4, 6.35, 2.6, 0.7, "concatenate heads", "dropout")
    d.arrow((4.4, 5.15), (4.4, 6.0), label="(N, H, L, E/H)", label_offset=(0.12, 0.08))
    d.box(4.4, 7.5, 2.6, 0.7, "Linear out_proj", "linear")
    d.arrow((4.4, 6.7), (4.4, 7.15), label="(N, L, E)", label_offset=(0.12, 0.0))
    d.arrow((4.4, 7.85), (4.4, 8.3))
    d.label(4.55, 8.3, "output (N, L, E)", ha="left")
    d.save(path)


def _self_attention_block(d: Diagram, x: float, bottom: float, residual_x: float) -> float:
    """LayerNorm -> multi-head attention (q = k = v) -> Dropout -> (+) with the residual.

    The input arrives at (x, bottom); masks enter and attention weights leave on the left. The
    block is 4.6 units tall: returns the y of the adder, where the output leaves upwards.
    """
    branch = bottom + 0.3
    d.dot(x, branch)
    d.box(x, bottom + 1.0, 2.2, 0.6, "LayerNorm  (norm)", "norm")
    d.arrow((x, bottom), (x, bottom + 0.7))
    mha_y = bottom + 2.45
    d.box(x, mha_y, 2.2, 1.0, "Multi-Head\nAttention  (mha)", "attention")
    split = bottom + 1.55
    d.line((x, bottom + 1.3), (x, split))
    d.dot(x, split)
    for dx, letter in ((-0.6, "Q"), (0.0, "K"), (0.6, "V")):
        corner = [(x + dx, split)] if dx else []
        d.arrow((x, split), *corner, (x + dx, mha_y - 0.5))
        d.label(x + dx + 0.08, (split + mha_y - 0.5) / 2 + 0.02, letter, fontsize=7, ha="left")
    edge = x - 1.1
    d.arrow((edge - 0.6, mha_y - 0.25), (edge, mha_y - 0.25))
    d.label(edge - 0.68, mha_y - 0.25, "key_padding_mask (N, T)\nattn_mask (T, T)", ha="right",
            fontsize=7.5)
    d.arrow((edge, mha_y + 0.25), (edge - 0.6, mha_y + 0.25))
    d.label(edge - 0.68, mha_y + 0.3, "attn_weights (N, T, T)", ha="right", fontsize=7.5)
    d.box(x, mha_y + 1.35, 2.2, 0.6, "Dropout  (dropout)", "dropout")
    d.arrow((x, mha_y + 0.5), (x, mha_y + 1.05))
    adder_y = mha_y + 2.15
    d.adder(x, adder_y)
    d.arrow((x, mha_y + 1.65), (x, adder_y - 0.2))
    d.arrow((x, branch), (residual_x, branch), (residual_x, adder_y), (x + 0.2, adder_y))
    d.label(residual_x + 0.12, (branch + adder_y) / 2, "residual", rotation=90, fontsize=7.5,
            ha="left")
    return adder_y


def _feed_forward_block(d: Diagram, x: float, bottom: float, residual_x: float,
                        detailed: bool) -> float:
    """LayerNorm -> ffn -> Dropout -> (+) with the residual; ``detailed`` draws ffn's four layers.

    The input arrives at (x, bottom). The block is 3.95 units tall (6.625 when detailed):
    returns the y of the adder.
    """
    branch = bottom + 0.3
    d.dot(x, branch)
    d.box(x, bottom + 1.0, 2.2, 0.6, "LayerNorm  (norm)", "norm")
    d.arrow((x, bottom), (x, bottom + 0.7))
    y = bottom + 1.3
    if detailed:
        steps = [("Linear  D → d_ff", "linear"), ("GELU", "activation"), ("Dropout", "dropout"),
                 ("Linear  d_ff → D", "linear")]
        frame_bottom = y + 0.25
        for index, (text, kind) in enumerate(steps):
            centre = frame_bottom + 0.6 + index * 0.95
            d.box(x, centre, 2.0, 0.55, text, kind, fontsize=8.5)
            d.arrow((x, y), (x, centre - 0.275))
            y = centre + 0.275
        frame_top = y + 0.45
        d.group(x - 1.3, frame_bottom, x + 1.3, frame_top, "ffn (nn.Sequential)")
        d.line((x, y), (x, frame_top))
        y = frame_top
    else:
        d.box(x, y + 0.9, 2.2, 0.6, "Feed-forward  (ffn)", "linear")
        d.arrow((x, y), (x, y + 0.6))
        y += 1.2
    d.box(x, y + 0.65, 2.2, 0.6, "Dropout  (dropout)", "dropout")
    d.arrow((x, y), (x, y + 0.35))
    adder_y = y + 1.45
    d.adder(x, adder_y)
    d.arrow((x, y + 0.95), (x, adder_y - 0.2))
    d.arrow((x, branch), (residual_x, branch), (residual_x, adder_y), (x + 0.2, adder_y))
    d.label(residual_x + 0.12, (branch + adder_y) / 2, "residual", rotation=90, fontsize=7.5,
            ha="left")
    return adder_y


def draw_self_attention_layer(path: Path) -> None:
    d = Diagram(7.0, 7.0, "SelfAttentionLayer (pre-norm)")
    x = 4.4
    d.label(x, 0.3, "x (N, T, D)")
    top = _self_attention_block(d, x=x, bottom=0.55, residual_x=6.2)
    d.arrow((x, top + 0.2), (x, top + 0.7))
    d.label(x - 0.5, top + 0.9, "x + Dropout(mha(norm(x)))   (N, T, D)")
    d.save(path)


def draw_feed_forward_layer(path: Path) -> None:
    d = Diagram(5.4, 9.6, "FeedForwardLayer (pre-norm)")
    x = 2.4
    d.label(x, 0.3, "x (N, T, D)")
    top = _feed_forward_block(d, x=x, bottom=0.55, residual_x=4.3, detailed=True)
    d.arrow((x, top + 0.2), (x, top + 0.7))
    d.label(2.7, top + 0.9, "x + Dropout(ffn(norm(x)))   (N, T, D)")
    d.save(path)


def draw_decoder_layer(path: Path) -> None:
    d = Diagram(7.2, 12.0, "SelfAttentionDecoderLayer")
    x, residual_x = 4.4, 6.2
    d.label(x, 0.3, "x (N, T, D)")
    top = _self_attention_block(d, x=x, bottom=0.55, residual_x=residual_x)
    d.group(0.1, 0.65, 7.1, top + 0.45, "self_attn: SelfAttentionLayer", label_side="left")
    ffn_bottom = top + 0.8
    d.line((x, top + 0.2), (x, ffn_bottom))
    top = _feed_forward_block(d, x=x, bottom=ffn_bottom, residual_x=residual_x, detailed=False)
    d.group(0.1, ffn_bottom + 0.1, 7.1, top + 0.45, "ffn: FeedForwardLayer", label_side="left")
    d.arrow((x, top + 0.2), (x, top + 1.0))
    d.label(x, top + 1.25, "x (N, T, D),  attn_weights (N, T, T)")
    d.save(path)


def draw_decoder_only_transformer(path: Path) -> None:
    d = Diagram(8.8, 12.0, "DecoderOnlyTransformer")
    x = 4.1
    d.label(x, 0.35, "padded_targets (N, T) token ids,  target_lengths (N,)")
    d.box(x, 1.5, 2.8, 0.7, "Embedding\n(target_embedding)", "embedding", fontsize=8.5)
    d.arrow((x, 0.6), (x, 1.15))
    d.adder(x, 2.6)
    d.arrow((x, 1.85), (x, 2.4), label="(N, T, D)", label_offset=(0.12, 0.0))
    d.box(1.75, 2.6, 2.0, 0.7, "PositionalEncoding\npe[:, :T]", "embedding", fontsize=8)
    d.arrow((2.75, 2.6), (x - 0.2, 2.6))
    d.box(x, 3.55, 2.8, 0.6, "Dropout  (dropout)", "dropout")
    d.arrow((x, 2.8), (x, 3.25))
    # The stack of decoder layers, drawn as one box with a shadow copy behind it.
    stack_bottom, stack_height = 4.6, 2.4
    d.ax.add_patch(FancyBboxPatch((x - 1.4 + 0.18, stack_bottom + 0.18), 2.8, stack_height,
                                  boxstyle="round,pad=0,rounding_size=0.12",
                                  facecolor=COLOURS["attention"], edgecolor="#333333",
                                  linewidth=1.0, zorder=1.5))
    d.box(x, stack_bottom + stack_height / 2, 2.8, stack_height,
          "SelfAttentionDecoderLayer\n\nmasked self-attention\n+ feed-forward\n\n"
          "× num_layers  (dec_layers)", "attention", fontsize=8.5)
    d.arrow((x, 3.85), (x, stack_bottom))
    masks_x = 7.2
    d.label(masks_x, 3.9, "masks:\nCausalMask (T, T)\nPadMask (N, T)", fontsize=7.5)
    d.arrow((masks_x, 4.35), (masks_x, 5.15), (x + 1.58, 5.15))
    d.arrow((x + 1.58, 6.65), (masks_x, 6.65), (masks_x, 7.35))
    d.label(masks_x, 7.85, "attention weights:\n{'layer1_dec_self':\n(N, T, T), ...}", fontsize=7.5)
    d.box(x, 8.3, 2.8, 0.6, "LayerNorm  (norm)", "norm")
    d.arrow((x, stack_bottom + stack_height), (x, 8.0), label="(N, T, D)", label_offset=(0.12, 0.0))
    d.box(x, 9.55, 2.8, 0.7, "Linear  (final_linear)\nD → num_classes", "linear", fontsize=8.5)
    d.arrow((x, 8.6), (x, 9.2))
    d.arrow((x, 9.9), (x, 10.8))
    d.label(x, 11.05, "logits (N, T, num_classes)")
    # weight_tying: one (num_classes, D) matrix shared by the first and the last layer.
    d.line((x - 1.4, 1.5), (0.35, 1.5), (0.35, 9.55), (x - 1.4, 9.55), dashed=True)
    d.label(0.55, 6.0, "weight_tying: one shared (num_classes, D) matrix", rotation=90,
            fontsize=7.5, color="#444444")
    d.save(path)


FIGURES = {
    "sdpa.png": draw_sdpa,
    "mha.png": draw_mha,
    "selfattnlayer.png": draw_self_attention_layer,
    "ffnlayer.png": draw_feed_forward_layer,
    "decselfattnlayer.png": draw_decoder_layer,
    "transf-dec-only.png": draw_decoder_only_transformer,
}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Draw the diagrams in figures/.")
    parser.add_argument("--out", type=Path, default=FIGURES_DIR, help="output directory (default figures/)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, draw in FIGURES.items():
        draw(args.out / name)
        print(f"wrote {args.out / name}")


if __name__ == "__main__":
    main()
