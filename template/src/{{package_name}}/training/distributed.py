"""The process group, the device mesh, and the few collectives the trainer needs.

Under torchrun every process finds its rank in the environment (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT). Started without torchrun, the process forms a group of
one, so a run on a single device goes through the same code as a run on many: the same
per-rank batches, loss averaging and distributed checkpoints.
"""

import logging
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh


@dataclass(frozen=True)
class World:
    rank: int
    world_size: int
    device: torch.device  # this rank's device
    mesh: DeviceMesh  # 1-D, "dp": the data-parallel ranks

    def sum(self, value: Tensor) -> Tensor:
        """``value`` summed over all ranks, left on the device (every rank gets the result)."""
        total = value.detach().clone()
        if self.world_size > 1:
            dist.all_reduce(total, op=dist.ReduceOp.SUM)
        return total

    def mean_each(self, values: Tensor) -> list[float]:
        """The average over all ranks of each element of ``values``, in one all-reduce."""
        total = values.detach().float().clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        return (total / self.world_size).tolist()


def init_distributed(device: torch.device) -> World:
    """Join (or form) the process group: NCCL between GPUs, gloo on the CPU.

    Ranks other than 0 log warnings only, so a run prints each message once. Calling it again
    in the same process reuses the group.
    """
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
    mesh = init_device_mesh(device.type, (world_size,), mesh_dim_names=("dp",))
    return World(rank, world_size, device, mesh)


def is_main_process() -> bool:
    return not dist.is_initialized() or dist.get_rank() == 0


def barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def destroy() -> None:
    """Leave the process group (NCCL warns at exit otherwise); harmless if there is none."""
    if dist.is_initialized():
        dist.destroy_process_group()
