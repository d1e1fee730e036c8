"""loom.optim: optimizers and learning-rate schedules, as torch.optim."""

from loom.optim import lr_scheduler
from loom.optim.adam import Adam, AdamW
from loom.optim.optimizer import Optimizer
from loom.optim.sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]
