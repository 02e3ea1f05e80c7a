"""The questionnaire as data: keys, help texts (the why), choices, defaults and validators.

`copier.yml` is generated from this table (`tmd sync`), the guided flow walks it, the variant
matrix enumerates it, and the docs tables are checked against it. A choice marked
`offered=False` is part of the design space and of the rules, but this template version does not
render it yet; selecting it is refused with a message that says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import rules
from .hardware import ACCELERATORS
from .presets import PRESETS

Answers = dict[str, Any]


@dataclass(frozen=True)
class Choice:
    value: Any
    label: str
    offered: bool = True


@dataclass(frozen=True)
class Question:
    key: str
    type: str  # str | int | float | bool
    help: str
    choices: tuple[Choice, ...] = ()
    default: Any = None  # a constant, or a function of the earlier answers
    # What copier.yml says instead of calling the engine: only a value copier alone knows.
    copier_default: str | None = None
    validator: Callable[[Answers], str | None] | None = None
    when: Callable[[Answers], bool] | None = None  # asked only when true
    computed: bool = False  # never asked; derived, but may be set with --data
    advanced: bool = False  # a derived value a person may set; the flow does not ask it
    decision: str | None = None  # the Design Decisions row it fills, if any
    # A computed value that is not `advanced` is pure derivation and cannot be set: these are
    # the answers to change instead (named in the refusal).
    derived_from: tuple[str, ...] = ()

    def default_for(self, answers: Answers) -> Any:
        value = self.default(answers) if callable(self.default) else self.default
        if isinstance(value, rules.Decision):
            value = value.choice
        return value

    @property
    def settable(self) -> bool:
        """Whether --data may give it: an asked question, or a derived value meant to be set."""
        return not self.computed or self.advanced

    def values(self) -> list[Any]:
        return [c.value for c in self.choices]

    def offered_values(self) -> list[Any]:
        return [c.value for c in self.choices if c.offered]


def _from_preset(key: str, help_text: str) -> Question:
    """A count the model_size preset fills in, which a person may override with --data."""
    return Question(
        key,
        "int",
        help_text,
        default=lambda a: getattr(PRESETS[a["model_size"]], key),
        **_at_least_one(key),
        computed=True,
        advanced=True,
    )


def _derived(
    key: str, kind: str, help_text: str, default: Any, derived_from: tuple[str, ...]
) -> Question:
    """A value the answers determine (never asked, not settable), and the answers it follows."""
    return Question(key, kind, help_text, default=default, computed=True, derived_from=derived_from)


def _at_least_one(key: str) -> dict[str, Any]:
    """The validator for a count that must be >= 1."""
    return {"validator": lambda a: rules.check_count(a, key)}


def _text(a: Answers) -> bool:
    return a["modality"] == "text"


def _image(a: Answers) -> bool:
    return a["modality"] == "image"


def _timeseries(a: Answers) -> bool:
    return a["modality"] == "timeseries"


def _tabular(a: Answers) -> bool:
    return a["modality"] == "tabular"


def _classifier(a: Answers) -> bool:
    return a["modality"] == "image" or (_tabular(a) and a["prediction"] == "classification")


def _c(value: Any, label: str, offered: bool = True) -> Choice:
    return Choice(value, label, offered)


NOT_RENDERED = (
    "{value} is part of the design space but this template version does not render it yet"
)

QUESTIONS: tuple[Question, ...] = (
    Question(
        "project_name",
        "str",
        "Project name: the distribution name and the README title (default: the name of the "
        "folder the project is rendered into).",
        # Without a folder (`tmd plan`) the engine has only a placeholder; copier and `tmd new`
        # know the folder.
        default="my-model",
        copier_default="{{ _folder_name }}",
    ),
    Question(
        "package_name",
        "str",
        "Python package name (import name). It must be an identifier: the project is run as "
        "`python -m <package_name>`.",
        default=lambda a: rules.slugify(a["project_name"]),
        validator=rules.check_package_name,
    ),
    Question(
        "modality",
        "str",
        "What the model reads. The blocks, trainer and tools are the same for every modality; "
        "the modality decides the front-end that turns the input into tokens, the task head, "
        "the data and the metrics, and whether attention is causal (text, a streaming "
        "forecaster) or sees the whole input (image, an offline forecaster).",
        choices=(
            _c("text", "text (decoder-only language model)"),
            _c("image", "image (a ViT classifier over patch embeddings)"),
            _c("audio", "audio (frame embeddings)", offered=False),
            _c("video", "video (spatio-temporal patches)", offered=False),
            _c("timeseries", "timeseries (a PatchTST forecaster over patches of each channel)"),
            _c("multimodal", "multimodal (vision + text)", offered=False),
            _c("tabular", "tabular (an FT-Transformer beside a LightGBM baseline)"),
        ),
        default="text",
    ),
    Question(
        "stage",
        "str",
        "Research (the architecture still changes) or production (a settled model where "
        "throughput pays). It drives the graph-mode default.",
        choices=(_c("research", "research"), _c("production", "production")),
        default="research",
    ),
    Question(
        "control_flow",
        "bool",
        "Does the model have data-dependent control flow (early exit, loops whose length "
        "depends on the input, layers skipped per sample)? Such flow breaks compiled graphs.",
        default=False,
    ),
    Question(
        "graph_mode",
        "str",
        "How the model runs: eager, torch.compile, or compile with max-autotune. Rule: data-"
        "dependent control flow or research → eager; production → max-autotune.",
        choices=(
            _c("eager", "eager (readable errors, fastest iteration)"),
            _c("compile", "torch.compile (default mode: fused kernels, 10-40% faster)"),
            _c(
                "max_autotune",
                "torch.compile(mode='max-autotune') (longest compile, fastest steps)",
            ),
        ),
        default=rules.suggest_graph_mode,
        decision="Graph mode",
    ),
    Question(
        "model_size",
        "str",
        "Starting size. It sets dim, layers and heads in the config, the memory estimate behind "
        "the parallelism default, and the batch size per device.",
        choices=tuple(_c(p.name, p.label) for p in PRESETS.values()),
        default="tiny",
    ),
    Question(
        "image_size",
        "int",
        "Image side in pixels (square); training images are cropped and resized to it.",
        default=rules.suggest_image_size,
        validator=rules.check_image_size,
        when=_image,
    ),
    Question(
        "patch_size",
        "int",
        "Patch side in pixels: each patch_size × patch_size patch becomes one token, so an "
        "image is (image_size / patch_size)² tokens.",
        default=rules.suggest_patch_size,
        validator=rules.check_patch_size,
        when=_image,
    ),
    Question(
        "prediction",
        "str",
        "What the model predicts from a row: a class (classification) or a number (regression).",
        choices=(
            _c("classification", "classification (a class per row)"),
            _c("regression", "regression (a number per row)"),
        ),
        default="classification",
        when=_tabular,
    ),
    Question(
        "n_samples",
        "int",
        "Labelled rows you train on, roughly. Under ~10K, gradient-boosted trees usually beat "
        "a neural net on tables; the project trains a LightGBM baseline beside the "
        "FT-Transformer either way, and `eval` says which won.",
        default=20_000,
        validator=rules.check_n_samples,
        when=_tabular,
    ),
    Question(
        "neural_anyway",
        "bool",
        "Under ~10K rows, gradient-boosted trees usually beat a neural net. Train the "
        "FT-Transformer anyway, beside the LightGBM baseline, and let `eval` compare them?",
        default=True,
        validator=rules.check_neural_on_small_table,
        when=rules.small_table,
    ),
    Question(
        "n_classes",
        "int",
        "Classes the classifier tells apart (the class folders of your images, the target's "
        "values in your table; the built-in image set has 10, the built-in table 3).",
        default=rules.suggest_n_classes,
        validator=rules.check_n_classes,
        when=_classifier,
    ),
    Question(
        "pooling",
        "str",
        "What the head reads: a CLS token prepended to the patches (ViT), or the mean of the "
        "patch tokens (fewer tokens, often as good).",
        choices=(_c("cls", "a CLS token"), _c("mean", "the mean of the patch tokens")),
        default="cls",
        when=_image,
    ),
    Question(
        "context_len",
        "int",
        "Observations of each channel the forecaster reads at once: its look-back window.",
        default=rules.suggest_context_len,
        validator=rules.check_context_len,
        when=_timeseries,
    ),
    Question(
        "patch_len",
        "int",
        "Observations per patch: each patch of one channel becomes one token, so a window is "
        "context_len / patch_len tokens per channel, and attention's cost falls by patch_len².",
        default=rules.suggest_patch_len,
        validator=rules.check_patch_len,
        when=_timeseries,
    ),
    Question(
        "horizon",
        "int",
        "Steps ahead the forecaster predicts, all at once (the head's outputs per channel).",
        default=rules.suggest_horizon,
        validator=rules.check_horizon,
        when=_timeseries,
    ),
    Question(
        "n_channels",
        "int",
        "Channels of the series (its columns besides time; the built-in synthetic set has 3). "
        "Each channel runs through the same weights on its own (channel independence).",
        default=3,
        when=_timeseries,
        **_at_least_one("n_channels"),
    ),
    Question(
        "streaming",
        "bool",
        "Will the forecaster run online, forecasting again as each new patch of observations "
        "arrives? Yes makes attention causal, so a new patch costs one cached step instead of a "
        "pass over the window; no lets every patch see the whole window, which forecasts a "
        "little better offline.",
        default=False,
        when=_timeseries,
    ),
    Question(
        "unlabeled",
        "bool",
        "Is there far more unlabelled data than labelled, ten times or more? For images: "
        "pictures without a class. For a forecaster: series beyond the ones it must forecast "
        "(other sensors, sites or years). Then a self-supervised pretraining on all of it "
        "comes before the training on the labelled part.",
        default=False,
        when=rules.has_ssl_objective,
    ),
    Question(
        "objective",
        "str",
        "What training optimises. supervised: the task's loss on the labelled data, from "
        "scratch. ssl: the backbone first learns from all the data without labels (masked "
        "autoencoding for images, masked patches for series; the `pretrain` command), then "
        "`finetune` trains the task with a fresh head from the pretrained backbone.",
        choices=(
            _c("supervised", "supervised (the task's loss, from scratch)"),
            _c("ssl", "self-supervised pretraining, then fine-tuning"),
        ),
        default=rules.suggest_objective,
        validator=rules.check_objective,
        decision="Objective",
        when=rules.has_ssl_objective,
    ),
    Question(
        "tokenizer",
        "str",
        "How text becomes ids. Bytes need no file and train a tiny model at once; a BPE that "
        "`prepare` trains on your corpus makes about four times fewer tokens; or bring your "
        "own tokenizer file (Hugging Face tokenizer.json, or tiktoken's, as Llama 3 ships). "
        "The vocabulary size follows it.",
        choices=(
            _c("byte", "byte (256 ids, no file)"),
            _c("bpe", "bpe (trained on your corpus by `prepare`)"),
            _c("file", "file (your tokenizer.json or tiktoken file)"),
        ),
        default=rules.suggest_tokenizer,
        decision="Tokenizer",
        when=_text,
    ),
    Question(
        "seq_len",
        "int",
        "Training context length in tokens. Past 8K tokens attention's T² cost dominates "
        "(sliding window or SSM); past 32K the sequence is split across GPUs (context parallel). "
        "For an image it follows from image_size and patch_size, for a series from context_len "
        "and patch_len.",
        default=rules.suggest_seq_len,
        validator=rules.check_seq_len,
        when=_text,
    ),
    Question(
        "attention",
        "str",
        "Attention variant. GQA is the default (smaller KV cache, near-MHA quality); past 8K "
        "tokens a sliding window keeps cost linear in T, and past what the stacked windows "
        "reach (layers x window) an SSM carries the whole sequence in its state.",
        choices=(
            _c("mha", "MHA (one K/V head per query head)"),
            _c("gqa", "GQA (K/V heads shared by groups of query heads)"),
            _c("mqa", "MQA (one K/V head for all query heads: smallest cache)"),
            _c("sliding_window", "sliding-window attention"),
            _c("mla", "multi-head latent attention (compressed KV)"),
            _c("ssm", "selective state-space mixer (Mamba-style), no attention"),
        ),
        default=rules.suggest_attention,
        validator=rules.check_attention,
        decision="Attention variant",
    ),
    Question(
        "position",
        "str",
        "Position encoding. RoPE rotates q and k by position, so attention sees relative "
        "offsets and the cache needs no position table.",
        choices=(
            _c("rope", "RoPE (rotary, relative)"),
            _c("alibi", "ALiBi (linear distance bias)"),
            _c("learned", "learned absolute positions"),
            _c("none", "none (NoPE: causal mask only)"),
        ),
        default=rules.suggest_position,
        validator=rules.check_position,
        decision="Position encoding",
    ),
    Question(
        "norm",
        "str",
        "Normalization, applied before each sub-layer (pre-LN keeps the residual stream clean "
        "and training stable). RMSNorm skips the mean: cheaper, same quality.",
        choices=(
            _c("rmsnorm", "pre-LN RMSNorm"),
            _c("layernorm", "pre-LN LayerNorm"),
        ),
        default="rmsnorm",
        decision="Normalization",
    ),
    Question(
        "qk_norm",
        "bool",
        "Normalize queries and keys per head before RoPE? It bounds attention logits, which "
        "keeps large or long-trained models from loss spikes.",
        default=False,
        validator=rules.check_qk_norm,
    ),
    Question(
        "more_capacity",
        "bool",
        "Does the model need more capacity (parameters) than its compute per token pays for, "
        "e.g. many domains or languages on a fixed FLOP budget? Yes makes the feed-forward a "
        "sparse mixture of experts.",
        default=False,
    ),
    Question(
        "ffn",
        "str",
        "Feed-forward block. SwiGLU gates the hidden layer and beats a GELU MLP at equal "
        "parameters; MoE adds capacity without adding compute per token.",
        choices=(
            _c("swiglu", "SwiGLU"),
            _c("gelu", "GELU MLP"),
            _c("moe", "sparse mixture of experts (top-k routing)"),
        ),
        default=rules.suggest_ffn,
        decision="FFN",
    ),
    *(
        Question(
            key,
            "int",
            f"Model shape: {key} (from the model_size preset; set it to reshape the model).",
            default=(lambda k: lambda a: rules.shape_default(a, k))(key),
            validator=(lambda k: lambda a: rules.check_shape(a, k))(key),
            computed=True,
            advanced=True,
        )
        for key in rules.SHAPE_KEYS
    ),
    Question(
        "window_size",
        "int",
        "Sliding-window attention: keys each query sees (a quarter of seq_len, at most 4096).",
        default=rules.window_default,
        validator=rules.check_window,
        computed=True,
        advanced=True,
    ),
    Question(
        "kv_latent_dim",
        "int",
        "MLA: width of the compressed K/V latent the cache stores (dim/8, at least a head).",
        default=rules.kv_latent_default,
        **_at_least_one("kv_latent_dim"),
        computed=True,
        advanced=True,
    ),
    Question(
        "n_experts",
        "int",
        "MoE: experts per layer (Mixtral's 8).",
        default=8,
        validator=rules.check_n_experts,
        computed=True,
        advanced=True,
    ),
    Question(
        "top_k",
        "int",
        "MoE: experts each token is routed to (2: twice a dense FFN's compute per token).",
        default=2,
        validator=rules.check_top_k,
        computed=True,
        advanced=True,
    ),
    Question(
        "capacity_factor",
        "float",
        "MoE: slots per expert as a multiple of an even share; tokens past it are dropped "
        "(and counted).",
        default=1.25,
        validator=lambda a: None if a["capacity_factor"] > 0 else "capacity_factor must be > 0",
        computed=True,
        advanced=True,
    ),
    Question(
        "ssm_state_dim",
        "int",
        "SSM: state size N per channel (Mamba's 16).",
        default=16,
        **_at_least_one("ssm_state_dim"),
        computed=True,
        advanced=True,
    ),
    _derived(
        "param_count",
        "int",
        "Parameters of the model these answers describe.",
        rules.param_count,
        ("model_size", "dim", "n_layers", "ffn_hidden_dim", "vocab_size"),
    ),
    _from_preset(
        "batch_size",
        "Sequences per device per step in the starting config (from the model_size preset).",
    ),
    _from_preset(
        "train_steps", "Optimizer steps in the starting config (from the model_size preset)."
    ),
    Question(
        "accelerator",
        "str",
        "The device the model is meant for. It sets the memory budget per device, which "
        "precisions exist (fp8 needs Hopper or later) and the peak FLOP/s the project's bench "
        "divides by for MFU.",
        choices=tuple(_c(name, acc.label) for name, acc in ACCELERATORS.items()),
        default="h100",
    ),
    Question(
        "precision",
        "str",
        "Training precision. bf16 autocast on GPUs (half the activation memory, fp32 range); "
        "fp32 on CPU; fp16 needs loss scaling; fp8 (torchao) only on H100/H200/B200.",
        choices=(
            _c("fp32", "fp32"),
            _c("bf16", "bf16 autocast"),
            _c("fp16", "fp16 autocast with loss scaling"),
            _c("fp8", "fp8 matmuls via torchao float8 training"),
        ),
        default=rules.suggest_precision,
        validator=rules.check_precision,
        decision="Precision",
    ),
    Question(
        "loss_scaling",
        "bool",
        "Scale the fp16 loss (GradScaler) so small gradients survive fp16's narrow exponent?",
        default=True,
        validator=rules.check_loss_scaling,
        when=lambda a: a["precision"] == "fp16",
    ),
    _derived(
        "block_bytes",
        "float",
        "Activation bytes one block keeps per token for its backward, under autocast (one device, DDP).",
        rules.block_bytes_of,
        ("model_size", "precision", "seq_len"),
    ),
    _derived(
        "block_bytes_sharded",
        "float",
        "Activation bytes one block keeps per token for its backward under FSDP2, whose weights are cast.",
        rules.block_bytes_sharded,
        ("model_size", "precision", "seq_len"),
    ),
    Question(
        "gpus_per_node",
        "int",
        "GPUs per node. Tensor parallel stays inside a node, where NVLink makes it pay.",
        default=1,
        **_at_least_one("gpus_per_node"),
    ),
    Question(
        "nodes",
        "int",
        "Nodes. Across nodes, pipeline stages send activations instead of all-gathering weights.",
        default=1,
        **_at_least_one("nodes"),
    ),
    _derived(
        "world_size",
        "int",
        "GPUs in all.",
        rules.world_size,
        ("gpus_per_node", "nodes"),
    ),
    _from_preset(
        "tokens_per_step",
        "Tokens per optimizer step the starting config aims for (from the model_size preset).",
    ),
    _derived(
        "tp_degree",
        "int",
        "Tensor-parallel degree if TP is used: the largest power of two in a node that divides "
        "both head counts.",
        rules.tp_degree,
        ("gpus_per_node", "n_heads", "n_kv_heads"),
    ),
    _derived(
        "pp_degree",
        "int",
        "Pipeline stages if PP is used: one per node, or two on a single node.",
        rules.pp_degree,
        ("nodes",),
    ),
    _derived(
        "capacity_bytes",
        "int",
        "Usable memory per device (0 on CPU, where the fit checks are skipped).",
        lambda a: int(rules.capacity_bytes(a) or 0),
        ("accelerator",),
    ),
    Question(
        "parallelism",
        "str",
        "How training spreads over GPUs, from the memory estimate: fits on one GPU → DDP; fits "
        "when sharded → FSDP2; else + tensor parallel; deep and multi-node → + pipeline.",
        choices=(
            _c("single", "single device"),
            _c("ddp", "DDP (replicate, all-reduce gradients)"),
            _c("fsdp2", "FSDP2 (shard params, grads and optimizer state)"),
            _c("fsdp2_tp", "FSDP2 + tensor parallel (2-D)"),
            _c("fsdp2_tp_pp", "FSDP2 + TP + pipeline parallel (3-D)"),
        ),
        default=rules.suggest_parallelism,
        validator=rules.check_parallelism,
        decision="Parallelism",
    ),
    _derived(
        "dp_replicate",
        "int",
        "The rendered [parallel] dp_replicate: copies of the model state (-1: every rank, DDP; "
        "the number of nodes under FSDP2 on several, HSDP).",
        lambda a: rules.mesh(a)[0],
        ("parallelism", "nodes"),
    ),
    _derived(
        "dp_shard",
        "int",
        "The rendered [parallel] dp_shard: ranks the model state is sharded over (-1: what "
        "dp_replicate and tp leave).",
        lambda a: rules.mesh(a)[1],
        ("parallelism",),
    ),
    _derived(
        "tp",
        "int",
        "The rendered [parallel] tp: tp_degree under fsdp2_tp, else 1.",
        lambda a: rules.mesh(a)[2],
        ("parallelism", "gpus_per_node", "n_heads", "n_kv_heads"),
    ),
    _derived(
        "pp",
        "int",
        "The rendered [parallel] pp: pipeline stages (pp_degree) under fsdp2_tp_pp, else 1.",
        lambda a: rules.mesh(a)[3],
        ("parallelism", "nodes"),
    ),
    _derived(
        "dp_degree",
        "int",
        "Data-parallel ranks: each reads its own share of every batch.",
        rules.dp_degree,
        ("gpus_per_node", "nodes", "parallelism"),
    ),
    Question(
        "pp_schedule",
        "str",
        "Pipeline schedule: 1F1B (at most one micro-batch per stage in flight), GPipe (all "
        "forwards, then all backwards), or Interleaved1F1B (two stages per rank, half the "
        "bubble) where every stage keeps two layers.",
        choices=tuple(_c(name, name) for name in rules.PP_SCHEDULES),
        default=rules.pp_schedule,
        validator=rules.check_pp_schedule,
        computed=True,
        advanced=True,
    ),
    Question(
        "pp_microbatches",
        "int",
        "Micro-batches one pipeline step runs (1 without a pipeline): those tokens_per_step "
        "needs, at least one per stage.",
        default=rules.pp_microbatches,
        validator=rules.check_pp_microbatches,
        computed=True,
        advanced=True,
    ),
    Question(
        "grad_accum_steps",
        "int",
        "Micro-batches accumulated per optimizer step: enough for tokens_per_step over "
        "batch_size x seq_len x dp_degree.",
        default=rules.grad_accum_steps,
        **_at_least_one("grad_accum_steps"),
        computed=True,
        advanced=True,
    ),
    _derived(
        "context_parallel",
        "bool",
        "Context parallel (split the sequence across GPUs), added past 32K tokens.",
        rules.context_parallel,
        ("seq_len", "gpus_per_node", "nodes", "attention"),
    ),
    Question(
        "activation_checkpointing",
        "str",
        "Recompute activations in the backward to save memory: none when the estimate fits, "
        "selective (every second block) when that suffices, else full.",
        choices=(
            _c("none", "none"),
            _c("selective", "selective (every second block)"),
            _c("full", "full (every block)"),
        ),
        default=rules.suggest_activation_checkpointing,
        validator=rules.check_fit,
        decision="Activation checkpointing",
    ),
    _derived(
        "memory_gb",
        "str",
        "Estimated training memory per device in GB for the chosen layout.",
        rules.memory_gb,
        ("parallelism", "activation_checkpointing", "batch_size", "seq_len"),
    ),
    Question(
        "deployment",
        "str",
        "How the model is used after training: research (generate from checkpoints), an HTTP "
        "server with a KV cache and continuous batching, torch.export + AOTInductor, or ONNX.",
        choices=(
            _c("research", "research (generate / eval from checkpoints)"),
            _c("server", "HTTP server (KV cache, continuous batching)"),
            _c("export", "torch.export + AOTInductor package"),
            _c("onnx", "ONNX (onnxruntime)"),
        ),
        default="research",
        validator=rules.check_deployment,
        decision="Deployment",
    ),
    Question(
        "quantization",
        "str",
        "Inference quantization through torchao, applied as the model is loaded for "
        "inference (generate, serve, export): int8 weight-only suits forwards of few rows, "
        "such as batch-1 decode, which read every weight once; int8 dynamic quantizes "
        "activations too, which pays at many rows per forward, such as a served batch; int4 "
        "weight-only gives the most tokens/s on CUDA; fp8 needs Hopper or later.",
        choices=(
            _c("none", "none"),
            _c("int8_weight_only", "int8 weight-only"),
            _c("int8_dynamic", "int8 dynamic activations + int8 weights"),
            _c("int4_weight_only", "int4 weight-only (CUDA)"),
            _c("fp8", "fp8 dynamic activations + fp8 weights (Hopper or later)"),
        ),
        default="none",
        validator=rules.check_quantization,
        decision="Quantization",
    ),
    Question(
        "speculative",
        "bool",
        "Speculative decoding (a small draft model proposes, the model verifies): 2-3x lower "
        "latency for a single request. Autoregressive models only.",
        default=False,
        validator=rules.check_speculative,
    ),
    Question(
        "latency_ms",
        "float",
        "Per-token latency target in milliseconds (0 = none). Under 10 ms, distilling a large "
        "model into a small one beats designing small from scratch.",
        default=0.0,
        validator=rules.check_latency,
    ),
    Question(
        "launcher",
        "str",
        "How runs start: torchrun on this machine, a Slurm batch script, or a Kubernetes "
        "PyTorchJob. A local torchrun script is always included.",
        choices=(
            _c("local", "local (torchrun)"),
            _c("slurm", "Slurm (sbatch + srun torchrun)"),
            _c("kubernetes", "Kubernetes (Kubeflow PyTorchJob)"),
        ),
        default="local",
    ),
    Question(
        "tracking",
        "str",
        "Where training metrics go (a metrics.jsonl file is always written as well).",
        choices=(
            _c("tensorboard", "TensorBoard"),
            _c("wandb", "Weights & Biases (offline unless WANDB_MODE says otherwise)"),
            _c("none", "none (metrics.jsonl only)"),
        ),
        default="tensorboard",
    ),
    _derived(
        "compile_mode",
        "str",
        "The torch.compile mode the graph-mode answer maps to.",
        lambda a: rules.COMPILE_MODE[a["graph_mode"]],
        ("graph_mode",),
    ),
    _derived(
        "distill",
        "bool",
        "A latency target under 10 ms: the design notes recommend distillation.",
        rules.wants_distillation,
        ("latency_ms",),
    ),
)

BY_KEY: dict[str, Question] = {q.key: q for q in QUESTIONS}
ASKED_KEYS = tuple(q.key for q in QUESTIONS if not q.computed)
SUGGESTED_KEYS = tuple(q.key for q in QUESTIONS if q.decision and callable(q.default))


def not_offered_message(question: Question, value: Any) -> str:
    offered = ", ".join(str(v) for v in question.offered_values())
    return f"{question.key}={value}: {NOT_RENDERED.format(value=value)}; choose one of: {offered}"
