"""Text views of a plan: the Design Decisions table and the memory estimate."""

from __future__ import annotations

from . import rules
from .flops import train_flops_per_token
from .memory import loader_bytes
from .plan import Plan, memory_table


def decisions_table(plan: Plan) -> str:
    lines = ["| Decision | Choice | Rationale |", "|----------|--------|-----------|"]
    for row in plan.rows:
        choice = row.choice if row.suggested is None else f"{row.choice} (rule: {row.suggested})"
        lines.append(f"| {row.decision} | {choice} | {row.rationale} |")
    return "\n".join(lines)


def memory_report(plan: Plan) -> str:
    a = plan.answers
    cap = rules.capacity_bytes(a)
    budget = "no fixed budget (CPU)" if cap is None else f"{cap / 1e9:.1f} GB usable per device"
    chosen = rules.memory_for(a, a["parallelism"], a["activation_checkpointing"])
    copies = (
        f"autocast weight copies {chosen.weight_copy_bytes / 1e9:.1f} + "
        if chosen.weight_copy_bytes
        else ""
    )
    gathered = (
        f" + FSDP2's unsharded weights {chosen.unsharded_bytes / 1e9:.1f}"
        if chosen.unsharded_bytes
        else ""
    )
    lines = [
        f"Model: {plan.params / 1e6:,.1f}M parameters, seq_len {a['seq_len']}, "
        f"{a['batch_size']} sequences per device, {rules.world_size(a)} device(s) on "
        f"{a['accelerator']} ({budget}).",
        f"Training FLOPs per token: {train_flops_per_token(rules.shape_of(a), a['seq_len'], a['window_size']) / 1e9:.3f} G "
        "(6 per matmul weight + the attention score matmuls, causal half not discounted).",
        f"Chosen layout {a['parallelism']} + {a['activation_checkpointing']} checkpointing: "
        f"{chosen.total_gb:.1f} GB per device = state {chosen.state_bytes / 1e9:.1f} + "
        f"activations {chosen.activation_bytes / 1e9:.1f} + {copies}logits "
        f"{chosen.logit_bytes / 1e9:.1f}{gathered}.",
        f"Host memory per rank for the data loader's batches: {_host_loader(a)} "
        "(data.num_workers x data.prefetch_factor batches; 0 workers build one at a time).",
        "",
        "| Parallelism | Checkpointing | GB per device | Fits |",
        "|-------------|---------------|---------------|------|",
    ]
    for parallelism, ac, gb, ok in memory_table(a):
        lines.append(f"| {parallelism} | {ac} | {gb:.1f} | {'yes' if ok else 'no'} |")
    return "\n".join(lines)


def plan_text(plan: Plan) -> str:
    parts = [
        "## Design Decisions",
        "",
        decisions_table(plan),
        "",
        "## Memory estimate",
        "",
        memory_report(plan),
    ]
    if plan.reasons:
        parts += ["", "## Why the rules pick what they pick", ""]
        parts += [f"- {decision}: {why}" for decision, why in plan.reasons]
    if plan.notes:
        parts += ["", "## Notes", "", *(f"- {note}" for note in plan.notes)]
    return "\n".join(parts) + "\n"


def _host_loader(a: dict) -> str:
    """The DataLoader's batches in host memory at the rendered defaults, on one rank."""
    pinned = a["accelerator"] != "cpu"
    nbytes = loader_bytes(a["batch_size"], a["seq_len"], pinned=pinned, shape=rules.shape_of(a))
    return f"{nbytes / 1e6:.2f} MB" + (", page-locked copies included" if pinned else "")
