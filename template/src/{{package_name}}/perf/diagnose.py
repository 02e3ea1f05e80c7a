"""Bottleneck diagnosis: the four-question checklist, then what to change first.

The checklist runs top to bottom and stops at the first yes, because each bottleneck hides
the ones below it: a device that waits for data shows poor MFU whatever the kernels do.

1. Waiting for the batch > 20% of the step? -> data loading
   else device busy < 80% of the step?      -> launch overhead (the host is the bottleneck)
2. Peak memory > 90% of the device?          -> activation / gradient memory
3. MFU < 40%?                                -> kernel efficiency
4. Collectives > 15% of the step?            -> communication (multi-device runs only)
otherwise the run is compute-bound: scale out.

Step 1 asks why the device idles, from what was measured: the time each step waits for its
batch. A GPU that idles without waiting for data (a small model, typically) waits for the
host to launch its next kernel, which CUDA graphs, compilation or more work per kernel
answer and better data loading does not. On a CPU the host is the device: it idles only
while waiting for data.

Two checks still count below the first yes, as nothing above them hides what they measure
(``Diagnosis.also``): a memory peak is a peak whatever the time goes to, and waiting for
data or slow kernels only shrink the collectives' share of the step.

``recommend`` turns the diagnosis into at most three changes for *this* run: the fixes for
the bottleneck found, then those for the checks in ``also``, leaving out whatever the run
already does (bf16 when it trains in bf16, compile when it compiles). Nothing else fills
the list, as a fix for a check that did not fire is no advice, and fewer than three is the
honest answer when fewer apply. Memory in particular is only saved when it is short, past
the memory check's threshold or out of memory: checkpointing costs recomputation, sharding
and smaller batches cost throughput, for nothing while memory is left; and while it is
short, nothing that needs more of it (larger batches) is suggested.
"""

from dataclasses import dataclass, replace

UTILISATION_MIN = 0.80
DATA_WAIT_MAX = 1 - UTILISATION_MIN  # a step waiting longer cannot keep the device that busy
MEMORY_MAX = 0.90
MFU_MIN = 0.40
COMMUNICATION_MAX = 0.15

DATA, LAUNCH, MEMORY, KERNELS, COMMUNICATION, COMPUTE = (
    "data loading",
    "launch overhead (host-bound)",
    "activation/gradient memory",
    "kernel efficiency",
    "communication",
    "compute-bound",
)
BOTTLENECKS = (DATA, LAUNCH, MEMORY, KERNELS, COMMUNICATION, COMPUTE)
FP8_ACCELERATORS = ("h100", "h200", "b200")


def percent(value: float, digits: int = 0) -> str:
    """``0.8`` -> ``"80%"``."""
    return format(value, f".{digits}%")


@dataclass(frozen=True)
class Metrics:
    """What a profile measured. ``None``: not measured (e.g. no collectives in one process)."""

    utilisation: float  # share of the step the device is busy (a CPU: computing the step)
    data_fraction: float  # share of the step spent waiting for the next batch
    memory_fraction: float | None  # peak memory / the device's memory
    mfu: float | None
    communication_fraction: float | None = None  # share of the step inside collectives
    out_of_memory: bool = False


@dataclass(frozen=True)
class Diagnosis:
    step: int  # 1-4, or 5 for compute-bound (step 1: data loading or launch overhead)
    bottleneck: str
    evidence: str
    also: tuple[str, ...] = ()  # lower checks that fire too and that the first one does not hide


@dataclass(frozen=True)
class Setup:
    """The parts of the run a recommendation depends on."""

    device: str  # "cpu" or "cuda"
    accelerator: str | None  # "a100", "h100", ... (None: CPU or not in the table)
    precision: str
    compile: str
    activation_checkpointing: str
    parallelism: str
    world_size: int
    tokens_per_device: int  # batch x sequence length in one step on one device
    fp8_rendered: bool  # whether this project carries the float8 training path
    other_ops_fraction: float | None = None  # of the step outside matmuls and attention, profiled
    num_workers: int = 0  # the [data] loader's
    prefetch_factor: int = 2
    pin_memory: bool = True
    tp: int = 1  # [parallel] tp: ranks that split every layer
    dp_replicate: int = 1  # [parallel] dp_replicate: copies of the model state
    ranks_per_node: int = 1  # torchrun's LOCAL_WORLD_SIZE
    pp: int = 1  # [parallel] pp: pipeline stages
    pp_microbatches: int = 1  # [parallel] pp_microbatches
    pp_bubble: float = 0.0  # the share of a step a pipeline stage idles, filling and draining


@dataclass(frozen=True)
class Recommendation:
    what: str
    impact: str
    how: str


def memory_short(m: Metrics) -> bool:
    return m.out_of_memory or (m.memory_fraction is not None and m.memory_fraction > MEMORY_MAX)


def communication_heavy(m: Metrics) -> bool:
    return m.communication_fraction is not None and m.communication_fraction > COMMUNICATION_MAX


def diagnose(m: Metrics) -> Diagnosis:
    """The first check that fires, and the lower ones that fire too and that it cannot hide."""
    diagnosis = _first_check(m)
    standing = {MEMORY: memory_short(m), COMMUNICATION: communication_heavy(m)}
    also = tuple(b for b, fires in standing.items() if fires and b != diagnosis.bottleneck)
    return replace(diagnosis, also=also)


def _first_check(m: Metrics) -> Diagnosis:
    if m.data_fraction > DATA_WAIT_MAX:
        return Diagnosis(
            1,
            DATA,
            f"the step waits {percent(m.data_fraction)} of its time for the next batch "
            f"(> {percent(DATA_WAIT_MAX)})",
        )
    if m.utilisation < UTILISATION_MIN:
        return Diagnosis(
            1,
            LAUNCH,
            f"the device is busy {percent(m.utilisation)} of the step "
            f"(< {percent(UTILISATION_MIN)}) and waits for data {percent(m.data_fraction)} of "
            "it: it idles between kernels while the host launches the next",
        )
    if memory_short(m):
        used = "out of memory" if m.out_of_memory else f"{percent(m.memory_fraction)} of the device"
        return Diagnosis(2, MEMORY, f"peak memory is {used} (> {percent(MEMORY_MAX)})")
    if m.mfu is not None and m.mfu < MFU_MIN:
        return Diagnosis(
            3,
            KERNELS,
            f"MFU is {percent(m.mfu, 1)} (< {percent(MFU_MIN)}): "
            "the kernels reach a small share of the peak",
        )
    if communication_heavy(m):
        return Diagnosis(
            4,
            COMMUNICATION,
            f"collectives take {percent(m.communication_fraction)} of the step "
            f"(> {percent(COMMUNICATION_MAX)})",
        )
    mfu = "unknown" if m.mfu is None else f"{percent(m.mfu, 1)}"
    return Diagnosis(
        5, COMPUTE, f"no check fired (utilisation {percent(m.utilisation)}, MFU {mfu})"
    )


def _data_fixes(s: Setup) -> list[Recommendation]:
    """The [data] loader's settings that hide the wait for a batch, from the run's own."""
    if s.num_workers == 0:
        fixes = [
            Recommendation(
                "Build batches in DataLoader worker processes, ahead of the step",
                "the next batch is ready when the step ends, instead of built after it",
                "data.num_workers=2",
            )
        ]
    else:
        fixes = [
            Recommendation(
                "More DataLoader workers",
                "batches are built in parallel, as many at once as there are workers",
                f"data.num_workers={2 * s.num_workers}",
            ),
            Recommendation(
                "Keep more batches ready per worker",
                "a slow read is absorbed by the batches already waiting",
                f"data.prefetch_factor={2 * s.prefetch_factor}",
            ),
        ]
    if s.device == "cuda" and not s.pin_memory:
        fixes.append(
            Recommendation(
                "Page-locked batches",
                "the copy to the GPU runs asynchronously, beside the step",
                "data.pin_memory=true",
            )
        )
    return fixes


def _fixes(s: Setup, memory_is_short: bool) -> dict[str, list[Recommendation]]:
    """The fixes that apply to this run, by the bottleneck they address, in order of payoff."""
    low_precision = s.precision in ("bf16", "fp16", "fp8")
    family = s.accelerator.split()[0] if s.accelerator else None  # "h100 pcie" is an H100
    out: dict[str, list[Recommendation]] = {key: [] for key in BOTTLENECKS}

    out[DATA] = _data_fixes(s)

    if s.compile != "max-autotune" and s.device == "cuda":
        out[LAUNCH].append(
            Recommendation(
                "CUDA graphs: max-autotune compilation replays each block's kernels as one graph",
                "one launch per block instead of one per kernel: the idle gaps close",
                "train.compile=max-autotune",
            )
        )
    if s.compile == "none":
        out[LAUNCH].append(
            Recommendation(
                "torch.compile each block",
                "fused elementwise kernels: fewer launches per step, a faster compile than "
                "max-autotune",
                "train.compile=default",
            )
        )
    if not memory_is_short:
        out[LAUNCH].append(
            Recommendation(
                "More work per kernel: a larger batch or longer sequences",
                "the same launches drive more tokens, so launch time becomes a smaller share",
                "train.batch_size or train.seq_len",
            )
        )

    if not low_precision:
        out[MEMORY].append(
            Recommendation("bf16 autocast", "~50% of the activation memory", "train.precision=bf16")
        )
    if s.activation_checkpointing != "full":
        step = "full" if s.activation_checkpointing == "selective" else "selective"
        impact = (
            "~60-70% less activation memory, ~30% slower steps"
            if step == "full"
            else "about half the activation memory, ~15% slower steps"
        )
        out[MEMORY].append(
            Recommendation(
                f"{step.capitalize()} activation checkpointing",
                impact,
                f"train.activation_checkpointing={step}",
            )
        )
    if not s.parallelism.startswith("fsdp2") and (s.world_size > 1 or s.device == "cuda"):
        out[MEMORY].append(
            Recommendation(
                "FSDP2: shard weights, gradients and optimizer state over the ranks",
                "model state per device divided by the number of ranks",
                "tmd update --data parallelism=fsdp2",
            )
        )
    out[MEMORY].append(
        Recommendation(
            "Fewer sequences per step",
            "activation and logit memory shrink with the batch; more steps for the same tokens",
            "a lower train.batch_size",
        )
    )

    if s.compile == "none":
        impact = "10-40% faster steps typically: fused elementwise kernels, fewer launches"
        if s.other_ops_fraction is not None:
            impact = (
                "fused elementwise kernels and fewer launches shrink the "
                f"{percent(s.other_ops_fraction)} of the step spent outside matmuls and attention"
            )
        out[KERNELS].append(
            Recommendation("torch.compile each block", impact, "train.compile=default")
        )
    elif s.compile == "default" and s.device == "cuda":
        out[KERNELS].append(
            Recommendation(
                "max-autotune compilation",
                "autotuned matmul tiles and CUDA graphs: fewer launch gaps",
                "train.compile=max-autotune",
            )
        )
    # Cheaper arithmetic: faster kernels, and more work per second once they are efficient.
    arithmetic = []
    if s.device == "cuda" and not low_precision:
        arithmetic.append(
            Recommendation(
                "bf16, which lets SDPA dispatch to FlashAttention",
                "2-4x faster attention with memory linear in sequence length, 2x TF32's matmuls",
                "train.precision=bf16",
            )
        )
    if family in FP8_ACCELERATORS and s.precision != "fp8":
        how = "train.precision=fp8" if s.fp8_rendered else "tmd update --data precision=fp8"
        arithmetic.append(
            Recommendation("fp8 matmuls (torchao float8)", "~2x matmul throughput vs bf16", how)
        )
    out[KERNELS] += arithmetic
    if s.tokens_per_device < 16384 and not memory_is_short:
        out[KERNELS].append(
            Recommendation(
                "Larger steps: more tokens per device",
                f"{s.tokens_per_device} tokens per step leave matmuls too small to fill the device",
                "train.batch_size or train.seq_len",
            )
        )
    out[KERNELS].append(
        Recommendation(
            "Find the ops far below the roof in the top kernels and the roofline below",
            "names what to fuse, reshape or replace next",
            "reports/trace*.json in Perfetto (ui.perfetto.dev)",
        )
    )

    if s.tp > 1:
        out[COMMUNICATION].append(
            Recommendation(
                "Fewer tensor-parallel ranks",
                f"every layer gathers and reduce-scatters its activations over the {s.tp} tp "
                "ranks, forward and backward: half the ranks, half that traffic, and FSDP2 "
                "shards what they no longer split",
                f"parallel.tp={s.tp // 2}",
            )
        )
    if s.pp > 1 and s.pp_bubble > 0.05:
        out[COMMUNICATION].append(
            Recommendation(
                "More micro-batches per pipeline step",
                f"each of the {s.pp} stages idles {round(100 * s.pp_bubble)}% of a step while the "
                f"pipeline fills and drains, waiting on its neighbours' sends: twice the "
                "micro-batches, about half that",
                f"parallel.pp_microbatches={2 * s.pp_microbatches} (train.batch_size to match), "
                "or parallel.pp_schedule=Interleaved1F1B",
            )
        )
    nodes = s.world_size // max(1, s.ranks_per_node)
    if s.parallelism.startswith("fsdp2") and nodes > 1 and s.dp_replicate == 1:
        out[COMMUNICATION].append(
            Recommendation(
                "Shard within a node, replicate across nodes (HSDP)",
                "every block's all-gather and reduce-scatter stay on a node's NVLink; only the "
                "gradients cross the network, once per step, for a node's share of the state "
                "per GPU",
                f"parallel.dp_replicate={nodes}",
            )
        )
    if s.world_size > 1:
        out[COMMUNICATION].append(
            Recommendation(
                "Overlap collectives with compute and find exposed ones in the trace",
                "communication hidden behind the next block's compute",
                "reports/trace*.json: look for NCCL kernels with idle compute streams",
            )
        )
        if not memory_is_short:
            out[COMMUNICATION].append(
                Recommendation(
                    "More tokens per rank between synchronisations",
                    "the same bytes communicated for more work",
                    "train.batch_size",
                )
            )
        out[COMMUNICATION].append(
            Recommendation(
                "Check the interconnect and NCCL settings",
                "NVLink moves an order of magnitude more than PCIe",
                "nvidia-smi topo -m; NCCL_DEBUG=INFO",
            )
        )

    if s.device == "cuda":
        out[COMPUTE] = [
            Recommendation(
                "Scale out with more devices",
                "throughput grows with data-parallel ranks while the step stays compute-bound",
                "launch/ (torchrun --nproc-per-node)",
            ),
            *arithmetic,
        ]
    else:  # more processes on one CPU only share its cores
        out[COMPUTE].append(
            Recommendation(
                "Train on a GPU: the same project runs there unchanged",
                "tensor-core matmuls and fused attention, orders of magnitude past a CPU",
                "train.device=cuda (launch/ for several GPUs)",
            )
        )
    return out


def recommend(diagnosis: Diagnosis, setup: Setup, count: int = 3) -> list[Recommendation]:
    """At most ``count`` changes: the bottleneck's own fixes, then those of ``diagnosis.also``."""
    found = (diagnosis.bottleneck, *diagnosis.also)
    fixes = _fixes(setup, memory_is_short=MEMORY in found)
    picked: list[Recommendation] = []
    for key in found:
        for rec in fixes[key]:
            if all(rec.how != p.how for p in picked):
                picked.append(rec)
    return picked[:count]
