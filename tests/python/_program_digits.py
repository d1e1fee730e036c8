"""A digit classifier script written for the tests in the shape of a typical PyTorch training script
(a small CNN, Adadelta with a step-decayed rate, shuffled loaders, a test pass each epoch, a saved
state_dict), importing loom under PyTorch's name: test_programs_digits.py runs it on both devices
and, with that import changed to `import torch`, under PyTorch. Data: noisy class prototypes of
MNIST's shape (no download here). Run alone: python _program_digits.py [cpu|lazy]"""
import sys

import loom as torch
# The submodules through the alias: `import torch.nn as nn` would resolve the name `torch` as a
# module, importing PyTorch's.
nn = torch.nn
F = torch.nn.functional
DataLoader, TensorDataset = torch.utils.data.DataLoader, torch.utils.data.TensorDataset

SETTINGS = {"epochs": 4, "batch": 16, "eval_batch": 32, "rate": 1.0, "decay": 0.7, "report_every": 2}


class DigitNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 16, 3)
        self.c2 = nn.Conv2d(16, 32, 3)
        self.drop_conv = nn.Dropout(0.25)
        self.hidden = nn.Linear(32 * 12 * 12, 64)
        self.drop_fc = nn.Dropout(0.5)
        self.logits = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.c2(F.relu(self.c1(x))))
        x = self.drop_conv(F.max_pool2d(x, 2))
        x = self.drop_fc(F.relu(self.hidden(torch.flatten(x, 1))))
        return F.log_softmax(self.logits(x), dim=1)


def synthetic_digits(n):
    """n images: ten blurred random prototypes, noise added, standardized; and their labels."""
    prototypes = (torch.rand(10, 1, 28, 28) > 0.5).float() * 2
    prototypes = F.avg_pool2d(F.pad(prototypes, (1, 1, 1, 1), mode="reflect"), 3, stride=1)
    labels = torch.randint(0, 10, (n,))
    images = prototypes[labels] + 0.3 * torch.randn(n, 1, 28, 28)
    return (images - images.mean()) / images.std(), labels


def train_epoch(model, device, loader, optimizer, epoch):
    model.train()
    for i, (x, y) in enumerate(loader):
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = F.nll_loss(model(x), y)
        loss.backward()
        optimizer.step()
        if i % SETTINGS["report_every"] == 0:
            print(f"epoch {epoch} batch {i}/{len(loader)} seen {i * len(x)}/{len(loader.dataset)} "
                  f"loss={loss.item():.6f}")


def evaluate(model, device, loader):
    model.eval()
    total, right = 0.0, 0
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            scores = model(x)
            total += F.nll_loss(scores, y, reduction="sum").item()
            right += scores.argmax(dim=1).eq(y).sum().item()
    n = len(loader.dataset)
    print(f"eval mean_loss={total / n:.4f} right={right}/{n}")


def main(device_name="cpu", save_to=None):
    device = torch.device(device_name)
    torch.manual_seed(1)
    images, labels = synthetic_digits(160)
    train_loader = DataLoader(TensorDataset(images[:128], labels[:128]), batch_size=SETTINGS["batch"],
                              shuffle=True)
    eval_loader = DataLoader(TensorDataset(images[128:], labels[128:]), batch_size=SETTINGS["eval_batch"])
    model = DigitNet().to(device)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=SETTINGS["rate"])
    schedule = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=SETTINGS["decay"])
    for epoch in range(1, SETTINGS["epochs"] + 1):
        train_epoch(model, device, train_loader, optimizer, epoch)
        evaluate(model, device, eval_loader)
        schedule.step()
    if save_to:
        torch.save(model.state_dict(), save_to)
    return model


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "cpu")
