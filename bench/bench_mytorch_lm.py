"""The numpy twin of the whole model against PyTorch on the CPU, float32: forward, and forward +
backward, of the default model (configs/default.yaml, 1k vocabulary) on a batch of 32 x 200 tokens.

Both sides hold the same weights (torch's initialisation, seed 0) and run alternately in one
process (``best_times`` of bench_mytorch: the fastest of a few rounds per side). torch runs its
forward in eval mode under ``no_grad``; its forward + backward is an autograd step of the summed
logits, the numpy one ``forward`` then ``backward`` of the same upstream gradient. The ratio
numpy / torch is what to read (aim: forward within 2x); see bench_mytorch on thread counts and load.

    make bench BENCH=bench_mytorch_lm
"""
import os

import numpy as np
import torch

from bench.bench_model import CONFIG, vocab_size
from bench.bench_mytorch import best_times
from hw4lib.config import load_config
from hw4lib.model import DecoderOnlyTransformer
from hw4lib.numpy_twin import numpy_model_from_state

BATCH, LENGTH = 32, 200


def main() -> None:
    model_config = load_config(CONFIG).model.model_dump()
    torch.manual_seed(0)
    model = DecoderOnlyTransformer(**model_config, num_classes=vocab_size()).eval()
    twin = numpy_model_from_state(model_config, model.state_dict(), np.float32)
    tokens = torch.randint(0, model.num_classes, (BATCH, LENGTH), generator=torch.Generator().manual_seed(0))
    tokens_np = tokens.numpy()
    upstream = np.ones((BATCH, LENGTH, model.num_classes), dtype=np.float32)

    def torch_forward():
        with torch.no_grad():
            model(tokens)

    def torch_step():
        model.zero_grad(set_to_none=True)
        logits, _ = model(tokens)
        logits.sum().backward()

    def numpy_step():
        twin.forward(tokens_np)
        twin.backward(upstream)

    print(f"default model ({sum(p.numel() for p in model.parameters()):,} parameters), float32, "
          f"batch {BATCH} x {LENGTH}; torch threads {torch.get_num_threads()}, "
          f"OPENBLAS_NUM_THREADS {os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'pass':<18} {'numpy s':>8} {'torch s':>8} {'ratio':>6}")
    for name, mine, theirs in (("forward", lambda: twin.forward(tokens_np), torch_forward),
                               ("forward+backward", numpy_step, torch_step)):
        numpy_s, torch_s = best_times(mine, theirs)
        print(f"{name:<18} {numpy_s:>8.3f} {torch_s:>8.3f} {numpy_s / torch_s:>6.2f}", flush=True)


if __name__ == "__main__":
    main()
