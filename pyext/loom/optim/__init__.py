"""loom.optim: optimizers and learning-rate schedules, as torch.optim."""

from loom.optim import lr_scheduler, swa_utils
from loom.optim.adadelta import Adadelta
from loom.optim.adagrad import Adagrad
from loom.optim.adam import Adam, AdamW
from loom.optim.adamax import Adamax
from loom.optim.asgd import ASGD
from loom.optim.lbfgs import LBFGS
from loom.optim.nadam import NAdam
from loom.optim.optimizer import Optimizer
from loom.optim.radam import RAdam
from loom.optim.rmsprop import RMSprop
from loom.optim.rprop import Rprop
from loom.optim.sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adadelta", "Adagrad", "RMSprop", "Adamax", "NAdam", "RAdam", "ASGD",
           "Rprop", "LBFGS", "lr_scheduler", "swa_utils"]
