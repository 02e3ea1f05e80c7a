"""tmd: the decision engine, guided flow and CLI behind the torch-model-design template."""

__version__ = "0.2.0"
