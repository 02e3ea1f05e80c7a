"""Why each choice: the Rationale column of the Design Decisions table, in one place.

The rendered DESIGN.md and `tmd plan` both read these texts (copier gets them as the computed
value `rationale`), so the table a person reads in the project is the one the engine wrote.
"""

from __future__ import annotations

CHOICE_RATIONALE: dict[str, dict[str, str]] = {
    "graph_mode": {
        "eager": "Eager: errors point at the failing line and every change runs at once; the "
        "right mode while the architecture moves or when control flow depends on the data.",
        "compile": "torch.compile fuses pointwise chains and removes Python overhead per step "
        "(10-40% typical) with a short first-step compile.",
        "max_autotune": "torch.compile(mode='max-autotune') also benchmarks kernel choices once; "
        "the longest compile, the fastest steps for a settled, production model.",
    },
    "tokenizer": {
        "byte": "Byte-level: the UTF-8 bytes are the ids, so any text encodes with 256 ids, no "
        "vocabulary file and no prepare step; sequences run about four times longer than a "
        "BPE's, and with no end-of-document token documents cannot be packed apart.",
        "bpe": "Byte-level BPE trained on your corpus by `prepare` (Hugging Face tokenizers), "
        "at vocab_size entries with an end-of-document token: about four times fewer tokens per "
        "word than bytes, and every string still round-trips. Its end token lets training pack "
        "documents into rows with attention kept within each (data.packing).",
        "file": "Your tokenizer file, read as it is: a Hugging Face tokenizer.json or a "
        "tiktoken BPE (Llama 3's tokenizer.model); `prepare` shards the corpus with it, and "
        "its end-of-document token lets training pack documents apart (data.packing).",
    },
    "attention": {
        "mha": "Multi-head attention: one K/V head per query head, the quality reference; the "
        "largest KV cache.",
        "gqa": "Grouped-query attention: K/V heads shared by groups of query heads cut the KV "
        "cache and its memory traffic by n_heads/n_kv_heads at nearly MHA quality.",
        "mqa": "Multi-query attention: one K/V head for all query heads, the smallest KV cache "
        "and fastest decode, at some cost in quality.",
        "sliding_window": "Sliding-window attention: each token sees a fixed window, so cost "
        "grows linearly with the sequence.",
        "mla": "Multi-head latent attention: K/V compressed into a small latent that the cache "
        "stores.",
        "ssm": "A selective state-space mixer (Mamba-style): a recurrence with input-dependent "
        "decay, linear in the sequence length and with a fixed-size state when decoding.",
    },
    "objective": {
        "supervised": "Supervised: the task's own loss on the labelled data, from initial weights.",
        "ssl": "Self-supervised pretraining, then fine-tuning: `pretrain` trains the backbone "
        "to reconstruct hidden patches of unlabelled data, and `finetune` trains the task from "
        "that backbone with a fresh head, on the labelled data.",
    },
    "position": {
        "rope": "RoPE rotates q and k by position: attention depends on relative offsets, "
        "nothing is added to the residual stream, and the base can be rescaled for longer "
        "contexts.",
        "alibi": "ALiBi adds a linear distance penalty per head; no position parameters.",
        "learned": "Learned absolute positions: simple, but fixed to the trained length.",
        "none": "No position encoding: the causal mask alone carries order.",
    },
    "norm": {
        "rmsnorm": "Pre-LN RMSNorm: normalising before each sub-layer keeps the residual path "
        "an identity, which keeps deep stacks trainable; RMSNorm drops the mean for speed.",
        "layernorm": "Pre-LN LayerNorm: the classic normaliser, with mean and bias.",
    },
    "ffn": {
        "swiglu": "SwiGLU: a gated hidden layer (three matrices; a hidden width near 8/3·dim "
        "matches a 4·dim MLP's parameters, larger presets go wider as Llama does) that trains "
        "to a lower loss than a GELU MLP.",
        "gelu": "GELU MLP: the classic two-matrix feed-forward.",
        "moe": "Sparse MoE: more parameters at the same compute per token, if the router "
        "stays balanced.",
    },
    "precision": {
        "fp32": "fp32 everywhere: exact, and the reference the tests compare against; right for "
        "CPU runs, slow on GPUs.",
        "bf16": "bf16 autocast: tensor-core matmuls and half the activation memory with fp32's "
        "exponent range, so no loss scaling; weights and optimizer state stay fp32.",
        "fp16": "fp16 autocast with a GradScaler: fp16's narrow exponent needs the loss scaled "
        "so small gradients do not flush to zero.",
        "fp8": "fp8 matmuls (torchao float8 training, tensorwise scaling) on Hopper or later: "
        "about 1.25-2x bf16 throughput; needs torch.compile to pay off.",
    },
    "parallelism": {
        "single": "One device, as a process group of one: the loop and the checkpoints are "
        "those of the multi-device layouts, so the project can grow into them.",
        "ddp": "DDP: every rank holds the whole model and gradients are all-reduced, overlapped "
        "with the backward.",
        "fsdp2": "FSDP2 (fully_shard): parameters, gradients and optimizer state are sharded "
        "per parameter; layers are all-gathered just in time and prefetched.",
        "fsdp2_tp": "Tensor parallel inside a node (DTensor): every layer's matmuls split over "
        "its GPUs, activations and logits too, for four activation exchanges per layer and "
        "step over NVLink; FSDP2 shards the rest of the state over the data-parallel ranks.",
        "fsdp2_tp_pp": "Pipeline stages (torch.distributed.pipelining): the layers split into "
        "stages, one per node, that exchange only the activations at their boundary, with "
        "micro-batches filling the pipeline; inside a stage, tensor parallel over the node's "
        "NVLink and FSDP2 over the rest.",
    },
    "activation_checkpointing": {
        "none": "No recomputation: the fastest steps.",
        "selective": "Every second block recomputes its activations in the backward.",
        "full": "Every block recomputes its activations in the backward: only block inputs "
        "are kept.",
    },
    "deployment": {
        "research": "Checkpoints plus `generate` and `eval` commands; decoding runs on a cache "
        "of static shape (keys and values, or the SSM's state).",
        "server": "`serve`: OpenAI-style completion routes on FastAPI and uvicorn over a "
        "continuous-batching engine; each request holds a row of the static KV cache and "
        "decodes at its own position, joining and leaving the batch at every step; "
        "Prometheus metrics, limits, and a drain on SIGTERM.",
        "export": "torch.export + AOTInductor: a compiled package that runs without Python "
        "model code.",
        "onnx": "ONNX export for runtimes outside PyTorch.",
    },
    "quantization": {
        "none": "Inference runs in the training precision.",
        "int8_weight_only": "torchao int8 weight-only, applied as the model is loaded for "
        "inference: a quarter of fp32's weight bytes, which a forward of few rows (batch-1 "
        "decode, one example) reads once each.",
        "int8_dynamic": "torchao int8 weights and dynamically quantized int8 activations, "
        "applied as the model is loaded for inference: int8 matmuls, which pay at many rows "
        "per forward (a served batch, many sequences per step).",
        "int4_weight_only": "torchao int4 weight-only in groups of 128, applied as the model "
        "is loaded for inference: an eighth of fp32's weight bytes, on CUDA's int4 kernels.",
        "fp8": "torchao fp8 weights and dynamic fp8 activations, applied as the model is "
        "loaded for inference: fp8 tensor-core matmuls (Hopper or later).",
    },
}

# A model that generates nothing is used through its checkpoints and `eval`.
RESEARCH_WITHOUT_GENERATION = (
    "Checkpoints, `eval` on the validation split and `consolidate` for one safetensors file of "
    "the weights; the model generates nothing, so there is no `generate`."
)
