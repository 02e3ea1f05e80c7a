"""The decision trees and the memory estimate, checked against hand-worked numbers."""

from __future__ import annotations

import functools
import re

import pytest

from tmd import rules
from tmd.flops import train_flops_per_token
from tmd.memory import estimate_train_memory, loader_bytes
from tmd.plan import AnswerError, explain, resolve
from tmd.presets import PRESETS, count_params
from tmd.report import memory_report


def test_graph_mode_tree():
    assert resolve({"control_flow": True, "stage": "production"})["graph_mode"] == "eager"
    assert resolve({"stage": "research"})["graph_mode"] == "eager"
    assert resolve({"stage": "production"})["graph_mode"] == "max_autotune"
    assert resolve({"stage": "production"})["compile_mode"] == "max-autotune"


def test_precision_default_follows_the_accelerator():
    assert resolve({"accelerator": "cpu"})["precision"] == "fp32"
    for acc in ("a100", "h100", "h200", "b200"):
        assert resolve({"accelerator": acc})["precision"] == "bf16"


@pytest.mark.parametrize("acc", ["cpu", "a100"])
def test_fp8_needs_fp8_tensor_cores(acc):
    with pytest.raises(AnswerError, match="fp8 needs fp8 tensor cores"):
        resolve({"accelerator": acc, "precision": "fp8"})


@pytest.mark.parametrize("acc", ["h100", "h200", "b200"])
def test_fp8_is_allowed_on_hopper_and_later(acc):
    assert resolve({"accelerator": acc, "precision": "fp8"})["precision"] == "fp8"


def test_attention_default_switches_to_a_window_past_8k():
    assert rules.suggest_attention({"seq_len": 8192, "model_size": "tiny"}).choice == "gqa"
    assert rules.suggest_attention({"seq_len": 8193, "model_size": "tiny"}).choice == (
        "sliding_window"
    )


@pytest.mark.parametrize(
    ("model_size", "layers"), [("tiny", 4), ("small", 12), ("large", 32), ("xl", 80)]
)
def test_attention_default_is_an_ssm_past_the_reach_of_stacked_windows(model_size, layers):
    # Each layer reaches one window (capped at 4096 tokens) further back.
    reach = layers * rules.MAX_WINDOW
    assert rules.windowed_reach({"model_size": model_size}) == reach
    at_reach = resolve({"model_size": model_size, "seq_len": reach, "accelerator": "cpu"})
    assert at_reach["attention"] == "sliding_window"
    assert at_reach["window_size"] == rules.MAX_WINDOW
    past = resolve({"model_size": model_size, "seq_len": reach + 1, "accelerator": "cpu"})
    assert past["attention"] == "ssm"
    # The rest of the flow follows the SSM: no position code, no qk-norm, research deployment.
    assert (past["position"], past["qk_norm"], past["deployment"]) == ("none", False, "research")


def test_an_ssm_past_32k_gets_no_ring_attention():
    # Four sequences per device: the tiny preset's eight, at 40K tokens, need 72.03 GB under
    # full checkpointing (the scan's fp32 inner x state tensors), past an H100's 72 usable.
    given = {"seq_len": 40000, "gpus_per_node": 2, "accelerator": "h100", "batch_size": 4}
    assert resolve({**given, "attention": "gqa"})["context_parallel"]
    ssm = resolve(given)
    assert ssm["attention"] == "ssm" and not ssm["context_parallel"]
    assert not any("ring attention" in note for note in explain(ssm).notes)


def test_more_capacity_makes_the_ffn_a_mixture_of_experts():
    dense, sparse = resolve({}), resolve({"more_capacity": True})
    assert (dense["ffn"], sparse["ffn"]) == ("swiglu", "moe")
    # Capacity grows with the experts, compute per token with top-k only.
    assert sparse["param_count"] > 3 * dense["param_count"]
    flops = {
        a["ffn"]: train_flops_per_token(rules.shape_of(a), a["seq_len"]) for a in (dense, sparse)
    }
    assert flops["moe"] < 2 * flops["swiglu"]
    # An explicit answer still wins, and DESIGN.md shows the rule's pick beside it.
    chosen = resolve({"more_capacity": True, "ffn": "swiglu"})
    row = next(r for r in explain(chosen).rows if r.decision == "FFN")
    assert (row.choice, row.suggested) == ("swiglu", "moe")


def test_param_count_matches_a_hand_count():
    # tiny: 4 layers x (2·256² + 2·256·128 + 3·256·704 + 2·256) + 2·256·256 + 256
    per_layer = 2 * 256 * 256 + 2 * 256 * 128 + 3 * 256 * 704 + 2 * 256
    assert count_params(PRESETS["tiny"].shape) == 4 * per_layer + 2 * 256 * 256 + 256
    # the sizes land near their advertised counts
    approx = {"small": 125e6, "medium": 1.1e9, "large": 8.0e9, "xl": 70.6e9}
    for name, target in approx.items():
        assert count_params(PRESETS[name].shape) == pytest.approx(target, rel=0.03)


def test_memory_estimate_by_hand():
    shape = PRESETS["large"].shape  # d 4096, 32 layers, 32 heads (hd 128), kv 1024, h 14336
    d, kv, h, layers, tokens = 4096, 1024, 14336, 32, 4096
    estimate = functools.partial(
        estimate_train_memory,
        shape,
        seq_len=2048,
        batch_size=2,
        precision="bf16",
        shard_degree=8,
        tp_degree=1,
    )
    rope_rows = 2 * 2048 * 64 * 4  # fp32 cos and sin, head_dim / 2 each
    # FSDP2 casts the weights: every activation is bf16, one copy per norm output.
    sharded = estimate(activation_checkpointing="none", autocast=False)
    params = count_params(shape)
    assert sharded.state_bytes == params * 16 / 8
    # residual (block input, mid-block stream) + norm outputs + q, out, k, v + SwiGLU's four
    block = (2 * d + 2 * d + 2 * d + 2 * kv + 4 * h) * 2
    head = (d + d) * 2  # the final norm's input, the head's input
    assert sharded.activation_bytes == tokens * (layers * block + head) + rope_rows
    assert sharded.weight_copy_bytes == 0
    assert sharded.logit_bytes == tokens * 128256 * 8
    assert sharded.unsharded_bytes == 0  # a replicated or single-device layout gathers nothing
    # FSDP2 also holds, in bf16, the root unit (embeddings, final norm, head: never
    # resharded after the forward) and two blocks (the one in its backward, the prefetched).
    gathered = estimate(activation_checkpointing="none", autocast=False, fsdp=True)
    root = 2 * 128256 * d + d
    assert gathered.unsharded_bytes == (root + 2 * (params - root) / layers) * 2
    assert gathered.total_bytes == sharded.total_bytes + gathered.unsharded_bytes
    full = estimate(activation_checkpointing="full", autocast=False)
    assert full.activation_bytes == tokens * (layers * d * 2 + block + head) + rope_rows
    assert full.activation_bytes < sharded.activation_bytes / 10
    # Autocast keeps the fp32 residual stream, one bf16 copy of each norm output (the block
    # casts it once for q, k and v, once for w1 and w3), and a bf16 copy of every matmul weight.
    cast = estimate(activation_checkpointing="none")
    block = 2 * d * 4 + (2 * d + 2 * d + 2 * kv + 4 * h) * 2
    head = d * 4 + d * 2
    assert cast.activation_bytes == tokens * (layers * block + head) + rope_rows
    assert cast.weight_copy_bytes == (params - 128256 * d - (2 * layers + 1) * d) * 2  # no norms
    # On a CPU the composite RMSNorm also keeps its normalised input: one more fp32 tensor
    # per norm (two per block, and the final one).
    cpu = estimate(activation_checkpointing="none", cpu=True)
    assert cpu.activation_bytes - cast.activation_bytes == tokens * (layers * 2 + 1) * d * 4


def test_parallelism_tree_walks_fit_then_shard_then_tp_then_pp():
    assert resolve({})["parallelism"] == "single"
    # 1B fits on one H100 → replicate
    assert resolve({"model_size": "medium", "gpus_per_node": 8})["parallelism"] == "ddp"
    # 8B: 128 GB of state does not fit one device; sharded over 8 it does
    eight = resolve({"model_size": "large", "gpus_per_node": 8})
    assert eight["parallelism"] == "fsdp2"
    assert eight["activation_checkpointing"] == "none"
    # 70B on one node: sharding alone is over budget → +TP
    assert rules.suggest_parallelism(
        resolve({"model_size": "xl", "gpus_per_node": 8, "accelerator": "cpu"})
        | {"accelerator": "b200"}
    ).choice in {"fsdp2_tp", "fsdp2"}
    xl = resolve({"model_size": "xl", "gpus_per_node": 8, "accelerator": "cpu"}) | {
        "accelerator": "h100",
        "capacity_bytes": 72_000_000_000,
    }
    assert rules.suggest_parallelism(xl).choice == "fsdp2_tp"
    # deep (80 layers) and multi-node → +PP
    xl2 = dict(xl, nodes=2, world_size=16)
    assert rules.suggest_parallelism(xl2).choice == "fsdp2_tp_pp"


def test_checkpointing_follows_the_estimate():
    a = resolve({"model_size": "medium", "gpus_per_node": 8, "accelerator": "cpu"})
    a = a | {"accelerator": "a100", "seq_len": 8192, "batch_size": 8, "parallelism": "ddp"}
    mem = {ac: rules.memory_for(a, "ddp", ac).total_bytes for ac in ("none", "selective", "full")}
    cap = rules.capacity_bytes(a)
    expected = "none" if mem["none"] <= cap else "selective" if mem["selective"] <= cap else "full"
    assert rules.suggest_activation_checkpointing(a).choice == expected
    assert expected != "none"  # 1B at 64K tokens per device is over an A100's budget


def test_a_layout_known_to_oom_is_refused():
    with pytest.raises(AnswerError, match="exceeds the 72.0 GB usable on h100"):
        resolve({"model_size": "large"})


def test_tp_degree_divides_the_heads():
    a = resolve({"model_size": "xl", "gpus_per_node": 8, "accelerator": "cpu"})
    assert rules.tp_degree(a) == 8
    assert rules.tp_degree(dict(a, n_kv_heads=2)) == 2
    assert rules.tp_degree(dict(a, gpus_per_node=1)) == 1


def test_context_parallel_past_32k():
    long = {"gpus_per_node": 2, "parallelism": "ddp", "attention": "gqa"}
    assert not resolve({"seq_len": 32768, **long})["context_parallel"]
    a = resolve(
        {
            "seq_len": 65536,
            "gpus_per_node": 2,
            "parallelism": "ddp",
            "attention": "gqa",
            "accelerator": "cpu",
        }
    )
    assert a["context_parallel"]
    assert any("context parallel" in note for note in explain(a).notes)


def test_explain_marks_overrides_of_the_rule():
    plan = explain(resolve({"stage": "production", "graph_mode": "eager"}))
    row = next(r for r in plan.rows if r.decision == "Graph mode")
    assert row.choice == "eager" and row.suggested == "max_autotune"
    plan = explain(resolve({}))
    assert all(r.suggested is None for r in plan.rows)


def test_flops_per_token_by_hand():
    from tmd.flops import train_flops_per_token

    shape = PRESETS["tiny"].shape
    linear = 4 * (2 * 256 * 256 + 2 * 256 * 128 + 3 * 256 * 704) + 256 * 256  # blocks + head
    assert train_flops_per_token(shape, 256) == 6 * linear + 12 * 4 * 256 * 256


def _shape(**kw):
    from tmd.rules import shape_of

    return shape_of(resolve({"accelerator": "cpu", **kw}, validate=False))


def test_param_counts_of_each_mechanism_by_hand():
    d, h, L, V = 256, 704, 4, 256
    base = count_params(_shape())
    gelu = count_params(_shape(ffn="gelu"))  # hidden 4·d, two matrices
    assert gelu - base == L * (2 * d * 4 * d - 3 * d * h)
    moe = count_params(_shape(ffn="moe"))  # 8 SwiGLU experts + a router
    assert moe - base == L * (7 * 3 * d * h + d * 8)
    ln = count_params(_shape(norm="layernorm"))  # a bias per norm
    assert ln - base == (2 * L + 1) * d
    learned = count_params(_shape(position="learned"))
    assert learned - base == 256 * d
    qk = count_params(_shape(qk_norm=True))
    assert qk - base == L * 2 * 64
    mla = count_params(_shape(attention="mla"))
    hd, r, c, H = 64, 32, 64, 4
    mixer = d * H * (hd + r) + d * c + d * r + c + 2 * c * H * hd + H * hd * d
    assert mla - base == L * (mixer - (2 * d * d + 2 * d * 128))
    assert (
        count_params(_shape()) == 4 * (2 * d * d + 2 * d * 128 + 3 * d * h + 2 * d) + 2 * V * d + d
    )


def test_moe_flops_count_only_the_routed_experts():
    from tmd.flops import matmul_params

    dense, moe = _shape(), _shape(ffn="moe")
    assert matmul_params(moe) - matmul_params(dense) == 4 * (3 * 256 * 704 + 256 * 8)


def test_window_limits_the_attention_flops():
    from tmd.flops import attention_flops_per_token

    full = attention_flops_per_token(_shape(seq_len=4096), 4096)
    window = attention_flops_per_token(_shape(seq_len=4096), 4096, window=1024)
    assert full == 6 * 4 * 4096 * 512
    # Blocks of 1024 queries against two blocks of keys: 2048 of the 4096 keys.
    assert attention_flops_per_token(_shape(attention="sliding_window"), 4096, 1024) == full / 2
    # Up to two windows long, the band-masked sequence is scored whole.
    assert attention_flops_per_token(_shape(attention="sliding_window"), 4096, 2048) == full
    assert window == full  # a window only counts for sliding-window attention
    assert attention_flops_per_token(_shape(attention="ssm", position="none"), 4096) == 0


@pytest.mark.parametrize("attention", ["gqa", "mla", "sliding_window", "alibi_gqa"])
def test_every_attention_with_a_kv_cache_is_served(attention):
    """The server's decode step holds each row at its own position in every KV cache: the
    full one, MLA's latent one and the window's ring buffer."""
    given = {"attention": attention, "deployment": "server", "accelerator": "cpu"}
    if attention == "alibi_gqa":
        given |= {"attention": "gqa", "position": "alibi"}
    assert resolve(given)["deployment"] == "server"


@pytest.mark.parametrize("modality", ["image", "timeseries", "tabular"])
@pytest.mark.parametrize("deployment", ["research", "server", "export"])
@pytest.mark.parametrize("accelerator", ["cpu", "a100"])
def test_every_modality_is_quantized_where_it_is_loaded(modality, deployment, accelerator):
    """Quantization applies where a model is loaded for inference, whatever the modality; the
    plan says which int8 method fits a batching server on a GPU (on a CPU, eager int8
    activations measured slower than fp32: nothing to advise)."""
    given = {"modality": modality, "deployment": deployment, "accelerator": accelerator}
    for method in ("int8_weight_only", "int8_dynamic"):
        answers = resolve(given | {"quantization": method})
        assert answers["quantization"] == method
        notes = explain(answers).notes
        batched = (method, deployment, accelerator) == ("int8_weight_only", "server", "a100")
        assert (rules.INT8_WEIGHT_ONLY_BATCHED_NOTE in notes) == batched
        assert rules.INT8_DYNAMIC_NOTE not in notes


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {"attention": "sliding_window", "window_size": 256},
            "must be at least 1 and below seq_len=256",
        ),
        ({"ffn": "moe", "top_k": 9}, "top_k=9 must be between 1 and n_experts=8"),
        ({"ffn": "moe", "n_experts": 1}, "a mixture needs at least 2 experts"),
        ({"attention": "mla", "position": "alibi"}, "position=alibi with MLA"),
        ({"attention": "mla", "position": "learned"}, "defined with RoPE only"),
        ({"attention": "ssm", "position": "none", "qk_norm": True}, "SSM mixer has none"),
        ({"attention": "mla", "dim": 264, "n_heads": 4}, "multiple of 4 for MLA"),
        ({"attention": "ssm", "position": "rope"}, "the SSM mixer has none"),
        (
            {"quantization": "fp8", "accelerator": "a100"},
            "fp8 quantization runs on fp8 tensor cores",
        ),
        ({"speculative": True, "attention": "ssm"}, "recurrent state has folded"),
        ({"speculative": True, "attention": "sliding_window"}, "ring buffer overwrites keys"),
        ({"attention": "ssm", "deployment": "onnx"}, "unrolls at the traced length"),
        ({"attention": "ssm", "deployment": "export"}, "keeps a fixed-size recurrent state"),
        ({"attention": "sliding_window", "deployment": "export"}, "ring-buffer cache"),
        ({"attention": "ssm", "deployment": "server"}, "keeps a fixed-size recurrent state"),
        (
            {"deployment": "onnx", "quantization": "int8_weight_only"},
            "quantize the ONNX graph in onnxruntime",
        ),
        ({"quantization": "int4_weight_only"}, "int4 weight-only runs on torchao's CUDA"),
    ],
)
def test_architecture_rules_refuse(given, message):
    from tmd import rules
    from tmd.questions import QUESTIONS

    answers = resolve({"accelerator": "cpu", **given}, validate=False)
    messages = [q.validator(answers) for q in QUESTIONS if q.validator]
    assert any(m and message in m for m in messages), messages
    assert rules.suggest_position({"attention": "ssm"}).choice == "none"


def test_every_derived_value_names_the_answers_it_follows_from():
    from tmd.questions import BY_KEY, QUESTIONS

    for q in QUESTIONS:
        if not q.settable:
            assert q.derived_from, q.key
            assert all(key in BY_KEY and BY_KEY[key].settable for key in q.derived_from), q.key


def _refusals():
    """(given, message) for every refused pair of offered answers, and a sample of triples."""
    import itertools
    import random

    from tmd.variants import factors

    levels = factors()
    space = {key: list(values) for key, values in levels.items()}
    space["speculative"] = [False, True]
    space["seq_len"] = [256, 9000, 40000]
    space["model_size"] = ["tiny", "small", "large", "xl"]
    keys = list(space)
    combos = [
        {a: va, b: vb}
        for a, b in itertools.combinations(keys, 2)
        for va in space[a]
        for vb in space[b]
    ]
    rng = random.Random(0)
    combos += [{k: rng.choice(space[k]) for k in rng.sample(keys, 3)} for _ in range(600)]
    for given in combos:
        try:
            resolve(given)
        except AnswerError as err:
            yield given, str(err)


def test_refusals_offer_only_choices_this_version_renders():
    """A way out that names `key=value` must name a value that can be rendered: the guided
    flow once sent people to server, export and int8_weight_only, none of them rendered."""
    import re

    from tmd.questions import BY_KEY

    seen = 0
    for given, message in _refusals():
        seen += 1
        for key, value in re.findall(r"\b([a-z_]+)=([A-Za-z0-9_]+)", message):
            question = BY_KEY.get(key)
            if question is None or not question.choices or given.get(key) == value:
                continue  # not a choice, or the answer being refused, quoted back
            assert value in question.offered_values(), (given, message)
    assert seen > 50


def test_attention_that_flash_cannot_take_keeps_k_and_v_at_the_queries_width_on_cuda():
    """On CUDA only FlashAttention takes grouped K/V heads (no mask, no fp32); the rendered
    attention repeats k and v to the query heads for the rest, and SDPA keeps the copies."""
    from dataclasses import replace

    from tmd.memory import block_bytes

    gqa = PRESETS["small"].shape  # 12 query heads over 4 K/V heads
    widening = 2 * (gqa.n_heads - gqa.n_kv_heads) * gqa.head_dim  # k and v, per token
    alibi = replace(gqa, position="alibi")
    assert block_bytes(alibi, "bf16", 2048) - block_bytes(gqa, "bf16", 2048) == 2 * widening
    assert block_bytes(alibi, "bf16", 2048, cpu=True) == block_bytes(gqa, "bf16", 2048, cpu=True)
    # No FlashAttention in fp32: causal attention widens too, as the masked one does.
    assert block_bytes(alibi, "fp32", 2048) == block_bytes(gqa, "fp32", 2048)
    mha = replace(gqa, n_kv_heads=gqa.n_heads, position="alibi")
    assert block_bytes(mha, "bf16", 2048) == block_bytes(
        replace(mha, position="rope"), "bf16", 2048
    )


def test_the_vocabulary_follows_the_tokenizer_the_preset_suggests():
    tiny, small = resolve({}), resolve({"model_size": "small"})
    assert (tiny["tokenizer"], tiny["vocab_size"]) == ("byte", 256)
    assert (small["tokenizer"], small["vocab_size"]) == ("bpe", 32768)
    assert resolve({"tokenizer": "bpe"})["vocab_size"] == 2048  # a BPE needs room for merges
    assert resolve({"model_size": "small", "tokenizer": "byte"})["vocab_size"] == 256
    with pytest.raises(AnswerError, match="leaves a BPE no merges"):
        resolve({"tokenizer": "bpe", "vocab_size": 257})


def test_the_plan_states_the_embedding_and_head_and_warns_of_unused_rows():
    (note,) = explain(resolve({})).notes
    assert note.startswith("Embedding and head: 2 × 256 × 256 = 131,072 parameters (4% ")
    wasted = resolve(
        {"model_size": "large", "tokenizer": "byte", "vocab_size": 128256, "accelerator": "cpu"}
    )
    (note,) = explain(wasted).notes
    unused = 128256 - 256
    assert f"{unused:,} rows of each are ids no byte reaches" in note
    assert f"{2 * unused * 4096:,} parameters that never train" in note  # 1.05B
    (note,) = explain(resolve({"tokenizer": "file", "vocab_size": 50257})).notes
    assert "vocab_size=50,257 is not a multiple of 64: 50,304 keeps" in note


def test_the_plan_counts_the_loaders_batches_in_host_memory():
    """The rendered defaults build one batch at a time: the tiny preset's 8 sequences of
    257 int64 ids, and on a GPU their page-locked inputs and targets besides."""
    assert loader_bytes(8, 256, pinned=False) == 8 * 257 * 8
    assert loader_bytes(8, 256, pinned=True) == 8 * 257 * 8 + 2 * 8 * 256 * 8
    assert loader_bytes(8, 256, num_workers=2, prefetch_factor=3, pinned=False) == 6 * 8 * 257 * 8
    assert "data loader's batches: 0.02 MB (data.num_workers" in memory_report(
        explain(resolve({"accelerator": "cpu"}))
    )


# --------------------------------------------------------------------------- modality: image


def test_an_image_model_reads_patches_both_ways_with_full_attention():
    answers = resolve({"modality": "image"})
    assert (answers["image_size"], answers["patch_size"], answers["pooling"]) == (32, 4, "cls")
    assert answers["seq_len"] == (32 // 4) ** 2 + 1  # the patches and the CLS token
    assert answers["attention"] == "mha"  # no KV cache to shrink
    assert answers["position"] == "learned"  # ViT's table over the fixed grid
    small = resolve({"modality": "image", "model_size": "small", "pooling": "mean"})
    assert (small["image_size"], small["patch_size"], small["seq_len"]) == (224, 16, 196)


def test_the_text_questions_are_not_asked_of_an_image_model_and_back():
    from tmd.questions import BY_KEY

    image = resolve({"modality": "image"})
    text = resolve({})
    for key in ("tokenizer", "seq_len"):
        assert not BY_KEY[key].when(image) and BY_KEY[key].when(text)
    for key in ("image_size", "patch_size", "n_classes", "pooling"):
        assert BY_KEY[key].when(image) and not BY_KEY[key].when(text)
    rows = {row.decision for row in explain(image).rows}
    assert "Tokenizer" not in rows and "Attention variant" in rows
    assert not any("Embedding and head" in note for note in explain(image).notes)


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"attention": "sliding_window"}, "attention=sliding_window with modality=image"),
        ({"attention": "ssm", "position": "none"}, "a causal scan along one dimension"),
        ({"attention": "mla", "position": "rope"}, "an image classifier decodes nothing"),
        ({"position": "alibi"}, "patches sit on a 2-D grid; use learned, rope"),
        ({"patch_size": 5}, "image_size (32) must be a multiple of patch_size (5)"),
        ({"image_size": 0}, "image_size must be a positive number of pixels"),
        ({"n_classes": 1}, "n_classes must be at least 2"),
        ({"speculative": True}, "modality=image generates none"),
    ],
)
def test_every_image_rule_refuses_with_its_reason(given, message):
    with pytest.raises(AnswerError, match=re.escape(message)):
        resolve({"modality": "image", **given})


def test_the_image_refusals_name_only_ways_out_that_render():
    from tmd.questions import BY_KEY

    for given in ({"attention": "ssm"}, {"attention": "mla"}, {"position": "alibi"}):
        with pytest.raises(AnswerError) as err:
            resolve({"modality": "image", **given})
        for key, value in re.findall(r"\b([a-z_]+)=([A-Za-z0-9_]+)", str(err.value)):
            if key in given or key == "modality":
                continue
            assert value in BY_KEY[key].offered_values(), str(err.value)


# --------------------------------------------------------------------------- modality: timeseries


def test_a_forecaster_reads_patches_of_each_channel_with_learned_positions():
    answers = resolve({"modality": "timeseries"})
    assert (answers["context_len"], answers["patch_len"], answers["horizon"]) == (96, 8, 24)
    assert answers["seq_len"] == 96 // 8  # the patches of one channel
    assert (answers["attention"], answers["position"]) == ("mha", "learned")  # as PatchTST
    assert answers["streaming"] is False
    small = resolve({"modality": "timeseries", "model_size": "small"})
    assert (small["context_len"], small["patch_len"], small["horizon"]) == (512, 16, 96)
    scan = resolve({"modality": "timeseries", "streaming": True, "attention": "ssm"})
    assert scan["position"] == "none"  # the recurrence orders the patches


def test_the_forecasters_questions_are_asked_of_it_alone():
    from tmd.questions import BY_KEY

    series, text, image = (resolve({"modality": m}) for m in ("timeseries", "text", "image"))
    for key in ("context_len", "patch_len", "horizon", "n_channels", "streaming"):
        assert BY_KEY[key].when(series) and not BY_KEY[key].when(text)
        assert not BY_KEY[key].when(image)
    for key in ("tokenizer", "seq_len", "image_size", "pooling"):
        assert not BY_KEY[key].when(series)


def test_every_channel_is_a_sequence_in_the_memory_estimate():
    """Channel independence: a batch of b windows is b · n_channels sequences, so the
    activations grow with the channels and the tokens per step count them."""
    one, seven = (
        rules.memory_for(resolve({"modality": "timeseries", "n_channels": c}), "single", "none")
        for c in (1, 7)
    )
    assert seven.activation_bytes == pytest.approx(7 * one.activation_bytes, rel=0.01)
    assert rules.tokens_per_sample(resolve({"modality": "timeseries", "n_channels": 7})) == 7 * 12


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"attention": "sliding_window"}, "patching already cuts a window to 12 tokens"),
        ({"attention": "mla", "position": "rope"}, "a forecaster's cache holds a few dozen"),
        ({"attention": "ssm", "position": "none"}, "it is the streaming forecaster"),
        ({"position": "alibi"}, "the patch one season back matters as much as the newest"),
        ({"patch_len": 7}, "context_len (96) must be a multiple of patch_len (7)"),
        ({"context_len": 1}, "context_len must be at least 2 observations"),
        ({"horizon": 0}, "horizon must be at least 1 step ahead"),
        ({"n_channels": 0}, "n_channels must be at least 1"),
        ({"speculative": True}, "modality=timeseries generates none"),
    ],
)
def test_every_forecaster_rule_refuses_with_its_reason(given, message):
    with pytest.raises(AnswerError, match=re.escape(message)):
        resolve({"modality": "timeseries", **given})


def test_the_forecaster_refusals_name_only_ways_out_that_render():
    from tmd.questions import BY_KEY

    for given in ({"attention": "ssm"}, {"attention": "mla"}, {"position": "alibi"}):
        with pytest.raises(AnswerError) as err:
            resolve({"modality": "timeseries", **given})
        for key, value in re.findall(r"\b([a-z_]+)=([A-Za-z0-9_]+)", str(err.value)):
            if key in given or key == "modality":
                continue
            if BY_KEY[key].type == "bool":
                resolve({"modality": "timeseries", **given, key: value == "true"})
            else:
                assert value in BY_KEY[key].offered_values(), str(err.value)


# --------------------------------------------------------------------------- modality: tabular


def test_a_table_model_reads_a_token_per_feature_both_ways_without_positions():
    answers = resolve({"modality": "tabular"})
    assert (answers["prediction"], answers["n_classes"], answers["n_samples"]) == (
        "classification",
        3,
        20_000,
    )
    assert answers["seq_len"] == 6 + 2 + 1  # the built-in table's features and the CLS token
    assert (answers["attention"], answers["position"]) == ("mha", "none")
    assert not any("10,000 rows" in note for note in explain(answers).notes)


def test_under_ten_thousand_rows_the_flow_says_trees_win_and_asks():
    from tmd.questions import BY_KEY

    large, small = (
        resolve({"modality": "tabular"}),
        resolve({"modality": "tabular", "n_samples": 5000}),
    )
    assert not BY_KEY["neural_anyway"].when(large) and BY_KEY["neural_anyway"].when(small)
    assert any("trees usually beat a neural net" in note for note in explain(small).notes)
    assert BY_KEY["n_classes"].when(small)
    assert not BY_KEY["n_classes"].when(
        resolve({"modality": "tabular", "prediction": "regression"})
    )


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"n_samples": 5000, "neural_anyway": False}, "LightGBM alone needs no template"),
        ({"n_samples": 1}, "n_samples must be at least 2 rows"),
        ({"attention": "sliding_window"}, "a row's features have no order"),
        ({"attention": "ssm", "position": "none"}, "a scan in one direction along a sequence"),
        ({"attention": "mla", "position": "rope"}, "a table model decodes nothing"),
        ({"position": "learned"}, "a row's features are a set"),
        ({"n_classes": 1}, "n_classes must be at least 2"),
        ({"speculative": True}, "modality=tabular generates none"),
    ],
)
def test_every_table_rule_refuses_with_its_reason(given, message):
    with pytest.raises(AnswerError, match=re.escape(message)):
        resolve({"modality": "tabular", **given})


# --------------------------------------------------------------------------- the SSL rule


@pytest.mark.parametrize("modality", ["image", "timeseries"])
def test_far_more_unlabelled_data_makes_the_objective_ssl_pretraining(modality):
    from tmd.questions import BY_KEY

    labelled = resolve({"modality": modality})
    assert labelled["objective"] == "supervised"
    assert BY_KEY["unlabeled"].when(labelled) and BY_KEY["objective"].when(labelled)
    answers = resolve({"modality": modality, "unlabeled": True})
    assert answers["objective"] == "ssl"
    row = next(r for r in explain(answers).rows if r.decision == "Objective")
    assert "`pretrain`" in row.rationale and "`finetune`" in row.rationale
    reason = dict(explain(answers).reasons)["Objective"]
    assert ("masked autoencoding" if modality == "image" else "masked-patch") in reason
    # A person may still choose supervised training: the rule suggests, the answer decides.
    chosen = explain(resolve({"modality": modality, "unlabeled": True, "objective": "supervised"}))
    assert next(r for r in chosen.rows if r.decision == "Objective").suggested == "ssl"


@pytest.mark.parametrize("modality", ["text", "tabular"])
def test_modalities_without_a_pretraining_objective_do_not_ask_and_refuse_it(modality):
    from tmd.questions import BY_KEY

    answers = resolve({"modality": modality})
    assert not BY_KEY["unlabeled"].when(answers) and not BY_KEY["objective"].when(answers)
    assert "Objective" not in [r.decision for r in explain(answers).rows]
    with pytest.raises(
        AnswerError, match=r"objective=ssl with modality=.*use objective=supervised"
    ):
        resolve({"modality": modality, "objective": "ssl"})


def test_masked_pretraining_needs_positions_unless_a_scan_orders_the_patches():
    with pytest.raises(AnswerError, match="cannot tell which patch it is to reconstruct"):
        resolve({"modality": "image", "objective": "ssl", "position": "none"})
    resolve({"modality": "image", "position": "none"})  # supervised: a set of patches is fine
    ssm = {"attention": "ssm", "streaming": True, "position": "none"}
    assert resolve({"modality": "timeseries", "objective": "ssl", **ssm})["objective"] == "ssl"


TP_READY = {"model_size": "large", "gpus_per_node": 8, "parallelism": "fsdp2_tp"}


def test_tensor_parallel_renders_for_the_language_model_on_nvlink():
    a = resolve(TP_READY)
    assert (a["tp"], a["dp_shard"], a["dp_replicate"], a["dp_degree"]) == (8, -1, 1, 1)
    assert rules.check_parallelism(a) is None


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ({"accelerator": "cpu"}, "accelerator=cpu, which has no NVLink"),
        ({"modality": "image"}, "modality=image: tensor parallel is rendered for the language"),
        ({"attention": "mla"}, "attention=mla: no plan is rendered"),
        ({"attention": "ssm"}, "attention=ssm: the selective scan has no heads"),
        ({"ffn": "moe"}, "ffn=moe: no plan is rendered for the experts"),
        ({"attention": "mqa"}, "no tensor-parallel degree from 2 to 8 divides"),
    ],
)
def test_tensor_parallel_is_refused_where_it_does_not_apply(answers, message):
    a = resolve({**TP_READY, "parallelism": "fsdp2"}) | answers | {"parallelism": "fsdp2_tp"}
    if "attention" in answers and answers["attention"] == "mqa":
        a["n_kv_heads"] = 1
    refusal = rules.check_parallelism(a)
    assert refusal is not None and message in refusal
    assert "pick fsdp2" in refusal


def test_the_mesh_replicates_across_nodes_and_shards_within_one():
    ddp = resolve({"model_size": "medium", "gpus_per_node": 8})
    assert ddp["parallelism"] == "ddp" and rules.mesh(ddp) == (-1, 1, 1, 1)
    one_node = resolve({"model_size": "large", "gpus_per_node": 8})
    assert rules.mesh(one_node) == (1, -1, 1, 1)
    two_nodes = resolve({"model_size": "large", "gpus_per_node": 8, "nodes": 2})
    assert two_nodes["parallelism"] == "fsdp2" and rules.mesh(two_nodes) == (2, -1, 1, 1)
    # HSDP: the state is split over one node's GPUs, not over all 16.
    assert rules.degrees(two_nodes, "fsdp2")[0] == 8
    full = rules.memory_for(one_node, "fsdp2", "none").state_bytes
    assert rules.memory_for(two_nodes, "fsdp2", "none").state_bytes == pytest.approx(full)


def test_tensor_parallel_groups_share_a_batch():
    """Each TP group reads one micro-batch: the data-parallel degree is the world over tp,
    and accumulation makes up the tokens per step from it."""
    a = resolve(TP_READY | {"nodes": 2})
    assert a["dp_degree"] == a["world_size"] // a["tp"] == 2
    tokens = a["batch_size"] * a["seq_len"] * a["dp_degree"] * a["grad_accum_steps"]
    assert tokens >= a["tokens_per_step"] > tokens - a["batch_size"] * a["seq_len"] * 2


def test_a_state_too_large_for_one_node_is_sharded_over_every_node():
    """HSDP only where a node's GPUs hold the sharded state: 70B on 8 nodes of 8 shards
    over all 64 ranks (17.6 GB each), where one node's 8 would hold 141 GB each."""
    a = resolve({"model_size": "xl", "gpus_per_node": 8, "nodes": 8})
    assert a["parallelism"].startswith("fsdp2_tp") and rules.mesh(a)[0] == 1
    assert rules.degrees(a, a["parallelism"])[0] == 64


XL_ON_8_NODES = {"model_size": "xl", "gpus_per_node": 8, "nodes": 8, "accelerator": "h100"}
PP_READY = {"gpus_per_node": 4, "accelerator": "h100", "parallelism": "fsdp2_tp_pp"}


def test_a_deep_model_on_many_nodes_is_pipelined_one_stage_per_node():
    """70B (80 layers) on 8 nodes: eight stages of TP 8, no data parallel left; interleaved,
    16 stages of 5 layers, and the micro-batches of one sequence tokens_per_step needs."""
    a = resolve(XL_ON_8_NODES)
    assert a["parallelism"] == "fsdp2_tp_pp"
    assert rules.mesh(a) == (1, -1, 8, 8) and a["dp_degree"] == 1
    assert a["pp_schedule"] == "Interleaved1F1B"
    assert a["grad_accum_steps"] == 1  # the schedule runs the micro-batches
    tokens = a["batch_size"] * a["seq_len"] * a["pp_microbatches"] * a["dp_degree"]
    assert tokens >= a["tokens_per_step"] and a["pp_microbatches"] % a["pp"] == 0
    assert rules.pipeline_bubble("Interleaved1F1B", 8, a["pp_microbatches"]) < 0.01


def test_the_pipeline_rule_picks_1f1b_where_stages_would_hold_one_layer():
    a = resolve(PP_READY)  # 4 layers over 2 stages
    assert a["pp"] == 2 and a["pp_schedule"] == "1F1B"
    assert a["pp_microbatches"] >= 2 and rules.check_pp_microbatches(a) is None
    assert rules.mesh(a) == (1, -1, a["tp"], 2)


def test_the_bubble_and_the_kept_activations_follow_the_schedule():
    assert rules.pipeline_bubble("1F1B", 4, 12) == pytest.approx(3 / 15)
    assert rules.pipeline_bubble("GPipe", 4, 12) == pytest.approx(3 / 15)
    assert rules.pipeline_bubble("Interleaved1F1B", 4, 12) == pytest.approx(3 / 27)
    a = resolve(PP_READY)
    kept = {}
    for schedule in rules.PP_SCHEDULES:
        b = a | {"pp_schedule": schedule, "pp_microbatches": 4}
        kept[schedule] = rules.memory_for(b, "fsdp2_tp_pp", "none")
    act = {schedule: m.activation_bytes for schedule, m in kept.items()}
    # 1F1B keeps one micro-batch through every layer's worth (2 of 4, over half the layers),
    # GPipe two (all 4), the interleaved schedule 1 + (2 - 1) / (2 x 2) = 1.25: per-step
    # parts (the position tables) aside, which cancel in the differences.
    assert act["Interleaved1F1B"] - act["1F1B"] == pytest.approx(
        0.25 * (act["GPipe"] - act["1F1B"])
    )
    fsdp = resolve(PP_READY | {"parallelism": "fsdp2_tp"})
    assert act["1F1B"] == pytest.approx(
        rules.memory_for(fsdp | {"tp_degree": a["tp"]}, "fsdp2_tp", "none").activation_bytes
    )
    # A stage's weights stay gathered: half the model over 2 stages, split by TP.
    params = rules.param_count(a)
    assert kept["1F1B"].unsharded_bytes == pytest.approx(params / 2 * 2 / a["tp"])


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ({"pp_microbatches": 1}, "pp_microbatches=1 for 2 pipeline stages"),
        (
            {"pp_schedule": "Interleaved1F1B", "pp_microbatches": 3},
            "use a multiple of 2, or pp_schedule=1F1B",
        ),
        ({"pp_schedule": "Interleaved1F1B", "n_layers": 3}, "makes 4 stages of 3 layers"),
        ({"pp_schedule": "ZeroBubble"}, "choose one of GPipe, 1F1B, Interleaved1F1B"),
    ],
)
def test_pipelines_the_schedule_cannot_run_are_refused(answers, message):
    a = resolve(PP_READY) | answers
    refusal = rules.check_pp_schedule(a) or rules.check_pp_microbatches(a)
    assert refusal is not None and message in refusal


def test_a_pipeline_takes_whole_groups_of_gpus_and_tp_fits_inside_a_stage():
    """Two stages on one node of 8: TP 4 inside each (TP 8 would need 16 GPUs)."""
    one_node = resolve(TP_READY | {"parallelism": "fsdp2_tp_pp"})
    assert rules.mesh(one_node) == (1, -1, 4, 2) and one_node["tp_degree"] == 8
    a = resolve(PP_READY) | {"gpus_per_node": 3, "world_size": 3}
    refusal = rules.check_parallelism(a)
    assert refusal is not None and "takes GPUs in groups of 2, and there are 3" in refusal
    deep = resolve(PP_READY) | {"nodes": 8, "n_layers": 4, "world_size": 32}
    assert "8 pipeline stages for 4 layers" in rules.check_parallelism(deep)
