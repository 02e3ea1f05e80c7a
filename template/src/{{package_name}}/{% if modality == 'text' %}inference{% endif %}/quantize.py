"""Inference quantization through torchao: ``generate.quantization``, applied as ``generate``
loads the model.

- ``int8_weight_only``: each Linear's weight in int8, one scale per output row, dequantized in
  the matmul. Batch-1 decode reads every weight once per token, so a quarter of fp32's bytes is
  what speeds it up where memory bandwidth is the limit (a GPU; ``torch.compile`` fuses the
  dequantization into the matmul there and on a CPU).
- ``int8_dynamic``: int8 weights, and each activation quantized per token before its matmul,
  which then runs in int8. It pays where decode is compute-bound: many sequences per step.
- ``int4_weight_only``: int4 weights in groups of 128, packed for CUDA's int4 kernels (bf16).
- ``fp8``: fp8 weights and dynamically scaled fp8 activations on fp8 tensor cores (compute
  capability 8.9 and later).

Every ``nn.Linear`` is quantized, the output head included: torchao's ``quantize_`` swaps
each weight for a quantized tensor in place. Embeddings and norms stay in the training
precision, and so do the stacked expert weights of a mixture of experts, which are not
Linears. ``quantize`` (the command) writes the quantized weights of the latest checkpoint once,
to ``checkpoint.dir``/quantized/METHOD.pt (torchao's tensors load with ``weights_only``);
``generate`` then reads them instead of quantizing again, as long as they are of the latest
checkpoint.
"""

import logging
from pathlib import Path
from types import ModuleType

import torch
from torch import nn

from ..config import Config, ConfigError
from ..model import Transformer
from ..training.checkpoint import checkpoints, step_of

log = logging.getLogger(__name__)


def torchao_quantization(method: str) -> ModuleType:
    """``torchao.quantization``, imported on demand: only a quantizing run needs torchao.
    Importing it also lets ``torch.load(weights_only=True)`` read its tensors."""
    try:
        import torchao.quantization
    except ImportError as error:
        raise ConfigError(
            f"generate.quantization={method} needs torchao: pip install -e '.[quantize]'"
        ) from error
    return torchao.quantization


def config_for(method: str) -> object:
    """torchao's config for ``method``, for ``quantize_``."""
    ao = torchao_quantization(method)
    return {
        "int8_weight_only": ao.Int8WeightOnlyConfig,
        "int8_dynamic": ao.Int8DynamicActivationInt8WeightConfig,
        "int4_weight_only": lambda: ao.Int4WeightOnlyConfig(
            group_size=128, int4_packing_format="tile_packed_to_4d"
        ),
        "fp8": ao.Float8DynamicActivationFloat8WeightConfig,
    }[method]()


def device_error(method: str, device: torch.device) -> str | None:
    """Why ``method`` cannot run on ``device``, with the way out; None if it can."""
    if method == "int4_weight_only" and device.type != "cuda":
        return (
            f"generate.quantization=int4_weight_only runs on torchao's CUDA int4 kernels, and "
            f"this run is on {device.type}: use int8_weight_only, or a GPU"
        )
    if method == "fp8":
        capability = torch.cuda.get_device_capability(device) if device.type == "cuda" else None
        if capability is None or capability < (8, 9):
            where = f"compute capability {capability}" if capability else device.type
            return (
                f"generate.quantization=fp8 runs on fp8 tensor cores (compute capability 8.9 "
                f"or later), and this run is on {where}: use int8_weight_only"
            )
    return None


def quantize(model: Transformer, method: str, device: torch.device) -> Transformer:
    """Quantize every Linear of ``model`` (on ``device``) in place as ``method`` says."""
    if (error := device_error(method, device)) is not None:
        raise ConfigError(error)
    if method == "int4_weight_only":
        model.to(torch.bfloat16)  # the int4 kernels take bf16 activations
    torchao_quantization(method).quantize_(
        model, config_for(method), filter_fn=lambda module, _: isinstance(module, nn.Linear)
    )
    return model


def quantized_path(cfg: Config) -> Path:
    return Path(cfg.checkpoint.dir) / "quantized" / f"{cfg.generate.quantization}.pt"


def save_quantized(model: Transformer, cfg: Config, step: int) -> Path:
    """Write ``model``'s quantized weights, of checkpoint ``step``; return the path."""
    path = quantized_path(cfg)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.cpu() for k, v in model.state_dict().items()}
    torch.save({"step": step, "method": cfg.generate.quantization, "model": state}, path)
    return path


def saved_quantized(cfg: Config) -> dict | None:
    """The saved quantized weights (``step``, ``method``, ``model``) if they are of the latest
    checkpoint, else None."""
    path, found = quantized_path(cfg), checkpoints(cfg.checkpoint.dir)
    if not path.is_file() or not found:
        return None
    torchao_quantization(cfg.generate.quantization)
    saved = torch.load(path, map_location="cpu", weights_only=True)
    latest = step_of(found[-1])
    if saved["step"] != latest:
        log.info(
            "%s is of step %d and the latest checkpoint of step %d: quantizing that one",
            path,
            saved["step"],
            latest,
        )
        return None
    return saved
