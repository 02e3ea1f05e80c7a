"""The model: plain ``nn.Module`` s and a dataclass config, nothing else.

Devices, precision, compilation, activation checkpointing and data parallelism are applied
from outside (see ``parallelize.py``), so this package reads the same in every layout.
"""

from .args import ModelConfig
from .blocks import FeedForward, Mixer, Norm, TransformerBlock
from .transformer import Transformer

__all__ = ["FeedForward", "Mixer", "ModelConfig", "Norm", "Transformer", "TransformerBlock"]
