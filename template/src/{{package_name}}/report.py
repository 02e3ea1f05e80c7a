"""``reports/profile.md``: a ``ProfileResult`` in the Profiling Report format.

The format's own sections come first: the bottleneck from the checklist, the component
table (params, FLOPs per sample, peak memory), MFU against its target, and the top-3
optimizations. The evidence behind them follows: the checklist's figures, memory estimate
beside measurement, the top kernels and the roofline.
"""

from .diagnose import COMMUNICATION_MAX, MEMORY_MAX, MFU_MIN, UTILISATION_MIN, percent
from .profiling import ProfileResult

MFU_TARGET = 0.50  # large models on modern GPUs; tiny ones on a CPU land far below


def human_bytes(n: float | None) -> str:
    if n is None:
        return "not measured"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def human_count(n: float) -> str:
    for unit, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.2f}{unit}"
    return f"{n:.0f}"


def _percent(value: float | None) -> str:
    return "n/a" if value is None else percent(value, 1)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("-" * (len(h) + 2) for h in header) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def _checklist(r: ProfileResult) -> list[str]:
    m = r.metrics
    comm = (
        "n/a (one process)"
        if m.communication_fraction is None
        else _percent(m.communication_fraction)
    )
    rows = [
        [
            "1",
            "device busy",
            _percent(m.utilisation),
            f"< {percent(UTILISATION_MIN)}",
            "data loading",
        ],
        [
            "2",
            "peak memory / device",
            _percent(m.memory_fraction),
            f"> {percent(MEMORY_MAX)}",
            "activation/gradient memory",
        ],
        ["3", "MFU", _percent(m.mfu), f"< {percent(MFU_MIN)}", "kernel efficiency"],
        ["4", "collectives / step", comm, f"> {percent(COMMUNICATION_MAX)}", "communication"],
    ]
    for row in rows:
        row.append("**fired**" if int(row[0]) == r.diagnosis.step else "")
    return _table(["Step", "Check", "Measured", "Fires when", "Bottleneck", ""], rows)


def _components(r: ProfileResult) -> list[str]:
    rows = [
        [
            c.name,
            human_count(c.params),
            human_count(c.flops_per_sample),
            human_bytes(c.memory_bytes),
        ]
        for c in r.components
    ]
    total_memory = (
        None
        if any(c.memory_bytes is None for c in r.components)
        else sum(c.memory_bytes or 0 for c in r.components)
    )
    rows.append(
        [
            "**total**",
            human_count(sum(c.params for c in r.components)),
            human_count(sum(c.flops_per_sample for c in r.components)),
            human_bytes(total_memory),
        ]
    )
    return _table(["Component", "Params", "FLOPs/sample", "Peak Memory"], rows)


def _memory(r: ProfileResult) -> list[str]:
    e, a, saved = r.estimate, r.allocated, r.saved_activations
    sequences = r.tokens_per_step // r.seq_len
    rows = [
        ["weights", human_bytes(e.weight_bytes), human_bytes(a["weights"])],
        ["gradients", human_bytes(e.grad_bytes), human_bytes(a["grads"])],
        ["optimizer state (AdamW)", human_bytes(e.optimizer_bytes), human_bytes(a["optimizer"])],
        [
            f"activations saved for backward, {sequences} sequence(s), no checkpointing",
            human_bytes(r.estimate_no_checkpointing),
            human_bytes(saved.batch_bytes(sequences)) if saved else "not measured",
        ],
        [
            "kept once per step (weight copies, position tables)",
            human_bytes(e.weight_copy_bytes + e.position_bytes),
            human_bytes(saved.step_bytes()) if saved else "not measured",
        ],
        [
            f"activations, checkpointing={r.activation_checkpointing}",
            human_bytes(e.activation_bytes),
            "",
        ],
        ["logits and their gradient", human_bytes(e.logit_bytes), ""],
        ["**peak**", human_bytes(e.total_bytes), human_bytes(r.peak_memory_bytes)],
    ]
    lines = _table(["Memory per device", "Estimate", "Measured"], rows)
    lines += [
        "",
        f"Measured peak from {r.peak_memory_source}, of {human_bytes(r.device_memory_bytes)} "
        "on the device. Weights, gradients and optimizer state are measured as the bytes of "
        "their storages; saved activations as the tensors autograd keeps in eager mode, at one "
        "and two sequences: the difference times the sequences per device, and what is left "
        "as the part a step keeps once (autocast's weight copies, position tables). The "
        "loss's saved log-softmax belongs to the logits row.",
    ]
    if r.memory_at_peak:
        parts = ", ".join(f"{k} {human_bytes(v)}" for k, v in r.memory_at_peak.items())
        lines += ["", f"At the peak: {parts}."]
    return lines


def _kernels(r: ProfileResult) -> list[str]:
    rows = [
        [f"`{k.name}`", str(k.calls), f"{k.ms_per_step:.2f}", percent(k.share, 1)]
        for k in r.kernels
    ]
    return _table(["Op / kernel", "Calls", "Self ms per step", "Share"], rows)


def _roofline(r: ProfileResult) -> list[str]:
    lines = []
    if "roofline" in r.files:
        lines += ["![roofline](roofline.png)", ""]
    if r.peak_tflops and r.bandwidth_tbps:
        ridge = r.peak_tflops / r.bandwidth_tbps
        lines += [
            f"Roofs: {r.peak_tflops:.3g} TFLOP/s compute, {r.bandwidth_tbps * 1e3:.0f} GB/s "
            f"memory; ridge at {ridge:.1f} FLOP/byte.",
            "",
        ]
    else:
        ridge = None
    rows = []
    for p in r.points[:10]:
        bound = "" if ridge is None else ("memory" if p.intensity < ridge else "compute")
        share = percent(p.tflops / r.peak_tflops) if r.peak_tflops else ""
        rows.append(
            [
                f"`{p.op}` {p.shape}",
                str(p.calls),
                f"{p.intensity:.1f}",
                f"{p.tflops * 1e3:.1f}",
                share,
                bound,
            ]
        )
    return lines + _table(["Matmul", "Calls", "FLOP/byte", "GFLOP/s", "Of peak", "Bound"], rows)


def render_report(r: ProfileResult) -> str:
    mfu = "n/a" if r.mfu is None else f"{r.mfu * 100:.1f}%"
    lines = [
        f"## Profile: {r.title}",
        "",
        f"{r.device}, {r.precision}, compile={r.compile}, "
        f"checkpointing={r.activation_checkpointing}, {r.world_size} device(s), "
        f"{r.tokens_per_step} tokens per step per device (seq_len {r.seq_len}).",
        "",
        f"### Bottleneck: {r.diagnosis.bottleneck}",
        "",
        f"Step {r.diagnosis.step} of the checklist: {r.diagnosis.evidence}.",
        "",
        *_checklist(r),
        "",
        *_components(r),
        "",
        "FLOPs/sample: training FLOPs (forward and backward, 3x the forward) of one sequence, "
        "from the analytic count in `flops.py`. Peak Memory: the component's model state "
        "(weights, gradients, AdamW moments) plus the activations it saves for the backward "
        "at this batch, measured.",
        "",
        f"### MFU: {mfu}  (target: >{percent(MFU_TARGET)} for large models)",
        "",
        f"{human_count(r.tokens_per_s)} tokens/s, {r.step_ms:.1f} ms per step "
        f"({r.data_ms:.1f} ms waiting for data); {human_count(r.flops_per_token)} training "
        f"FLOPs per token; {r.achieved_tflops * 1e3:.1f} GFLOP/s achieved per device against "
        + (
            f"a peak of {r.peak_tflops * 1e3:.1f} GFLOP/s ({r.peak_source})."
            if r.peak_tflops
            else "an unknown peak (set bench.peak_tflops)."
        ),
        "",
        "### Top-3 Optimizations",
        "",
        *(
            f"{i}. {rec.what} → {rec.impact} — `{rec.how}`"
            for i, rec in enumerate(r.recommendations, 1)
        ),
        "",
        "### Forward FLOPs per token",
        "",
        *_table(
            ["Component", "FLOPs", "Share"],
            [
                [key, human_count(v), percent(v / max(1, sum(r.forward_flops.values())), 1)]
                for key, v in r.forward_flops.items()
            ],
        ),
        "",
        "### Memory: estimate and measurement",
        "",
        *_memory(r),
        "",
        "### Top kernels",
        "",
        *_kernels(r),
        "",
        "### Roofline",
        "",
        *_roofline(r),
        "",
        "### Files",
        "",
        *(f"- {name}: `{path}`" for name, path in r.files.items()),
        *(f"- {note}" for note in r.notes),
        "",
    ]
    return "\n".join(lines)
