"""The process group, the device mesh, and the few collectives the trainer needs.

Under torchrun every process finds its rank in the environment (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT). Started without torchrun, the process forms a group of
one, so a run on a single device goes through the same code as a run on many: the same
per-rank batches, loss averaging and distributed checkpoints.

The ranks form a mesh of ``[parallel]``'s degrees, ``pp x dp_replicate x dp_shard x tp``,
the innermost dimension last (torchtitan's order): the ``tp`` ranks of one group are
neighbours, on one node, where tensor parallel's per-layer collectives ride NVLink; the
pipeline stages are the outermost, a node (or a group of them) each, exchanging only the
activations at their boundary. Each data-parallel rank reads its own batches; the ``tp``
ranks of one group and the stages of one pipeline read the same ones.
"""

import logging
import math
import os
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import loss_parallel

from ..config import ConfigError, ParallelConfig

MESH_DIMS = ("pp", "dp_replicate", "dp_shard", "tp")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class World:
    rank: int
    world_size: int
    device: torch.device  # this rank's device
    mesh: DeviceMesh  # (pp, dp_replicate, dp_shard, tp), MESH_DIMS, degrees of 1 included
    dp: DeviceMesh  # 1-D: the data-parallel ranks (dp_replicate x dp_shard, flattened)

    @property
    def dp_rank(self) -> int:
        """Which share of every batch this rank reads."""
        return self.dp.get_local_rank()

    @property
    def dp_size(self) -> int:
        """How many shares every batch is split into."""
        return self.dp.size()

    def sum(self, value: Tensor) -> Tensor:
        """``value`` summed over the data-parallel ranks, left on the device (every rank gets
        the result). The ``tp`` ranks of a group hold the same value: it is counted once."""
        total = value.detach().clone()
        if self.dp_size > 1:
            dist.all_reduce(total, op=dist.ReduceOp.SUM, group=self.dp.get_group())
        return total

    def from_last_stage(self, values: dict[str, Tensor]) -> dict[str, Tensor]:
        """The last pipeline stage's ``values`` on every stage of its pipeline: only the last
        stage has the model's output, so only it can score a batch. As they are without a
        pipeline."""
        pp = self.mesh["pp"]
        if pp.size() == 1:
            return values
        box = [{name: value.cpu() for name, value in values.items()}]
        last = dist.get_global_rank(pp.get_group(), pp.size() - 1)
        dist.broadcast_object_list(box, src=last, group=pp.get_group())
        return {name: value.to(self.device) for name, value in box[0].items()}

    def clip_grad_norm_(self, parameters: list[Tensor], max_norm: float) -> Tensor:
        """``nn.utils.clip_grad_norm_`` over the whole model, returning the norm before
        clipping. Under pipeline parallel each stage holds some of the parameters: the
        squared norms are summed over the stages first."""
        if self.mesh["pp"].size() == 1:
            return nn.utils.clip_grad_norm_(parameters, max_norm)
        norm = nn.utils.get_total_norm([p.grad for p in parameters if p.grad is not None])
        squared = full(norm).float() ** 2
        dist.all_reduce(squared, group=self.mesh["pp"].get_group())
        norm = squared.sqrt()
        nn.utils.clip_grads_with_norm_(parameters, max_norm, norm)
        return norm

    def mean_each(self, values: Tensor) -> list[float]:
        """The average over the data-parallel ranks of each element of ``values``, in one
        all-reduce."""
        return (self.sum(values.float()) / self.dp_size).tolist()


def mesh_shape(
    parallel: ParallelConfig, world_size: int, supported: tuple[str, ...]
) -> dict[str, int]:
    """``[parallel]``'s degrees for ``world_size`` ranks, the -1 resolved, in MESH_DIMS order.

    Checked before any process group starts: the degrees must multiply to the world size,
    and a degree above 1 needs a layout that renders it (``supported``). One process is one
    device, whatever the degrees.
    """
    if world_size == 1:
        # One process (python -m, no torchrun) trains the whole model on one device, whatever
        # the mesh planned for many: the same config runs on a laptop and on the cluster.
        return dict.fromkeys(MESH_DIMS, 1)
    degrees = {name: getattr(parallel, name) for name in MESH_DIMS}
    rest = [name for name, degree in degrees.items() if degree == -1]
    known = math.prod(degree for degree in degrees.values() if degree != -1)
    if rest:
        if world_size % known:
            raise ConfigError(
                f"{world_size} rank{'s' * (world_size != 1)} started, which "
                f"{'does' if world_size == 1 else 'do'} not split into "
                f"parallel.{rest[0]} x {known} (the other degrees): start a multiple of "
                f"{known}, or change [parallel]"
            )
        degrees[rest[0]] = world_size // known
    elif known != world_size:
        shown = " x ".join(f"{name}={degree}" for name, degree in degrees.items())
        raise ConfigError(
            f"the mesh [parallel] {shown} holds {known} rank{'s' * (known != 1)}, and "
            f"{world_size} were started: "
            f"start {known} (torchrun --nproc_per_node ... --nnodes ...), or set one degree "
            "to -1 to take what the others leave"
        )
    for name, degree in degrees.items():
        if degree > 1 and name not in supported:
            raise ConfigError(
                f"parallel.{name} = {degree}, but this project's layout does not render "
                f"{LAYOUT_OF[name]}: set parallel.{name}=1, or grow the project with "
                f"`tmd update --data parallelism={UPDATE_TO[name]}`"
            )
    return degrees


LAYOUT_OF = {
    "pp": "pipeline parallel",
    "dp_replicate": "data-parallel replicas",
    "dp_shard": "sharded data parallel (FSDP2)",
    "tp": "tensor parallel",
}
UPDATE_TO = {"pp": "fsdp2_tp_pp", "dp_replicate": "ddp", "dp_shard": "fsdp2", "tp": "fsdp2_tp"}


def init_distributed(
    device: torch.device, parallel: ParallelConfig, supported: tuple[str, ...]
) -> World:
    """Join (or form) the process group, NCCL between GPUs and gloo on the CPU, and lay its
    ranks out as ``parallel`` says (``mesh_shape``; ``supported``: the degrees the layout
    renders).

    Ranks other than 0 log warnings only, so a run prints each message once. Calling it again
    in the same process reuses the group.
    """
    started = int(os.environ.get("WORLD_SIZE", 1))
    world_size = dist.get_world_size() if dist.is_initialized() else started
    shape = mesh_shape(parallel, world_size, supported)  # before any process group starts
    if world_size == 1 and max(parallel.tp, parallel.pp, parallel.dp_replicate) > 1:
        log.info("one process: [parallel]'s mesh applies to the ranks torchrun starts")
    backend = "nccl" if device.type == "cuda" else "gloo"
    if not dist.is_initialized():
        if "RANK" in os.environ:
            dist.init_process_group(backend)
        else:
            dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    rank, world_size = dist.get_rank(), dist.get_world_size()
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    if rank != 0:
        logging.getLogger(__package__).setLevel(logging.WARNING)
    mesh = init_device_mesh(device.type, tuple(shape.values()), mesh_dim_names=MESH_DIMS)
    return World(rank, world_size, device, mesh, mesh["dp_replicate", "dp_shard"]._flatten("dp"))


def loss_context(world: World) -> Callable[[], AbstractContextManager]:
    """What the loss and its backward run in. Under tensor parallel (``parallel.tp`` > 1) the
    head's logits are split over the vocabulary, and ``loss_parallel`` computes the
    cross-entropy on the shards: the softmax's max and sum are all-reduced, and no rank gathers
    the (tokens, vocab_size) logits."""
    return loss_parallel if world.mesh["tp"].size() > 1 else nullcontext


def local(value: Tensor) -> Tensor:
    """A replicated DTensor as the plain tensor every rank holds (the loss under tensor
    parallel's ``loss_parallel``); any other tensor as it is."""
    return value.to_local() if isinstance(value, DTensor) else value


def full(value: Tensor) -> Tensor:
    """A DTensor's full value (a sum still pending over its ranks is reduced); any other
    tensor as it is."""
    return value.full_tensor() if isinstance(value, DTensor) else value


def is_main_process() -> bool:
    return not dist.is_initialized() or dist.get_rank() == 0


def barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def destroy() -> None:
    """Leave the process group (NCCL warns at exit otherwise); harmless if there is none."""
    if dist.is_initialized():
        dist.destroy_process_group()
