"""PyTorch's examples/mnist/main.py as its users write it, with `import loom as torch` (the one
line changed) and MNIST-shaped random data in place of torchvision's MNIST (no download here).
test_port_mnist.py runs it on both devices and, with the import changed back, under PyTorch.
Run alone: python _port_mnist.py [cpu|lazy]"""
import sys

import loom as torch
# `import torch.nn as nn` would import the real torch's submodule (the alias is a local name, not
# sys.modules['torch']): the submodules are reached through the alias instead.
nn = torch.nn
F = torch.nn.functional
optim = torch.optim
StepLR = torch.optim.lr_scheduler.StepLR
DataLoader, TensorDataset = torch.utils.data.DataLoader, torch.utils.data.TensorDataset


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


def train(args, model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % args["log_interval"] == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item()))


def test(model, device, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction='sum').item()  # sum up batch loss
            pred = output.argmax(dim=1, keepdim=True)  # get the index of the max log-probability
            correct += pred.eq(target.view_as(pred)).sum().item()
    test_loss /= len(test_loader.dataset)
    print('\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n'.format(
        test_loss, correct, len(test_loader.dataset),
        100. * correct / len(test_loader.dataset)))


def main(device_name="cpu", save_to=None):
    args = {"batch_size": 16, "test_batch_size": 32, "epochs": 4, "lr": 1.0, "gamma": 0.7, "log_interval": 2}
    device = torch.device(device_name)
    torch.manual_seed(1)
    # MNIST-shaped data: 10 blurred class prototypes plus noise, normalized as the example does.
    protos = (torch.rand(10, 1, 28, 28) > 0.5).float() * 2
    protos = F.avg_pool2d(F.pad(protos, (1, 1, 1, 1), mode="reflect"), 3, stride=1)
    labels = torch.randint(0, 10, (160,))
    images = protos[labels] + 0.3 * torch.randn(160, 1, 28, 28)
    images = (images - 0.1307) / 0.3081
    train_set = TensorDataset(images[:128], labels[:128])
    test_set = TensorDataset(images[128:], labels[128:])
    train_loader = DataLoader(train_set, batch_size=args["batch_size"], shuffle=True)
    test_loader = DataLoader(test_set, batch_size=args["test_batch_size"])

    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=args["lr"])
    scheduler = StepLR(optimizer, step_size=1, gamma=args["gamma"])
    for epoch in range(1, args["epochs"] + 1):
        train(args, model, device, train_loader, optimizer, epoch)
        test(model, device, test_loader)
        scheduler.step()
    if save_to:
        torch.save(model.state_dict(), save_to)
    return model


if __name__ == '__main__':
    main(sys.argv[1] if len(sys.argv) > 1 else "cpu")
