"""Inference quantization through torchao: ``quantize.method``, applied as the model is loaded
for inference (``load_for_inference``: what ``generate``, ``serve`` and ``export`` call).

- ``int8_weight_only``: each Linear's weight in int8, one scale per output row, dequantized in
  the matmul. A forward of few rows (batch-1 decode, one image) reads every weight once, so a
  quarter of fp32's bytes is what speeds it up where memory bandwidth is the limit (a GPU;
  ``torch.compile`` fuses the dequantization into the matmul there and on a CPU).
- ``int8_dynamic``: int8 weights, and each activation quantized per row before its matmul,
  which then runs in int8. It pays where the matmuls are compute-bound: many rows per forward
  (a served batch, a prompt, many sequences decoding together).
- ``int4_weight_only``: int4 weights in groups of 128, packed for CUDA's int4 kernels (bf16).
- ``fp8``: fp8 weights and dynamically scaled fp8 activations on fp8 tensor cores (compute
  capability 8.9 and later).

Every ``nn.Linear`` is quantized, the output head included: torchao's ``quantize_`` swaps
each weight for a quantized tensor in place. What is not a Linear stays in the training
precision: embeddings, norms, convolutions and the stacked expert weights of a mixture of
experts. ``quantize`` (the command) writes the quantized weights of the latest checkpoint
once, to ``checkpoint.dir``/quantized/METHOD.pt (torchao's tensors load with
``weights_only``), and scores them against the unquantized model on the validation batches;
``load_for_inference`` then reads them instead of quantizing again, as long as they are of
the latest checkpoint.
"""

import logging
from pathlib import Path
from types import ModuleType

import torch
from torch import nn

from ..config import Config, ConfigError
from ..device import select_device
from ..training.checkpoint import checkpoints, load_model_weights, step_of
from ..training.precision import for_inference
from ..training.train import evaluate_checkpoint, init_model

log = logging.getLogger(__name__)


def torchao_quantization(method: str) -> ModuleType:
    """``torchao.quantization``, imported on demand: only a quantizing run needs torchao.
    Importing it also lets ``torch.load(weights_only=True)`` read its tensors."""
    try:
        import torchao.quantization
    except ImportError as error:
        raise ConfigError(
            f"quantize.method={method} needs torchao: pip install -e '.[quantize]'"
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
            f"quantize.method=int4_weight_only runs on torchao's CUDA int4 kernels, and "
            f"this run is on {device.type}: use int8_weight_only, or a GPU"
        )
    if method == "fp8":
        capability = torch.cuda.get_device_capability(device) if device.type == "cuda" else None
        if capability is None or capability < (8, 9):
            where = f"compute capability {capability}" if capability else device.type
            return (
                f"quantize.method=fp8 runs on fp8 tensor cores (compute capability 8.9 "
                f"or later), and this run is on {where}: use int8_weight_only"
            )
    return None


def quantize(model: nn.Module, method: str, device: torch.device) -> nn.Module:
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
    return Path(cfg.checkpoint.dir) / "quantized" / f"{cfg.quantize.method}.pt"


def save_quantized(model: nn.Module, cfg: Config, step: int) -> Path:
    """Write ``model``'s quantized weights, of checkpoint ``step``; return the path."""
    path = quantized_path(cfg)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.cpu() for k, v in model.state_dict().items()}
    torch.save({"step": step, "method": cfg.quantize.method, "model": state}, path)
    return path


def saved_quantized(cfg: Config) -> dict | None:
    """The saved quantized weights (``step``, ``method``, ``model``) if they are of the latest
    checkpoint, else None."""
    path, found = quantized_path(cfg), checkpoints(cfg.checkpoint.dir)
    if not path.is_file() or not found:
        return None
    torchao_quantization(cfg.quantize.method)
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


def load_for_inference(cfg: Config, precision: str | None = None) -> tuple[nn.Module, torch.device]:
    """The latest checkpoint's model (or a random one, with a warning) in eval mode on the
    device, in ``precision`` (default: the one it trained in), quantized as
    ``quantize.method`` says: from the saved quantized weights when they are of the latest
    checkpoint."""
    device = select_device(cfg.train.device)
    model = init_model(cfg)
    method = cfg.quantize.method
    if method != "none" and (why := device_error(method, device)):
        # As training falls back from fp8 off its GPUs: the project still runs on a laptop.
        log.warning("%s; loading the model without quantization", why)
        method = "none"
    saved = saved_quantized(cfg) if method != "none" else None
    step = saved["step"] if saved else load_model_weights(model, cfg.checkpoint.dir)
    if step is None:
        log.warning(
            "no checkpoint in %s/: running randomly initialised weights", cfg.checkpoint.dir
        )
    for_inference(model, device, precision or cfg.train.precision)
    if method != "none":
        quantize(model, method, device)
    if saved:
        model.load_state_dict({k: v.to(device) for k, v in saved["model"].items()}, assign=True)
    if step is not None:
        source = quantized_path(cfg) if saved else f"{cfg.checkpoint.dir}/"
        log.info("loaded the weights of step %d from %s (quantization: %s)", step, source, method)
    return model.eval(), device


def write_quantized(cfg: Config) -> dict:
    """The ``quantize`` command: the latest checkpoint's weights, quantized as
    ``quantize.method`` says, written where ``load_for_inference`` reads them; and the
    validation scores of the model before and after, on the batches ``eval`` reads, which say
    what the quantization costs."""
    method = cfg.quantize.method
    if method == "none":
        raise ConfigError(
            "quantize.method = none: name the method to write, e.g. "
            "quantize.method=int8_weight_only"
        )
    found = checkpoints(cfg.checkpoint.dir)
    if not found:
        raise ConfigError(
            f"no checkpoint in {cfg.checkpoint.dir}: train first, or point checkpoint.dir at one"
        )
    if why := device_error(method, select_device(cfg.train.device)):
        raise ConfigError(why)
    model, _ = load_for_inference(cfg)
    step = step_of(found[-1])
    path = save_quantized(model, cfg, step)
    measured = evaluate_checkpoint(cfg, beside={method: model})
    quantized = measured[method]
    log.info("quantized (%s): %s", method, ", ".join(f"{k} {v:.4g}" for k, v in quantized.items()))
    scores = {"none": {k: measured[k] for k in quantized}, method: quantized}
    return {"quantized": str(path), "step": step, "method": method, "val": scores}
