"""The decision trees as small pure functions, each returning its choice and the reason.

Each rule exists once, here. copier.yml calls these same functions at prompt time through the
template's Jinja extension (`extensions/tmd_engine.py`, via `copier_bridge`), so they use the
standard library only: copier loads this package from the template checkout, not from an install.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from typing import Any

from .flops import matmul_params
from .hardware import ACCELERATORS, FP8_ACCELERATORS, USABLE_MEMORY_FRACTION
from .memory import MemoryEstimate, block_bytes, estimate_train_memory
from .presets import PRESETS, ModelShape, count_params, io_matmul_weights

Answers = dict[str, Any]

LONG_SEQUENCE = 8192  # past this, quadratic attention dominates (skill, Phase 1)
MAX_WINDOW = 4096  # Mistral's window
CONTEXT_PARALLEL_SEQUENCE = 32768  # past this, split the sequence across GPUs (Phase 3)
DEEP_MODEL_LAYERS = 64  # "very deep": pipeline stages across nodes pay off
MAX_TP_DEGREE = 8  # TP stays inside one NVLink domain
DISTILL_LATENCY_MS = 10


@dataclass(frozen=True)
class Decision:
    choice: Any
    rationale: str


# --------------------------------------------------------------------------- names


def slugify(project_name: str) -> str:
    return re.sub(r"[^0-9a-z]+", "_", project_name.lower()).strip("_")


def check_package_name(a: Answers) -> str | None:
    name = a["package_name"]
    if "/" in name or "\\" in name or ".." in name:
        return (
            f"package_name '{name}' looks like a path: the package must be a plain Python "
            "identifier inside the project folder, e.g. 'my_model'"
        )
    if not name.isidentifier() or not name.isascii():
        if name[:1].isdigit():
            return (
                f"package_name '{name}' starts with a digit, which Python cannot import: "
                f"use a leading letter, e.g. 'pkg_{name}'"
            )
        return (
            f"package_name '{name}' is not a Python identifier (ASCII letters, digits and "
            f"underscores): try '{slugify(name) or 'my_model'}'"
        )
    if keyword.iskeyword(name):
        return (
            f"package_name '{name}' is a Python keyword and cannot be imported: try '{name}_model'"
        )
    return None


# --------------------------------------------------------------------------- graph mode


def suggest_graph_mode(a: Answers) -> Decision:
    if a["control_flow"]:
        return Decision(
            "eager",
            "Data-dependent control flow breaks the graph, and graph breaks take away most of "
            "what compilation buys; eager is the honest default (try compile(dynamic=True) "
            "later, and test it).",
        )
    if a["stage"] == "research":
        return Decision(
            "eager",
            "The architecture is still changing: eager keeps errors readable and iteration "
            "fast. Compile once the design settles.",
        )
    return Decision(
        "max_autotune",
        "A stable, throughput-critical model: torch.compile(mode='max-autotune') searches "
        "kernel configurations once and pays back on every step. Remove graph breaks first.",
    )


COMPILE_MODE = {"eager": "none", "compile": "default", "max_autotune": "max-autotune"}

# --------------------------------------------------------------------------- sequence and attention

SEQ_LEN_BY_MODALITY = {"text": 2048}
TINY_SEQ_LEN = 256

# --------------------------------------------------------------------------- modality

# Models that predict their own next input: they decode with a KV cache and have `generate`.
AUTOREGRESSIVE = ("text", "multimodal")
# Inputs that are one sequence in order, where a distance along it means something (ALiBi).
ONE_DIMENSIONAL = ("text", "timeseries", "audio")
TINY_IMAGE, IMAGE = 32, 224  # CIFAR's size for CPU runs; ImageNet's
TINY_PATCH, PATCH = 4, 16
# A forecaster's look-back, patch and horizon: four days of hourly data in patches of 8 hours
# for CPU runs; PatchTST's 512 steps in patches of 16 and its longest-studied 96-step horizon.
TINY_CONTEXT, CONTEXT = 96, 512
TINY_PATCH_LEN, PATCH_LEN = 8, 16
TINY_HORIZON, HORIZON = 24, 96


def generates(a: Answers) -> bool:
    """Whether the model generates its own next input: a KV cache and `generate`."""
    return modality_of(a) in AUTOREGRESSIVE


def modality_of(a: Answers) -> str:
    """The modality of ``a``; a rule read on a partial answer set (``tmd plan``'s tables, the
    tests) is about text unless it says otherwise."""
    return a.get("modality", "text")


def suggest_image_size(a: Answers) -> Decision:
    if a["model_size"] == "tiny":
        return Decision(TINY_IMAGE, "32×32 images (CIFAR's size) keep a CPU step short.")
    return Decision(IMAGE, "224×224 is the usual ImageNet training resolution.")


def suggest_patch_size(a: Answers) -> Decision:
    if a["model_size"] == "tiny":
        return Decision(TINY_PATCH, "4×4 patches of a 32×32 image: 64 patches, as ViT on CIFAR.")
    return Decision(PATCH, "16×16 patches, as ViT-B/16: 196 patches of a 224×224 image.")


def check_image_size(a: Answers) -> str | None:
    if a["image_size"] < 1:
        return f"image_size must be a positive number of pixels, got {a['image_size']}"
    return None


def check_patch_size(a: Answers) -> str | None:
    size, patch = a["image_size"], a["patch_size"]
    if patch < 1:
        return f"patch_size must be a positive number of pixels, got {patch}"
    if size % patch:
        fits = [p for p in range(1, min(size, 32) + 1) if size % p == 0]
        return (
            f"image_size ({size}) must be a multiple of patch_size ({patch}): the patches tile "
            f"the image exactly; pick a patch size among {fits}, or another image size"
        )
    return None


def check_n_classes(a: Answers) -> str | None:
    if a["n_classes"] < 2:
        return f"n_classes must be at least 2 for a classifier, got {a['n_classes']}"
    return None


def suggest_context_len(a: Answers) -> Decision:
    if a["model_size"] == "tiny":
        return Decision(TINY_CONTEXT, "96 steps: four days of an hourly series, a short CPU step.")
    return Decision(CONTEXT, "512 steps, PatchTST's look-back: longer windows keep improving it.")


def suggest_patch_len(a: Answers) -> Decision:
    if a["model_size"] == "tiny":
        return Decision(TINY_PATCH_LEN, "Patches of 8 steps: 12 tokens per channel.")
    return Decision(PATCH_LEN, "Patches of 16 steps, as PatchTST: 32 tokens per channel.")


def suggest_horizon(a: Answers) -> Decision:
    if a["model_size"] == "tiny":
        return Decision(TINY_HORIZON, "24 steps: the next day of an hourly series.")
    return Decision(HORIZON, "96 steps, the shortest of the long-horizon benchmarks' four.")


def check_context_len(a: Answers) -> str | None:
    if a["context_len"] < 2:
        return f"context_len must be at least 2 observations, got {a['context_len']}"
    return None


def check_patch_len(a: Answers) -> str | None:
    context, patch = a["context_len"], a["patch_len"]
    if patch < 1:
        return f"patch_len must be a positive number of observations, got {patch}"
    if context % patch:
        fits = [p for p in range(1, min(context, 64) + 1) if context % p == 0]
        return (
            f"context_len ({context}) must be a multiple of patch_len ({patch}): the patches "
            f"tile the window exactly; pick a patch length among {fits}, or another context_len"
        )
    return None


def check_horizon(a: Answers) -> str | None:
    if a["horizon"] < 1:
        return f"horizon must be at least 1 step ahead, got {a['horizon']}"
    return None


# Tabular: the built-in table's columns, and where trees stop beating a neural net.
TABULAR_NUMERIC, TABULAR_CATEGORICAL = 6, 2
SMALL_TABLE = 10_000  # samples: below it, gradient-boosted trees usually win
TABULAR_CLASSES = 3  # the built-in table's classes


def suggest_n_classes(a: Answers) -> Decision:
    if modality_of(a) == "tabular":
        return Decision(TABULAR_CLASSES, "The built-in table's target has 3 classes.")
    return Decision(10, "The built-in shapes have 10 classes.")


def check_n_samples(a: Answers) -> str | None:
    if a["n_samples"] < 2:
        return f"n_samples must be at least 2 rows (one to train, one to validate), got {a['n_samples']}"
    return None


def small_table(a: Answers) -> bool:
    """Whether the rule "under ~10K samples, trees beat a neural net" applies."""
    return modality_of(a) == "tabular" and a["n_samples"] < SMALL_TABLE


def check_neural_on_small_table(a: Answers) -> str | None:
    if small_table(a) and not a["neural_anyway"]:
        return (
            f"n_samples={a['n_samples']} is under {SMALL_TABLE:,}, where gradient-boosted trees "
            "usually beat a neural net, and you chose not to train one: LightGBM alone needs no "
            "template (lightgbm.LGBMClassifier or LGBMRegressor on your table); answer "
            "neural_anyway=true to train the FT-Transformer beside the LightGBM baseline and let "
            "`eval` say which wins"
        )
    return None


def sequences_per_sample(a: Answers) -> int:
    """Sequences the blocks see per sample: a forecaster's channels are separate sequences
    through the same weights (channel independence); every other modality's sample is one."""
    return a["n_channels"] if modality_of(a) == "timeseries" else 1


def tokens_per_sample(a: Answers) -> int:
    """Tokens the blocks see per sample: its sequences times their length."""
    return sequences_per_sample(a) * a["seq_len"]


def sequence_length(a: Answers) -> int | None:
    """The sequence the blocks see where the modality fixes it: an image's patches (and its
    CLS token), a window's patches per channel; None where it is a free answer (text)."""
    if modality_of(a) == "image":
        return (a["image_size"] // a["patch_size"]) ** 2 + (a["pooling"] == "cls")
    if modality_of(a) == "timeseries":
        return a["context_len"] // a["patch_len"]
    if modality_of(a) == "tabular":  # a token per feature, and the CLS token
        return TABULAR_NUMERIC + TABULAR_CATEGORICAL + 1
    return None


def suggest_seq_len(a: Answers) -> Decision:
    if modality_of(a) == "image":
        n = sequence_length(a)
        return Decision(
            n,
            f"{n} tokens: the image's patches{' and its CLS token' if a['pooling'] == 'cls' else ''}.",
        )
    if modality_of(a) == "timeseries":
        n = sequence_length(a)
        return Decision(n, f"{n} tokens: the window's patches, per channel.")
    if modality_of(a) == "tabular":
        n = sequence_length(a)
        return Decision(n, f"{n} tokens: one per feature of the built-in table, and the CLS token.")
    if a["model_size"] == "tiny":
        return Decision(
            TINY_SEQ_LEN, "The tiny size is for CPU runs: 256 tokens keep a step short."
        )
    n = SEQ_LEN_BY_MODALITY[modality_of(a)]
    return Decision(n, f"{n} tokens is the usual pre-training context for {modality_of(a)}.")


def check_seq_len(a: Answers) -> str | None:
    if a["seq_len"] < 1:
        return f"seq_len must be a positive number of tokens, got {a['seq_len']}"
    return None


def windowed_reach(a: Answers) -> int:
    """Tokens a stack of sliding windows connects: each layer reaches one window further back.

    The default window grows with the sequence (a quarter of it) up to MAX_WINDOW, so what
    bounds the reach is the preset's depth times that cap (the depth is what the flow knows
    when it asks for the attention variant).
    """
    return PRESETS[a["model_size"]].shape.n_layers * MAX_WINDOW


def suggest_attention(a: Answers) -> Decision:
    if modality_of(a) == "tabular":
        return Decision(
            "mha",
            "A row is a few dozen feature tokens read at once, with no cache to shrink: every "
            "query head keeps its own K/V head, as the FT-Transformer does.",
        )
    if modality_of(a) == "timeseries":
        return Decision(
            "mha",
            "A window's patches are a few dozen tokens per channel, so attention over all of "
            "them is cheap and a streaming cache of them is small: every query head keeps its "
            "own K/V head, as PatchTST does.",
        )
    if modality_of(a) not in AUTOREGRESSIVE:
        return Decision(
            "mha",
            f"A {modality_of(a)} model reads its whole input at once and decodes nothing, so "
            "there is no KV cache for fewer K/V heads to shrink: every query head keeps its "
            "own K/V head, as ViT does.",
        )
    if a["seq_len"] > LONG_SEQUENCE:
        reach = windowed_reach(a)
        if a["seq_len"] > reach:
            return Decision(
                "ssm",
                f"seq_len={a['seq_len']} is past {LONG_SEQUENCE} tokens and past the {reach} "
                f"tokens that {PRESETS[a['model_size']].shape.n_layers} layers of sliding "
                "windows can connect: the first tokens would be out of the last ones' reach. A "
                "selective state-space mixer carries the whole sequence in its recurrent state "
                "at a cost linear in T, and decodes from a fixed-size state.",
            )
        return Decision(
            "sliding_window",
            f"Past {LONG_SEQUENCE} tokens the T² attention cost dominates; a sliding window "
            f"keeps it linear in T for a small loss in quality, and its stacked layers still "
            f"reach {reach} tokens back.",
        )
    return Decision(
        "gqa",
        "Grouped-query attention shares each K/V head among several query heads: a smaller "
        "KV cache and less memory traffic at nearly MHA quality (Llama 2/3, Mistral, Gemma).",
    )


# --------------------------------------------------------------------------- tokenizer

BYTE_VOCAB = 256  # the byte tokenizer's ids
MIN_BPE_VOCAB = 2048  # a BPE for the tiny preset: a small corpus has use for a few thousand merges
VOCAB_MULTIPLE = 64  # embedding and head rows padded to full matmul tiles


def suggest_tokenizer(a: Answers) -> Decision:
    if a["model_size"] == "tiny":
        return Decision(
            "byte",
            "A tiny model on a small corpus: bytes need no vocabulary file and no prepare step, "
            "and 256 rows keep the embedding and head small; the cost is about four times more "
            "tokens per word than a trained BPE.",
        )
    vocab = PRESETS[a["model_size"]].shape.vocab_size
    return Decision(
        "bpe",
        f"The {a['model_size']} preset's vocabulary of {vocab:,} ids: a byte-level BPE that "
        "`prepare` trains on your corpus fills it, where bytes would leave all but 256 of its "
        "rows untrained.",
    )


def padded_vocab(ids: int) -> int:
    return -(-ids // VOCAB_MULTIPLE) * VOCAB_MULTIPLE


def vocabulary_note(a: Answers) -> str:
    """The embedding and head's parameters for this tokenizer, and what to change if rows
    would go unused or the size is off the matmul tiles."""
    vocab, dim = a["vocab_size"], a["dim"]
    rows = 2 * vocab * dim
    share = 100 * rows / a["param_count"]
    text = (
        f"Embedding and head: 2 × {vocab:,} × {dim} = {rows:,} parameters "
        f"({share:.0f}% of the model) for the {a['tokenizer']} tokenizer"
    )
    if a["tokenizer"] == "byte" and vocab > BYTE_VOCAB:
        unused = vocab - BYTE_VOCAB
        text += (
            f"; {unused:,} rows of each are ids no byte reaches, {2 * unused * dim:,} "
            "parameters that never train: set vocab_size=256, or tokenizer=bpe."
        )
    elif a["tokenizer"] == "file":
        text += (
            "; vocab_size must hold your tokenizer's ids, padded to a multiple of 64 (Llama 3's "
            "128,256; GPT-2's 50,257 ids take 50,304)."
        )
    else:
        text += "."
    if vocab % VOCAB_MULTIPLE:
        text += (
            f" vocab_size={vocab:,} is not a multiple of {VOCAB_MULTIPLE}: "
            f"{padded_vocab(vocab):,} keeps the head's matmul on full tiles."
        )
    return text


# --------------------------------------------------------------------------- model shape

SHAPE_KEYS = ("dim", "n_layers", "n_heads", "n_kv_heads", "ffn_hidden_dim", "vocab_size")


def shape_default(a: Answers, key: str) -> int:
    preset = PRESETS[a["model_size"]]
    if key == "n_kv_heads":
        return {"mha": a["n_heads"], "mqa": 1}.get(a["attention"], preset.shape.n_kv_heads)
    if key == "ffn_hidden_dim" and a["ffn"] == "gelu":
        return 4 * a["dim"]  # the classic MLP width; SwiGLU and MoE experts keep the preset's
    if key == "vocab_size":  # the tokenizer's: bytes, or a vocabulary the preset's size
        bpe = max(preset.shape.vocab_size, MIN_BPE_VOCAB)
        return BYTE_VOCAB if a["tokenizer"] == "byte" else bpe
    return getattr(preset.shape, key)


def check_shape(a: Answers, key: str) -> str | None:
    value = a[key]
    if value < 1:
        return f"{key} must be positive, got {value}"
    if key == "n_heads" and a["dim"] % value:
        return f"n_heads={value} must divide dim={a['dim']}: each head gets dim // n_heads channels"
    if key == "n_heads" and a["attention"] == "mla" and (a["dim"] // value) % 4:
        return (
            f"head_dim = dim // n_heads = {a['dim'] // value} must be a multiple of 4 for MLA, "
            "whose RoPE half of each head rotates channel pairs: change dim or n_heads"
        )
    if key == "n_heads" and a["position"] == "rope" and (a["dim"] // value) % 2:
        return (
            f"head_dim = dim // n_heads = {a['dim'] // value} must be even for RoPE, which "
            "rotates channel pairs: change dim or n_heads"
        )
    if key == "n_kv_heads" and a["n_heads"] % value:
        return (
            f"n_kv_heads={value} must divide n_heads={a['n_heads']}: each KV head serves an "
            "equal group of query heads; pick a divisor, e.g. "
            f"{max(d for d in range(1, value + 1) if a['n_heads'] % d == 0)}"
        )
    if key == "vocab_size" and value < BYTE_VOCAB:
        return f"vocab_size={value} is below 256, the byte-level tokenizer's alphabet"
    if key == "vocab_size" and a["tokenizer"] == "bpe" and value <= BYTE_VOCAB + 1:
        return (
            f"vocab_size={value} leaves a BPE no merges: it needs more than its 256 bytes and "
            f"the end-of-document token; use e.g. {MIN_BPE_VOCAB}, or tokenizer=byte"
        )
    return None


# --------------------------------------------------------------------------- architecture


def check_attention(a: Answers) -> str | None:
    if modality_of(a) == "timeseries":
        return check_forecaster_attention(a)
    if modality_of(a) == "tabular" and a["attention"] not in ("mha", "gqa", "mqa"):
        why = {
            "sliding_window": "a window along a sequence, and a row's features have no order "
            "and are a few dozen",
            "ssm": "a scan in one direction along a sequence, and a row's features have no order",
            "mla": "a compressed KV cache for decoding, and a table model decodes nothing",
        }[a["attention"]]
        return (
            f"attention={a['attention']} with modality=tabular: it is {why}; use mha (or gqa, mqa)"
        )
    if modality_of(a) != "image" or a["attention"] in ("mha", "gqa", "mqa"):
        return None
    why = {
        "sliding_window": "a 1-D window over the sequence, for text past 8K tokens; an "
        "image's patches are a 2-D grid of a few hundred, which full attention covers",
        "ssm": "a causal scan along one dimension, and an image classifier reads every patch "
        "at once, in both directions",
        "mla": "a compressed KV cache for decoding, and an image classifier decodes nothing",
    }[a["attention"]]
    return f"attention={a['attention']} with modality=image: it is {why}; use mha (or gqa, mqa)"


def check_forecaster_attention(a: Answers) -> str | None:
    attention, streaming = a["attention"], a["streaming"]
    if attention in ("mha", "gqa", "mqa") or (attention == "ssm" and streaming):
        return None
    why = {
        "sliding_window": "for sequences past 8K tokens, and patching already cuts a window to "
        f"{sequence_length(a)} tokens per channel, which full attention covers",
        "mla": "a compressed KV cache for long generations, and a forecaster's cache holds a "
        "few dozen patches",
        "ssm": "a causal scan that reads the series in one direction: it is the streaming "
        "forecaster (streaming=true), and an offline one reads the whole window both ways",
    }[attention]
    return f"attention={attention} with modality=timeseries: it is {why}; use mha (or gqa, mqa)"


# The self-supervised objective of each modality that has one (PRODUCT.md, "Modalities").
SSL_OBJECTIVES = {
    "image": "masked autoencoding (MAE: 75% of the patches hidden, the encoder sees the rest "
    "and a light decoder redraws the hidden ones)",
    "timeseries": "masked-patch modelling (PatchTST: 40% of the patches hidden, their "
    "observations reconstructed from the rest)",
}


def has_ssl_objective(a: Answers) -> bool:
    return modality_of(a) in SSL_OBJECTIVES


def suggest_objective(a: Answers) -> Decision:
    if a.get("unlabeled") and has_ssl_objective(a):
        return Decision(
            "ssl",
            "Far more unlabelled data than labelled: pretrain the backbone on all of it by "
            f"{SSL_OBJECTIVES[modality_of(a)]}, then fine-tune with a fresh head on the labelled "
            "part. Pretraining on the domain's own data beats transfer from an unrelated one.",
        )
    return Decision(
        "supervised",
        "The labelled data is all there is to learn from: train the task's loss on it directly.",
    )


def check_objective(a: Answers) -> str | None:
    if a["objective"] != "ssl" or has_ssl_objective(a):
        return None
    why = {
        "text": "a language model's next-token loss is already self-supervised, so every "
        "unlabelled document is training data as it is",
        "tabular": "a table's features have no neighbours to reconstruct one from, and the "
        "FT-Transformer trains on the labelled rows",
    }.get(modality_of(a), "this template pretrains images and series only")
    return f"objective=ssl with modality={modality_of(a)}: {why}; use objective=supervised"


def suggest_causal(a: Answers) -> bool:
    """Whether attention is causal: a language model's always; a forecaster's when it streams;
    an image classifier's never."""
    return modality_of(a) in AUTOREGRESSIVE or bool(a.get("streaming"))


def suggest_position(a: Answers) -> Decision:
    if modality_of(a) == "tabular":
        return Decision(
            "none",
            "A row's features are a set: each has its own tokenizer weights, which identify it, "
            "as in the FT-Transformer.",
        )
    if modality_of(a) == "timeseries" and a["attention"] != "ssm":
        return Decision(
            "learned",
            "A learned vector per patch position, as PatchTST: the window is fixed by "
            "context_len and patch_len, so a table covers it.",
        )
    if modality_of(a) == "image":
        return Decision(
            "learned",
            "A learned vector per patch position, as ViT: the grid is fixed by image_size and "
            "patch_size, so a table covers it.",
        )
    if a["attention"] == "ssm":
        return Decision(
            "none",
            "The SSM mixer reads the sequence in order through its recurrence; position codes "
            "act on attention scores, which it has none of.",
        )
    return Decision(
        "rope",
        "RoPE: relative positions through rotated q/k, nothing added to the residual stream.",
    )


def check_position(a: Answers) -> str | None:
    if modality_of(a) == "tabular" and a["position"] != "none":
        return (
            f"position={a['position']} with modality=tabular: a row's features are a set, and "
            "the feature tokenizer already gives each feature its own weights, which is all the "
            "identity a position would add (the FT-Transformer has none); use position=none"
        )
    if a["position"] == "alibi" and modality_of(a) == "timeseries":
        return (
            "position=alibi with modality=timeseries: ALiBi penalises attention by distance, a "
            "recency prior that lets a language model run past its training length, and a "
            "forecaster reads a fixed window in which the patch one season back matters as "
            "much as the newest; use learned (PatchTST's), rope or none"
        )
    if a["position"] == "alibi" and modality_of(a) not in ONE_DIMENSIONAL:
        return (
            f"position=alibi with modality={modality_of(a)}: ALiBi biases each score by the "
            "distance along one sequence, and patches sit on a 2-D grid; use learned, rope "
            "(2-D: half the channels turn with the row, half with the column) or none"
        )
    if a.get("objective") == "ssl" and a["position"] == "none" and a["attention"] != "ssm":
        return (
            "position=none with objective=ssl: every hidden patch enters as the same mask "
            "token, so without positions the model cannot tell which patch it is to "
            "reconstruct; use learned or rope"
        )
    if a["attention"] == "mla" and a["position"] != "rope":
        return (
            f"position={a['position']} with MLA: MLA caches one compressed latent for all heads "
            "and carries position in a decoupled RoPE key, so it is defined with RoPE only; use "
            "position=rope with mla, or another attention"
        )
    if a["attention"] == "ssm" and a["position"] in ("rope", "alibi"):
        return (
            f"position={a['position']} acts on attention scores and the SSM mixer has none: use "
            "position=none (the recurrence orders the sequence) or learned"
        )
    return None


def check_qk_norm(a: Answers) -> str | None:
    if a["qk_norm"] and a["attention"] == "ssm":
        return (
            "qk_norm=true normalises attention queries and keys, and the SSM mixer has none: "
            "set qk_norm=false, or pick an attention variant"
        )
    return None


def suggest_ffn(a: Answers) -> Decision:
    if a["more_capacity"]:
        return Decision(
            "moe",
            "More capacity than the compute per token pays for: a sparse mixture of experts "
            "grows the parameters with the number of experts while each token runs only its "
            "top-k, provided the router stays balanced (the auxiliary loss and the dropped-token "
            "count in the logs watch that).",
        )
    return Decision(
        "swiglu",
        "A dense gated FFN: every parameter works on every token, the best quality per FLOP "
        "when compute, not capacity, is the budget.",
    )


def window_default(a: Answers) -> int:
    return max(1, min(MAX_WINDOW, a["seq_len"] // 4))


def check_window(a: Answers) -> str | None:
    w = a["window_size"]
    if a["attention"] == "sliding_window" and not 1 <= w < a["seq_len"]:
        return (
            f"window_size={w} must be at least 1 and below seq_len={a['seq_len']}: a window as "
            "long as the sequence is full attention at extra cost; lower it, or pick gqa"
        )
    return None


def kv_latent_default(a: Answers) -> int:
    return max(a["dim"] // 8, a["dim"] // a["n_heads"])


def check_n_experts(a: Answers) -> str | None:
    if a["ffn"] == "moe" and a["n_experts"] < 2:
        return f"n_experts={a['n_experts']}: a mixture needs at least 2 experts"
    return None


def check_top_k(a: Answers) -> str | None:
    if a["ffn"] == "moe" and not 1 <= a["top_k"] <= a["n_experts"]:
        return (
            f"top_k={a['top_k']} must be between 1 and n_experts={a['n_experts']}: each token "
            "visits top_k distinct experts"
        )
    return None


# --------------------------------------------------------------------------- precision


def suggest_precision(a: Answers) -> Decision:
    if a["accelerator"] == "cpu":
        return Decision(
            "fp32",
            "On a CPU the run is a smoke test or a tiny model; fp32 keeps the numbers exact "
            "and the comparisons in the tests tight.",
        )
    return Decision(
        "bf16",
        "bf16 autocast halves activation memory and runs on tensor cores, with fp32's exponent "
        "range: no loss scaling needed. Master weights and optimizer state stay fp32.",
    )


def check_precision(a: Answers) -> str | None:
    if a["precision"] == "fp8" and a["accelerator"] not in FP8_ACCELERATORS:
        return (
            f"fp8 needs fp8 tensor cores, which {a['accelerator']} lacks (H100, H200 and B200 "
            "have them): pick precision bf16, or accelerator h100/h200/b200"
        )
    return None


def check_loss_scaling(a: Answers) -> str | None:
    if a["precision"] == "fp16" and not a["loss_scaling"]:
        return (
            "fp16 without loss scaling: fp16's 5-bit exponent flushes small gradients to zero; "
            "keep loss_scaling=true (a GradScaler), or use bf16, which needs none"
        )
    return None


# --------------------------------------------------------------------------- parallelism


def check_count(a: Answers, key: str) -> str | None:
    if a[key] < 1:
        return f"{key} must be at least 1, got {a[key]}"
    return None


def world_size(a: Answers) -> int:
    return a["gpus_per_node"] * a["nodes"]


def micro_batches(a: Answers) -> int:
    """Micro-batches of ``batch_size`` per data-parallel rank that the tokens per step aimed at
    need."""
    micro_tokens = max(1, a["batch_size"] * tokens_per_sample(a) * dp_degree(a))
    return max(1, -(-a["tokens_per_step"] // micro_tokens))


def grad_accum_steps(a: Answers) -> int:
    """Micro-batches accumulated per optimizer step: as many as the tokens per step aimed at
    need. Under pipeline parallel the schedule runs them instead (``pp_microbatches``)."""
    return 1 if a["parallelism"].endswith("_pp") else micro_batches(a)


PP_SCHEDULES = ("GPipe", "1F1B", "Interleaved1F1B")


def pp_schedule(a: Answers) -> str:
    """Interleaved 1F1B where every rank can hold two stages of at least two layers each: it
    halves the bubble for twice the activation sends. Otherwise 1F1B, which keeps at most
    ``pp`` micro-batches' activations in flight where GPipe keeps them all."""
    return "Interleaved1F1B" if a["n_layers"] >= 4 * pp_degree(a) else "1F1B"


def stages_per_rank(schedule: str) -> int:
    return 2 if schedule == "Interleaved1F1B" else 1


def pp_microbatches(a: Answers) -> int:
    """Micro-batches one pipeline step runs: those the tokens per step need, at least one per
    stage (fewer leaves stages idle for most of the step); a multiple of the stages under
    the interleaved schedule, which runs them in rounds."""
    if not a["parallelism"].endswith("_pp"):
        return 1
    pp = pp_degree(a)
    m = max(pp, micro_batches(a))
    if a["pp_schedule"] == "Interleaved1F1B":
        m = -(-m // pp) * pp
    return m


def in_flight(a: Answers) -> float:
    """The activations a pipeline's first rank keeps at its peak, in micro-batches through
    every layer: GPipe keeps all ``m`` over its 1/p of the layers, 1F1B ``min(p, m)``, and the
    interleaved schedule (Megatron-LM's count) ``1 + (p - 1) / (p v)`` times that."""
    if not a.get("parallelism", "").endswith("_pp") or "pp_microbatches" not in a:
        return 1.0  # a layout weighed before the pipeline is planned: 1F1B, m >= p
    pp, m = pp_degree(a), a["pp_microbatches"]
    if a["pp_schedule"] == "GPipe":
        return m / pp
    v = stages_per_rank(a["pp_schedule"])
    return min(pp, m) / pp * (1 + (pp - 1) / (pp * v) if v > 1 else 1)


def pipeline_bubble(schedule: str, stages: int, microbatches: int) -> float:
    """The share of a step a stage idles while the pipeline fills and drains:
    (p - 1) / (v m + p - 1), ``v`` stages per rank."""
    if stages == 1:
        return 0.0
    v = stages_per_rank(schedule)
    return (stages - 1) / (v * microbatches + stages - 1)


def check_pp_schedule(a: Answers) -> str | None:
    if a["pp_schedule"] not in PP_SCHEDULES:
        return f"pp_schedule={a['pp_schedule']}: choose one of {', '.join(PP_SCHEDULES)}"
    stages = pp_degree(a) * stages_per_rank(a["pp_schedule"])
    if a["parallelism"].endswith("_pp") and stages > a["n_layers"]:
        return (
            f"pp_schedule={a['pp_schedule']} makes {stages} stages of {a['n_layers']} layers: "
            "every stage needs at least one layer; use pp_schedule=1F1B"
        )
    return None


def check_pp_microbatches(a: Answers) -> str | None:
    if not a["parallelism"].endswith("_pp"):
        return None
    m, pp = a["pp_microbatches"], pp_degree(a)
    if m < pp:
        return (
            f"pp_microbatches={m} for {pp} pipeline stages: every stage needs a micro-batch "
            f"to work on while the pipeline is full; use at least {pp}"
        )
    if a["pp_schedule"] == "Interleaved1F1B" and m % pp:
        return (
            f"pp_microbatches={m}: the interleaved schedule runs micro-batches in rounds of "
            f"one per stage ({pp}); use a multiple of {pp}, or pp_schedule=1F1B"
        )
    return None


def tp_degree(a: Answers) -> int:
    """Largest power of two within one node (at most 8) that divides both head counts."""
    tp = 1
    while (
        tp * 2 <= min(a["gpus_per_node"], MAX_TP_DEGREE)
        and a["n_heads"] % (tp * 2) == 0
        and a["n_kv_heads"] % (tp * 2) == 0
    ):
        tp *= 2
    return tp


def pp_degree(a: Answers) -> int:
    """One pipeline stage per node; two on a single node."""
    return a["nodes"] if a["nodes"] > 1 else 2


def tp_of(a: Answers, parallelism: str) -> int:
    """The TP degree ``parallelism`` applies: ``tp_degree`` for the TP layouts, else 1; under
    a pipeline, halved until the stages and the TP groups take whole GPUs (two stages on one
    node of 8 leave 4 GPUs to each)."""
    if "tp" not in parallelism:
        return 1
    tp = tp_degree(a)
    if parallelism.endswith("_pp"):
        while tp > 1 and world_size(a) % (pp_degree(a) * tp):
            tp //= 2
    return tp


def degrees(a: Answers, parallelism: str) -> tuple[int, int, int]:
    """(ranks the model state is split over, TP degree, PP degree) for one parallelism choice.

    FSDP2 shards over every rank of a node; across nodes it replicates (HSDP, ``mesh``), so
    the state of a multi-node run is split over one node's GPUs, TP's share included.
    """
    tp = tp_of(a, parallelism)
    pp = pp_degree(a) if parallelism.endswith("_pp") else 1
    split = world_size(a) // replicas(a, parallelism) if parallelism.startswith("fsdp2") else tp
    return split, tp, pp


def replicas(a: Answers, parallelism: str) -> int:
    """FSDP2's copies of the model state: one per node (HSDP) when a node's GPUs hold the
    sharded state and a step's activations without recomputation, else one in all."""
    if not parallelism.startswith("fsdp2") or a["nodes"] == 1 or parallelism.endswith("_pp"):
        return 1  # a pipeline already keeps its stages' traffic inside a node
    within = _estimate(a, parallelism, "none", split=a["gpus_per_node"])
    cap = capacity_bytes(a)
    return a["nodes"] if cap is None or within.total_bytes <= cap else 1


def mesh(a: Answers, parallelism: str | None = None) -> tuple[int, int, int, int]:
    """The rendered ``[parallel]`` degrees (dp_replicate, dp_shard, tp, pp); -1 takes what
    the others leave of the ranks started, so the same config runs on fewer ranks in tests.

    DDP replicates over every rank. FSDP2 shards over them; with several nodes it shards
    within a node and replicates across nodes (HSDP) where a node holds the sharded state
    (``replicas``): every block's all-gathers stay on the node's NVLink, and only the
    gradients' all-reduce crosses the network. Under pipeline parallel the stages are the
    outermost dimension, one per node (two on a single node), and each stage's layers are
    sharded over its node's GPUs.
    """
    p = parallelism or a["parallelism"]
    tp = tp_of(a, p)
    pp = pp_degree(a) if p.endswith("_pp") else 1
    if p == "ddp":
        return -1, 1, tp, pp
    if p.startswith("fsdp2"):
        return replicas(a, p), -1, tp, pp
    return 1, 1, tp, pp


def dp_degree(a: Answers) -> int:
    """Data-parallel ranks: each reads its own share of every batch (a TP group and the
    stages of one pipeline share one)."""
    _, _, tp, pp = mesh(a)
    return world_size(a) // (tp * pp)


def shape_of(a: Answers) -> ModelShape:
    return ModelShape(
        *(a[k] for k in SHAPE_KEYS),
        qk_norm=a["qk_norm"],
        attention=a["attention"],
        position=a["position"],
        norm=a["norm"],
        ffn=a["ffn"],
        max_seq_len=a["seq_len"],
        kv_latent_dim=a["kv_latent_dim"],
        n_experts=a["n_experts"],
        top_k=a["top_k"],
        ssm_state_dim=a["ssm_state_dim"],
        window_size=a["window_size"],
        capacity_factor=a["capacity_factor"],
        modality=modality_of(a),
        image_size=a.get("image_size", 0),
        patch_size=a.get("patch_size", 0),
        n_classes=a.get("n_classes", 0) if a.get("prediction") != "regression" else 0,
        cls_token=a.get("pooling") == "cls",
        patch_len=a.get("patch_len", 0),
        horizon=a.get("horizon", 0),
        n_channels=a.get("n_channels", 0),
        n_numeric=TABULAR_NUMERIC if modality_of(a) == "tabular" else 0,
        n_categorical=TABULAR_CATEGORICAL if modality_of(a) == "tabular" else 0,
        causal=suggest_causal(a),
    )


def param_count(a: Answers) -> int:
    return count_params(shape_of(a))


def autocast_of(parallelism: str) -> bool:
    """Autocast (fp32 weights, per-op casts) unless FSDP2 casts the weights themselves."""
    return not parallelism.startswith("fsdp2")


def block_bytes_of(a: Answers, autocast: bool = True) -> float:
    cpu = a["accelerator"] == "cpu"
    return block_bytes(shape_of(a), a["precision"], a["seq_len"], autocast=autocast, cpu=cpu)


def block_bytes_sharded(a: Answers) -> float:
    return block_bytes_of(a, autocast=False)


BYTES_JINJA = repr({"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 2})


def memory_for(a: Answers, parallelism: str, activation_checkpointing: str) -> MemoryEstimate:
    return _estimate(a, parallelism, activation_checkpointing, split=degrees(a, parallelism)[0])


def _estimate(
    a: Answers, parallelism: str, activation_checkpointing: str, split: int
) -> MemoryEstimate:
    """The estimate with the model state split ``split`` ways."""
    tp = tp_of(a, parallelism)
    return estimate_train_memory(
        shape_of(a),
        seq_len=a["seq_len"],
        batch_size=a["batch_size"],
        precision=a["precision"],
        shard_degree=split,
        tp_degree=tp,
        activation_checkpointing=activation_checkpointing,
        autocast=autocast_of(parallelism),
        cpu=a["accelerator"] == "cpu",
        fsdp=parallelism.startswith("fsdp2"),
        pp_degree=pp_degree(a) if parallelism.endswith("_pp") else 1,
        in_flight=in_flight(a) if parallelism.endswith("_pp") else 1.0,
    )


def capacity_bytes(a: Answers) -> float | None:
    gb = ACCELERATORS[a["accelerator"]].memory_gb
    return None if gb is None else gb * 1e9 * USABLE_MEMORY_FRACTION


def fits(a: Answers, parallelism: str, activation_checkpointing: str = "none") -> bool:
    cap = capacity_bytes(a)
    return cap is None or memory_for(a, parallelism, activation_checkpointing).total_bytes <= cap


def _gb(x: float) -> str:
    return f"{x / 1e9:.1f} GB"


def suggest_parallelism(a: Answers) -> Decision:
    world = world_size(a)
    one = memory_for(a, "single", "none")
    cap = capacity_bytes(a)
    budget = "no fixed budget on CPU" if cap is None else f"{_gb(cap)} usable per device"
    if world == 1:
        note = "" if fits(a, "single") else " It does not fit without checkpointing; see below."
        return Decision(
            "single",
            f"One device: no data parallelism to set up. Training needs ~{_gb(one.total_bytes)} "
            f"({budget}).{note}",
        )
    if fits(a, "ddp"):
        return Decision(
            "ddp",
            f"The whole training state (~{_gb(one.total_bytes)}) fits on one device ({budget}): "
            "replicate it and all-reduce gradients. Sharding would only add communication.",
        )
    fsdp = memory_for(a, "fsdp2", "none")
    if fits(a, "fsdp2"):
        return Decision(
            "fsdp2",
            f"~{_gb(one.total_bytes)} does not fit on one device ({budget}); sharding weights, "
            f"gradients and optimizer state over {world} ranks brings it to ~{_gb(fsdp.total_bytes)}.",
        )
    tp = tp_degree(a)
    if refused := tp_refusal(dict(a, parallelism="fsdp2_tp")):
        return Decision(
            "fsdp2",
            f"Sharding alone leaves ~{_gb(fsdp.total_bytes)} per device ({budget}), and "
            f"tensor parallel does not apply ({refused[0]}): shard, and let activation "
            "checkpointing close the gap.",
        )
    if a["nodes"] > 1 and a["n_layers"] >= DEEP_MODEL_LAYERS:
        return Decision(
            "fsdp2_tp_pp",
            f"Sharding alone leaves ~{_gb(fsdp.total_bytes)} per device ({budget}). TP={tp} "
            f"splits each layer inside a node over NVLink, and with {a['n_layers']} layers on "
            f"{a['nodes']} nodes a {pp_degree(a)}-stage pipeline sends only activations between "
            "nodes instead of all-gathering weights across them.",
        )
    both = memory_for(a, "fsdp2_tp", "none")
    return Decision(
        "fsdp2_tp",
        f"Sharding alone leaves ~{_gb(fsdp.total_bytes)} per device ({budget}); tensor parallel "
        f"(TP={tp}, inside a node over NVLink) also splits activations: ~{_gb(both.total_bytes)}.",
    )


PARALLELISM_NEEDS = {
    "ddp": "data parallel",
    "fsdp2": "FSDP2 sharding",
    "fsdp2_tp": "tensor parallel",
    "fsdp2_tp_pp": "pipeline parallel",
}


def check_parallelism(a: Answers) -> str | None:
    p, world = a["parallelism"], world_size(a)
    if p == "single" and world > 1:
        return (
            f"parallelism=single on {world} GPUs leaves {world - 1} idle: pick ddp or fsdp2, "
            "or set gpus_per_node=1 and nodes=1"
        )
    if p != "single" and world == 1:
        return (
            f"{PARALLELISM_NEEDS[p]} needs at least 2 GPUs, but gpus_per_node x nodes = 1: "
            "raise gpus_per_node, or pick parallelism=single"
        )
    if "tp" in p and a["gpus_per_node"] < 2:
        return (
            "tensor parallel splits layers across the GPUs of one node, and gpus_per_node=1: "
            "raise gpus_per_node, or pick fsdp2"
        )
    if "tp" in p and (refused := tp_refusal(a)):
        return ": ".join(refused)
    if p.endswith("_pp"):
        pp = pp_degree(a)
        if pp > a["n_layers"]:
            return (
                f"{pp} pipeline stages for {a['n_layers']} layers: every stage needs at least one "
                "layer; use fewer nodes, or pick fsdp2_tp"
            )
        if world % pp:
            return (
                f"a pipeline of {pp} stages takes GPUs in groups of {pp}, and there are "
                f"{world}: use a multiple of {pp}, or pick fsdp2_tp"
            )
    return None


def tp_refusal(a: Answers) -> tuple[str, str] | None:
    """Why tensor parallel cannot serve these answers, and the way out; None if it can."""
    if not ACCELERATORS[a["accelerator"]].nvlink:
        nvlink = ", ".join(name for name, acc in ACCELERATORS.items() if acc.nvlink)
        return (
            f"tensor parallel on accelerator={a['accelerator']}, which has no NVLink: every "
            "layer exchanges its activations twice in the forward and twice in the backward, "
            "and over PCIe or a network that traffic costs more than the split saves",
            "pick fsdp2 (with activation checkpointing if memory is short), or an NVLink "
            f"accelerator ({nvlink})",
        )
    if why := tp_not_rendered(a):
        return f"parallelism={a['parallelism']} with {why}", "pick fsdp2"
    if tp_degree(a) < 2:
        return (
            f"no tensor-parallel degree from 2 to {min(a['gpus_per_node'], MAX_TP_DEGREE)} divides "
            f"both n_heads={a['n_heads']} and n_kv_heads={a['n_kv_heads']}",
            "change the head counts, or pick fsdp2",
        )
    return None


def tp_not_rendered(a: Answers) -> str | None:
    """What this version has no tensor-parallel plan for, or None."""
    if modality_of(a) != "text":
        return (
            f"modality={modality_of(a)}: tensor parallel is rendered for the language model, "
            "whose head and vocabulary it shards; the other front-ends and heads have no plan yet"
        )
    if a["attention"] == "ssm":
        return (
            "attention=ssm: the selective scan has no heads to split; its channels could be, "
            "but no plan is rendered for it"
        )
    if a["attention"] == "mla":
        return (
            "attention=mla: no plan is rendered for the latent projections (their shared "
            "down-projection stays whole while the up-projections split by head)"
        )
    if a["ffn"] == "moe":
        return (
            "ffn=moe: no plan is rendered for the experts (expert parallel, or each expert "
            "split as a SwiGLU is)"
        )
    return None


def context_parallel(a: Answers) -> bool:
    """Ring attention over the sequence: attention variants only (the SSM has no K/V to pass)."""
    return (
        a["seq_len"] > CONTEXT_PARALLEL_SEQUENCE and world_size(a) > 1 and a["attention"] != "ssm"
    )


# --------------------------------------------------------------------------- activation checkpointing


def suggest_activation_checkpointing(a: Answers) -> Decision:
    p = a["parallelism"]
    none = memory_for(a, p, "none")
    if fits(a, p, "none"):
        return Decision(
            "none",
            f"~{_gb(none.total_bytes)} per device fits without recomputation, so every step "
            "runs at full speed.",
        )
    if fits(a, p, "selective"):
        sel = memory_for(a, p, "selective")
        return Decision(
            "selective",
            f"~{_gb(none.total_bytes)} per device is over budget; checkpointing every second "
            f"block brings it to ~{_gb(sel.total_bytes)} for ~15% more compute.",
        )
    full = memory_for(a, p, "full")
    return Decision(
        "full",
        f"~{_gb(none.total_bytes)} per device is over budget; recomputing every block in the "
        f"backward keeps only block inputs: ~{_gb(full.total_bytes)}, for ~30% more compute.",
    )


def memory_gb(a: Answers) -> str:
    return f"{memory_for(a, a['parallelism'], a['activation_checkpointing']).total_gb:.1f}"


def check_fit(a: Answers) -> str | None:
    """The chosen layout must fit the device: a plan that is known to OOM is not a plan."""
    cap = capacity_bytes(a)
    mem = memory_for(a, a["parallelism"], a["activation_checkpointing"])
    if cap is None or mem.total_bytes <= cap:
        return None
    return (
        f"estimated {mem.total_gb:.1f} GB per device with parallelism={a['parallelism']} and "
        f"activation_checkpointing={a['activation_checkpointing']} exceeds the {cap / 1e9:.1f} GB "
        f"usable on {a['accelerator']}: {fit_way_out(a)}"
    )


def fit_way_out(a: Answers) -> str:
    ways = []
    if not a["parallelism"].startswith("fsdp2"):
        ways.append("shard over more GPUs (parallelism=fsdp2)")
    if a["activation_checkpointing"] != "full":
        ways.append("checkpoint every block (activation_checkpointing=full)")
    ways.append("add GPUs or lower batch_size / seq_len")
    return "; ".join(ways)


# --------------------------------------------------------------------------- inference


def check_deployment(a: Answers) -> str | None:
    cached = a["deployment"] == "export" or (
        a["deployment"] == "server" and modality_of(a) in AUTOREGRESSIVE
    )
    if a["attention"] == "ssm" and cached:
        return (
            f"deployment={a['deployment']} serves through an attention KV cache indexed by "
            "position, and the SSM mixer keeps a fixed-size recurrent state instead: pick deployment="
            "research, or an attention variant"
        )
    if a["attention"] == "ssm" and a["deployment"] == "onnx":
        return (
            "deployment=onnx with attention=ssm: the SSM's scan is a Python loop over chunks of "
            "the sequence, which the exporter unrolls at the traced length, so the graph would "
            "take that length alone: pick deployment=research, or an attention variant"
        )
    if a["attention"] == "sliding_window" and a["deployment"] == "export":
        return (
            "deployment=export with attention=sliding_window: the package is one graph for "
            "prefill and decode, and the window's ring-buffer cache is filled by one path for "
            "a prompt and by another for a token: pick deployment=onnx (the full forward, any "
            "length), or attention=gqa"
        )
    return None


def check_speculative(a: Answers) -> str | None:
    if a["speculative"] and modality_of(a) not in AUTOREGRESSIVE:
        return (
            "speculative decoding drafts tokens for a model that generates them, and "
            f"modality={modality_of(a)} generates none: keep speculative=false"
        )
    if a["speculative"] and a["attention"] in ("ssm", "sliding_window"):
        cache = {
            "ssm": "the SSM's recurrent state has folded every proposed token in",
            "sliding_window": "the window's ring buffer overwrites keys that later positions "
            "still read",
        }[a["attention"]]
        return (
            f"speculative decoding with attention={a['attention']}: a rejected draft token is "
            f"rolled back by moving the position back in a cache indexed by position, and {cache}: "
            "pick an attention variant with a full KV cache (gqa, mha, mqa, mla), or keep "
            "speculative=false"
        )
    return None


def check_quantization(a: Answers) -> str | None:
    q = a["quantization"]
    if q != "none" and a["deployment"] == "onnx":
        return (
            f"quantization={q} with deployment=onnx: torchao's quantized weights are tensor "
            "subclasses that the ONNX exporter does not translate; keep quantization=none and "
            "quantize the ONNX graph in onnxruntime (onnxruntime.quantization), or pick "
            "deployment=export, whose package takes torchao's int8 weights"
        )
    if q == "fp8" and a["accelerator"] not in FP8_ACCELERATORS:
        return (
            f"fp8 quantization runs on fp8 tensor cores, which {a['accelerator']} lacks: pick "
            "int8_weight_only (fastest batch-1 decode without fp8), or an h100/h200/b200"
        )
    if q == "int4_weight_only" and a["accelerator"] == "cpu":
        return (
            "int4 weight-only runs on torchao's CUDA kernels (int4 packed for tensor cores), "
            "and the accelerator is cpu: pick int8_weight_only, which runs on a CPU"
        )
    return None


INT8_DYNAMIC_NOTE = (
    "quantization=int8_dynamic quantizes every activation before its matmul, which pays where "
    "decode is compute-bound (many sequences per step); `generate` runs one sequence by "
    "default, where decode is bound by reading the weights and int8_weight_only is the better "
    "fit at less error."
)


def batched_on_a_gpu(a: Answers) -> bool:
    """A predictor served in batches on a GPU, where int8 activations pay. (On a CPU, eager
    int8 activations are quantized op by op: an image server measured slower than fp32.)"""
    return a["deployment"] == "server" and not generates(a) and a["accelerator"] != "cpu"


INT8_WEIGHT_ONLY_BATCHED_NOTE = (
    "quantization=int8_weight_only keeps activations in floating point and dequantizes each "
    "weight in its matmul, which pays where a forward of few rows is bound by reading the "
    "weights; `serve` runs up to serve.max_batch requests per forward, where a GPU's matmuls "
    "are compute-bound and int8_dynamic, which runs them in int8, is the better fit."
)


def check_latency(a: Answers) -> str | None:
    if a["latency_ms"] < 0:
        return f"latency_ms must be 0 (no target) or a positive number, got {a['latency_ms']}"
    return None


def weight_read_sentence(a: Answers) -> str:
    """What sizes the student: one batch-1 forward (a decode step, one image) reads every
    weight it uses once, so on a GPU the weights' bytes over the memory bandwidth bound its
    latency from below. Empty on a CPU, which has no datasheet bandwidth."""
    bandwidth = ACCELERATORS[a["accelerator"]].bandwidth_tb_s
    if bandwidth is None:
        return ""
    shape = shape_of(a)
    weights = matmul_params(shape) + io_matmul_weights(shape)
    gb = weights * (4 if a["precision"] == "fp32" else 2) / 1e9
    ms = gb / bandwidth
    verdict = (
        "within the target"
        if ms <= a["latency_ms"]
        else "over the target before any compute: pick a smaller model_size for the student"
    )
    return (
        f" On {a['accelerator']}, a batch-1 step reads the {weights / 1e6:.0f}M weights it uses "
        f"({gb:.3g} GB) in at least {ms:.3g} ms at {bandwidth} TB/s: {verdict}."
    )


def wants_distillation(a: Answers) -> bool:
    return 0 < a["latency_ms"] < DISTILL_LATENCY_MS
