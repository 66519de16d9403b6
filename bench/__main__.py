"""Run every benchmark module in this package and print its measurements.

Each ``bench/bench_<area>.py`` defines ``main()`` that prints its own table. Ratios are measured in
one run on the same machine, so they stay meaningful on a shared, noisy computer.
"""
import importlib
import pkgutil
import sys
import time
from pathlib import Path


def main(selected: list[str]) -> None:
    names = sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)])
                   if m.name.startswith("bench_"))
    if selected:
        names = [n for n in names if any(s in n for s in selected)]
    for name in names:
        print(f"\n=== {name} ===", flush=True)
        start = time.perf_counter()
        importlib.import_module(f"bench.{name}").main()
        print(f"({name} took {time.perf_counter() - start:.1f}s)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
