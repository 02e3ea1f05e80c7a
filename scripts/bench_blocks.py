"""Training speed of the default blocks against GPT-2-style blocks, eager and compiled.

Renders two projects from this checkout: the default answers (SwiGLU, RMSNorm, RoPE,
grouped-query attention) and GPT-2's blocks (GELU MLP, LayerNorm, learned positions,
multi-head attention). Both packages are imported into this one process and their training
steps alternate, one step each in turn, through each project's own bench (``TimedRun``), so
that a slow spell of a shared machine falls on both. Each pair builds both trainings afresh;
the figure is the default blocks' achieved FLOP/s over GPT-2's, with the FLOPs each project
counts for its own model. It also prints each project's compiled over eager rate.

    python scripts/bench_blocks.py [--pairs 3] [--steps 10]

Shape (the same for both): d=256, 4 layers, 4 heads, seq 256, batch 8, vocabulary 512, fp32,
on the CPU; each keeps its preset's FFN width and K/V heads.
"""

import argparse
import importlib
import statistics
import sys
import tempfile
from pathlib import Path

import copier

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {
    "default": {},
    "gpt2": {"ffn": "gelu", "norm": "layernorm", "position": "learned", "attention": "mha"},
}
SHAPE = [
    "model.dim=256",
    "model.n_layers=4",
    "model.n_heads=4",
    "model.vocab_size=512",
    "model.max_seq_len=256",
    "train.seq_len=256",
    "train.batch_size=8",
    "train.grad_accum_steps=1",
    "train.device=cpu",
    "train.precision=fp32",
    "bench.warmup=3",
]


def render(name: str, answers: dict[str, str], parent: Path):
    """Render ``answers`` as package ``blocks_NAME``; returns its load_config and TimedRun."""
    package = f"blocks_{name}"
    dest = parent / package
    data = {"project_name": package, **answers}
    copier.run_copy(
        str(ROOT), str(dest), data=data, defaults=True, unsafe=True, vcs_ref="HEAD", quiet=True
    )
    sys.path.insert(0, str(dest / "src"))
    config = importlib.import_module(f"{package}.config")
    bench = importlib.import_module(f"{package}.perf.bench")
    return config.load_config, bench.TimedRun


def pair(projects: dict, overrides: list[str], steps: int) -> dict[str, float]:
    """Achieved TFLOP/s of each project, their steps alternating in one process."""
    runs = {name: timed.start(load(None, overrides)) for name, (load, timed) in projects.items()}
    for _ in range(steps):
        for run in runs.values():
            run.step()
    return {name: run.result()["achieved_tflops"] for name, run in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        projects = {name: render(name, answers, Path(tmp)) for name, answers in VARIANTS.items()}
        rates = {}
        for mode in ("none", "default"):
            overrides = [*SHAPE, f"train.compile={mode}"]
            rates[mode] = [pair(projects, overrides, args.steps) for _ in range(args.pairs)]
            for i, r in enumerate(rates[mode], 1):
                print(
                    f"compile={mode:7s} pair {i}: default {r['default']:.4f} TFLOP/s, "
                    f"gpt2 {r['gpt2']:.4f}, default/gpt2 {r['default'] / r['gpt2']:.3f}",
                    flush=True,
                )
        for mode, pairs in rates.items():
            ratios = [r["default"] / r["gpt2"] for r in pairs]
            print(f"default/gpt2, compile={mode}: median {statistics.median(ratios):.3f}")
        for name in VARIANTS:
            eager = statistics.median(r[name] for r in rates["none"])
            compiled = statistics.median(r[name] for r in rates["default"])
            print(f"{name}: compiled/eager {compiled / eager:.3f} (medians of the pairs)")


if __name__ == "__main__":
    main()
