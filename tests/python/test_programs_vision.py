"""Image programs written for these tests after the well-known example projects' patterns: a
variational autoencoder, a DCGAN pair, a sub-pixel super-resolution net, a feed-forward style
transfer net, and a row-by-row LSTM digit classifier fed by a DataLoader. Each trains a few steps on
`cpu` and `lazy` from PyTorch's initial weights, on synthetic data of its dataset's shapes, and its
losses are PyTorch 1.13's. (_program_digits.py, a whole script, has its own test file.)"""

import types

import numpy as np
import pytest

import loom
from _programs import DEVICES, assert_close, load_from, tensor

torch = pytest.importorskip("torch")


def vision(torch):
    """The programs' models and steps, written against `torch` (either library)."""
    nn, F, init = torch.nn, torch.nn.functional, torch.nn.init

    class Autoencoder(nn.Module):
        """Encoder to a diagonal Gaussian, a reparameterized sample, a Bernoulli decoder."""

        def __init__(self, pixels=784, hidden=256, latent=12):
            super().__init__()
            self.pixels = pixels
            self.hidden = nn.Linear(pixels, hidden)
            self.to_mean = nn.Linear(hidden, latent)
            self.to_logvar = nn.Linear(hidden, latent)
            self.expand = nn.Linear(latent, hidden)
            self.out = nn.Linear(hidden, pixels)

        def forward(self, images, eps=None):
            h = F.relu(self.hidden(images.view(-1, self.pixels)))
            mean, logvar = self.to_mean(h), self.to_logvar(h)
            sd = torch.exp(logvar * 0.5)
            if eps is None:
                eps = torch.randn_like(sd)
            z = mean + sd * eps
            return torch.sigmoid(self.out(F.relu(self.expand(z)))), mean, logvar

    def elbo_loss(recon, images, mean, logvar):
        bce = F.binary_cross_entropy(recon, images.view(recon.shape), reduction="sum")
        kl = -0.5 * torch.sum(1 + logvar - mean.pow(2) - logvar.exp())
        return bce + kl

    def gan_init(m):
        kind = type(m).__name__
        if "Conv" in kind:
            init.normal_(m.weight, 0.0, 0.02)
        elif "BatchNorm" in kind:
            init.normal_(m.weight, 1.0, 0.02)
            init.zeros_(m.bias)

    def generator(nz, width, channels):
        layers = []
        sizes = [nz, width * 4, width * 2, width]
        for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
            stride, pad = (1, 0) if i == 0 else (2, 1)
            layers += [nn.ConvTranspose2d(a, b, 4, stride, pad, bias=False), nn.BatchNorm2d(b), nn.ReLU(True)]
        layers += [nn.ConvTranspose2d(width, channels, 4, 2, 1, bias=False), nn.Tanh()]
        return nn.Sequential(*layers)  # nz x 1 x 1 -> channels x 32 x 32

    class Critic(nn.Module):
        def __init__(self, width, channels):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(channels, width, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(width, width * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(width * 2),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(width * 2, width * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(width * 4),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(width * 4, 1, 4, 1, 0, bias=False), nn.Sigmoid())

        def forward(self, x):
            return self.body(x).view(-1, 1).squeeze(1)

    def gan_steps(G, D, device, reals, noises):
        bce = nn.BCELoss()
        opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
        opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
        log = []
        for real, z in zip(reals, noises):
            real, z = real.to(device), z.to(device)
            D.zero_grad()
            target = torch.full((real.size(0),), 1, dtype=real.dtype, device=device)
            p_real = D(real)
            d_real = bce(p_real, target)
            d_real.backward()
            fake = G(z)
            target.fill_(0)
            p_fake = D(fake.detach())
            d_fake = bce(p_fake, target)
            d_fake.backward()
            opt_d.step()
            G.zero_grad()
            target.fill_(1)
            p_fooled = D(fake)
            g_loss = bce(p_fooled, target)
            g_loss.backward()
            opt_g.step()
            log.append(((d_real + d_fake).item(), g_loss.item(), p_real.mean().item(), p_fake.mean().item(),
                        p_fooled.mean().item()))
        return log

    class SubPixel(nn.Module):
        """Convolutions to r*r channels, then a pixel shuffle to an r-times larger image."""

        def __init__(self, r):
            super().__init__()
            self.convs = nn.ModuleList([nn.Conv2d(1, 32, (5, 5), (1, 1), (2, 2)),
                                        nn.Conv2d(32, 32, (3, 3), (1, 1), (1, 1)),
                                        nn.Conv2d(32, r * r, (3, 3), (1, 1), (1, 1))])
            self.shuffle = nn.PixelShuffle(r)
            for conv in self.convs[:-1]:
                init.orthogonal_(conv.weight, init.calculate_gain("relu"))
            init.orthogonal_(self.convs[-1].weight)

        def forward(self, x):
            for conv in self.convs[:-1]:
                x = torch.relu(conv(x))
            return self.shuffle(self.convs[-1](x))

    class PaddedConv(nn.Module):
        """A reflection-padded convolution, optionally after a nearest-neighbour upsampling."""

        def __init__(self, cin, cout, k, stride=1, upsample=None):
            super().__init__()
            self.upsample = upsample
            self.pad = nn.ReflectionPad2d(k // 2)
            self.conv = nn.Conv2d(cin, cout, k, stride)

        def forward(self, x):
            if self.upsample:
                x = F.interpolate(x, scale_factor=self.upsample, mode="nearest")
            return self.conv(self.pad(x))

    class Residual(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.a, self.na = PaddedConv(c, c, 3), nn.InstanceNorm2d(c, affine=True)
            self.b, self.nb = PaddedConv(c, c, 3), nn.InstanceNorm2d(c, affine=True)

        def forward(self, x):
            return x + self.nb(self.b(torch.relu(self.na(self.a(x)))))

    class StyleNet(nn.Module):
        def __init__(self, width=8, blocks=2):
            super().__init__()
            w = width
            stages = [PaddedConv(3, w, 9), nn.InstanceNorm2d(w, affine=True), nn.ReLU(),
                      PaddedConv(w, 2 * w, 3, 2), nn.InstanceNorm2d(2 * w, affine=True), nn.ReLU(),
                      PaddedConv(2 * w, 4 * w, 3, 2), nn.InstanceNorm2d(4 * w, affine=True), nn.ReLU()]
            stages += [Residual(4 * w) for _ in range(blocks)]
            stages += [PaddedConv(4 * w, 2 * w, 3, upsample=2), nn.InstanceNorm2d(2 * w, affine=True), nn.ReLU(),
                       PaddedConv(2 * w, w, 3, upsample=2), nn.InstanceNorm2d(w, affine=True), nn.ReLU(),
                       PaddedConv(w, 3, 9)]
            self.net = nn.Sequential(*stages)

        def forward(self, x):
            return self.net(x)

    class RowReader(nn.Module):
        """Reads a digit's rows as a sequence (an LSTM) and classifies its last state."""

        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(input_size=28, hidden_size=32, batch_first=True)
            self.norm = nn.BatchNorm1d(32)
            # channel dropout on a (batch, features) input, as the pattern has it (PyTorch 1.13 warns)
            self.drop_a, self.drop_b = nn.Dropout2d(0.25), nn.Dropout2d(0.5)
            self.fc = nn.Linear(32, 24)
            self.head = nn.Linear(24, 10)

        def forward(self, x):
            seq, _ = self.lstm(x.reshape(-1, 28, 28))
            last = self.drop_a(self.norm(seq[:, -1, :]))
            return F.log_softmax(self.head(self.drop_b(F.relu(self.fc(last)))), dim=1)

    def fit_rows(model, device, loader, epochs=2):
        opt = torch.optim.Adadelta(model.parameters(), lr=0.1)
        schedule = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)
        losses = []
        for _ in range(epochs):
            model.train()
            for images, labels in loader:
                images, labels = images.to(device), labels.to(device)
                opt.zero_grad()
                loss = F.nll_loss(model(images), labels)
                loss.backward()
                opt.step()
                losses.append(loss.item())
            schedule.step()
        return losses, opt.param_groups[0]["lr"]

    return types.SimpleNamespace(**locals())


@pytest.mark.parametrize("device", DEVICES)
def test_variational_autoencoder(device):
    rng = np.random.default_rng(0)
    batches = [rng.random((8, 1, 28, 28), dtype=np.float32) for _ in range(3)]
    noises = [rng.standard_normal((8, 12)).astype(np.float32) for _ in range(3)]

    def train(lib, model, device):
        opt = lib.optim.Adam(model.parameters(), lr=1e-3)
        p = vision(lib)
        losses = []
        model.train()
        for images, eps in zip(batches, noises):
            images = tensor(lib, images, device)
            opt.zero_grad()
            recon, mean, logvar = model(images, tensor(lib, eps, device))
            loss = p.elbo_loss(recon, images, mean, logvar)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    torch.manual_seed(0)
    theirs = vision(torch).Autoencoder()
    mine = load_from(theirs, vision(loom).Autoencoder(), device)
    want = train(torch, theirs, None)
    assert_close(train(loom, mine, device), want, 1e-4)
    assert want[-1] < want[0]
    # the model's own noise (randn_like on its device): the same seed draws the same on cpu and lazy
    draws = []
    for dev in DEVICES:
        loom.manual_seed(3)
        draws.append(mine.to(dev)(tensor(loom, batches[0], dev))[0].sum().item())
    assert draws[0] == pytest.approx(draws[1], rel=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_dcgan_pair(device):
    rng = np.random.default_rng(1)
    reals = [rng.uniform(-1, 1, (4, 3, 32, 32)).astype(np.float32) for _ in range(2)]
    noises = [rng.standard_normal((4, 10, 1, 1)).astype(np.float32) for _ in range(2)]
    torch.manual_seed(0)
    t, m = vision(torch), vision(loom)
    theirs = [t.generator(10, 8, 3), t.Critic(8, 3)]
    mine = [m.generator(10, 8, 3), m.Critic(8, 3)]
    for a, b in zip(theirs, mine):
        a.apply(t.gan_init)
        b.apply(m.gan_init)  # loom's own draws run, then PyTorch's weights replace them
    assert abs(float(mine[1].body[0].weight.std()) - 0.02) < 0.005
    mine = [load_from(a, b, device) for a, b in zip(theirs, mine)]
    want = t.gan_steps(*theirs, "cpu", [tensor(torch, r) for r in reals], [tensor(torch, z) for z in noises])
    got = m.gan_steps(*mine, device, [tensor(loom, r) for r in reals], [tensor(loom, z) for z in noises])
    assert_close(got, want, 2e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_sub_pixel_super_resolution(device):
    rng = np.random.default_rng(2)
    pairs = [(rng.random((4, 1, 12, 12), dtype=np.float32), rng.random((4, 1, 36, 36), dtype=np.float32))
             for _ in range(3)]

    def train(lib, model, device):
        opt = lib.optim.Adam(model.parameters(), lr=0.01)
        mse = lib.nn.MSELoss()
        out = []
        for low, high in pairs:
            opt.zero_grad()
            loss = mse(model(tensor(lib, low, device)), tensor(lib, high, device))
            loss.backward()
            opt.step()
            out.append(loss.item())
        return out

    torch.manual_seed(0)
    theirs = vision(torch).SubPixel(3)
    fresh = vision(loom).SubPixel(3)
    # loom's orthogonal_ with the ReLU gain: rows orthogonal, of squared norm gain^2 = 2
    w = fresh.convs[1].weight.detach().reshape(32, -1).numpy()
    np.testing.assert_allclose(w @ w.T, 2 * np.eye(32), atol=1e-4)
    mine = load_from(theirs, fresh, device)
    assert_close(train(loom, mine, device), train(torch, theirs, None), 1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_style_transfer_net(device):
    # the style net's step with a pixel content loss (the usual VGG features are not loom's):
    # reflection padding, instance norm, strided convolutions, nearest upsampling, residual blocks
    rng = np.random.default_rng(3)
    images = [rng.random((2, 3, 24, 24), dtype=np.float32) * 255 for _ in range(2)]

    def train(lib, model, device):
        opt = lib.optim.Adam(model.parameters(), 1e-3)
        out = []
        for x in images:
            x = tensor(lib, x, device)
            opt.zero_grad()
            loss = 1e5 * lib.nn.functional.mse_loss(model(x), x) / 255.0 ** 2
            loss.backward()
            opt.step()
            out.append(loss.item())
        return out

    torch.manual_seed(0)
    theirs = vision(torch).StyleNet()
    mine = load_from(theirs, vision(loom).StyleNet(), device)
    assert_close(train(loom, mine, device), train(torch, theirs, None), 2e-4)


def digit_loader(lib, rng, batches, batch=8):
    images = rng.random((batches * batch, 1, 28, 28), dtype=np.float32)
    labels = rng.integers(0, 10, batches * batch)
    data = lib.utils.data.TensorDataset(lib.tensor(images), lib.tensor(labels))
    return lib.utils.data.DataLoader(data, batch_size=batch, shuffle=False)


@pytest.mark.parametrize("device", DEVICES)
def test_lstm_row_reader(device):
    torch.manual_seed(0)
    theirs = vision(torch).RowReader()
    mine = load_from(theirs, vision(loom).RowReader(), device)
    for model in (theirs, mine):  # each library draws its own dropout masks: off for the comparison
        model.drop_a.p = model.drop_b.p = 0.0
    got, lr = vision(loom).fit_rows(mine, device, digit_loader(loom, np.random.default_rng(4), 3))
    want, their_lr = vision(torch).fit_rows(theirs, "cpu", digit_loader(torch, np.random.default_rng(4), 3))
    assert len(got) == 6 and lr == pytest.approx(their_lr)
    assert_close(got, want, 1e-5)


def test_lstm_row_reader_with_dropout_is_the_same_on_cpu_and_lazy():
    runs = []
    for device in DEVICES:
        loom.manual_seed(7)
        model = vision(loom).RowReader().to(device)
        runs.append(vision(loom).fit_rows(model, device, digit_loader(loom, np.random.default_rng(5), 2))[0])
    assert_close(runs[1], runs[0], 1e-5)
