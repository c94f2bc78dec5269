"""Neural-network layers as forward/backward pairs, the transformer, losses, optimisers and the training loop."""

__all__: list[str] = []
