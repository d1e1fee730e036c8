"""Reinforcement-learning programs written for these tests after well-known projects' patterns:
PPO for continuous actions (a Normal policy, orthogonal init, vectorized environments, GAE,
normalized advantages, clipped policy and value losses, minibatches picked by numpy index arrays,
gradient clipping, an annealed rate), REINFORCE and a one-step actor-critic (Categorical policies,
returns kept on the CPU whose 0-dim elements join the lazy log-probabilities, smooth_l1_loss). Each
runs on `cpu` and `lazy` from PyTorch's initial weights; the distributions' draws come from one
numpy generator in both libraries, so loom must end where PyTorch 1.13 ends."""

import collections
import math
import types

import numpy as np
import pytest

import loom
from _programs import DEVICES, assert_same_state, load_from

torch = pytest.importorskip("torch")


class PushEnvs:
    """A batch of environments with the vector interface (reset; step's five results): a point the
    actions push, rewarded by minus its squared distance from the origin; episodes of 5 steps."""

    obs_shape, act_shape = (3,), (2,)

    def __init__(self, n):
        self.n, self.rng = n, np.random.default_rng(5)

    def reset(self, seed=None):
        self.t, self.state = 0, self.rng.standard_normal((self.n, 3)).astype(np.float32)
        return self.state, {}

    def step(self, action):
        self.t += 1
        self.state = (self.state + 0.1 * np.pad(action, ((0, 0), (0, 1)))).astype(np.float32)
        done = np.full(self.n, self.t % 5 == 0)
        return self.state, -np.square(self.state).sum(1), done, np.zeros(self.n, bool), {}


def ppo(torch, Normal):
    nn = torch.nn

    def orthogonal(layer, gain=math.sqrt(2), bias=0.0):
        nn.init.orthogonal_(layer.weight, gain)
        nn.init.constant_(layer.bias, bias)
        return layer

    def mlp(n_in, n_out, last_gain):
        return nn.Sequential(orthogonal(nn.Linear(n_in, 32)), nn.Tanh(), orthogonal(nn.Linear(32, 32)), nn.Tanh(),
                             orthogonal(nn.Linear(32, n_out), last_gain))

    class Agent(nn.Module):
        def __init__(self, envs):
            super().__init__()
            n_obs, n_act = np.prod(envs.obs_shape), np.prod(envs.act_shape)  # numpy integers as sizes
            self.critic = mlp(n_obs, 1, 1.0)
            self.actor = mlp(n_obs, n_act, 0.01)
            self.log_std = nn.Parameter(torch.zeros(1, n_act))

        def value(self, obs):
            return self.critic(obs)

        def act(self, obs, action=None):
            mean = self.actor(obs)
            dist = Normal(mean, torch.exp(self.log_std.expand_as(mean)))
            if action is None:
                action = dist.sample()
            return action, dist.log_prob(action).sum(1), dist.entropy().sum(1), self.critic(obs)

    def train(envs, agent, device, c):
        opt = torch.optim.Adam(agent.parameters(), lr=c.lr, eps=1e-5)
        steps, n = c.steps, envs.n
        obs = torch.zeros((steps, n) + envs.obs_shape).to(device)
        actions = torch.zeros((steps, n) + envs.act_shape).to(device)
        logprobs, rewards, dones, values = (torch.zeros((steps, n)).to(device) for _ in range(4))
        shuffler = np.random.default_rng(c.seed)
        state, _ = envs.reset(seed=c.seed)
        next_obs, next_done = torch.Tensor(state).to(device), torch.zeros(n).to(device)
        batch = steps * n
        clipped = []
        for it in range(c.iterations):
            opt.param_groups[0]["lr"] = (1.0 - it / c.iterations) * c.lr
            for s in range(steps):
                obs[s], dones[s] = next_obs, next_done
                with torch.no_grad():
                    action, logprob, _, value = agent.act(next_obs)
                    values[s] = value.flatten()
                actions[s], logprobs[s] = action, logprob
                state, reward, ended, cut, _ = envs.step(action.cpu().numpy())
                rewards[s] = torch.tensor(reward).to(device).view(-1)
                next_obs = torch.Tensor(state).to(device)
                next_done = torch.Tensor(np.logical_or(ended, cut)).to(device)
            with torch.no_grad():  # generalized advantage estimation, backwards in time
                bootstrap = agent.value(next_obs).reshape(1, -1)
                advantages = torch.zeros_like(rewards).to(device)
                running = 0
                for t in reversed(range(steps)):
                    alive = 1.0 - (next_done if t == steps - 1 else dones[t + 1])
                    following = bootstrap if t == steps - 1 else values[t + 1]
                    delta = rewards[t] + c.gamma * following * alive - values[t]
                    advantages[t] = running = delta + c.gamma * c.lam * alive * running
                returns = advantages + values
            flat = types.SimpleNamespace(obs=obs.reshape((-1,) + envs.obs_shape), logprobs=logprobs.reshape(-1),
                                         actions=actions.reshape((-1,) + envs.act_shape),
                                         adv=advantages.reshape(-1), returns=returns.reshape(-1),
                                         values=values.reshape(-1))
            order = np.arange(batch)
            for _ in range(c.epochs):
                shuffler.shuffle(order)
                for start in range(0, batch, c.minibatch):
                    mb = order[start:start + c.minibatch]  # a numpy index array into every tensor
                    _, newlog, entropy, newvalue = agent.act(flat.obs[mb], flat.actions[mb])
                    logratio = newlog - flat.logprobs[mb]
                    ratio = logratio.exp()
                    with torch.no_grad():
                        old_kl = (-logratio).mean()
                        kl = ((ratio - 1) - logratio).mean()
                        clipped.append(((ratio - 1.0).abs() > c.clip).float().mean().item())
                    adv = flat.adv[mb]
                    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                    pg_loss = torch.max(-adv * ratio, -adv * torch.clamp(ratio, 1 - c.clip, 1 + c.clip)).mean()
                    newvalue = newvalue.view(-1)
                    near = flat.values[mb] + torch.clamp(newvalue - flat.values[mb], -c.clip, c.clip)
                    v_loss = 0.5 * torch.max((newvalue - flat.returns[mb]) ** 2,
                                             (near - flat.returns[mb]) ** 2).mean()
                    ent = entropy.mean()
                    loss = pg_loss - c.ent_coef * ent + c.vf_coef * v_loss
                    opt.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(agent.parameters(), c.max_grad_norm)
                    opt.step()
            predicted, actual = flat.values.cpu().numpy(), flat.returns.cpu().numpy()
            explained = 1 - np.var(actual - predicted) / np.var(actual)
        return dict(v_loss=v_loss.item(), pg_loss=pg_loss.item(), entropy=ent.item(), old_kl=old_kl.item(),
                    kl=kl.item(), clipped=float(np.mean(clipped)), explained=explained,
                    advantages=advantages.cpu().numpy())

    return types.SimpleNamespace(Agent=Agent, train=train)


PPO_SETTINGS = types.SimpleNamespace(seed=1, lr=3e-4, steps=8, iterations=2, epochs=2, minibatch=8, gamma=0.99,
                                     lam=0.95, clip=0.2, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5)


def noise_normal(lib, Normal):
    """Normal whose sample() takes its noise from a numpy generator (the same in both libraries)."""
    noise = np.random.default_rng(7)

    class SameNoise(Normal):
        def sample(self, sample_shape=()):
            eps = noise.standard_normal(tuple(self.loc.shape)).astype(np.float32)
            return (self.loc + self.scale * lib.tensor(eps).to(self.loc.device)).detach()

    return SameNoise


@pytest.mark.parametrize("device", DEVICES)
def test_ppo_continuous(device):
    from torch.distributions import Normal as TorchNormal
    t, m = ppo(torch, noise_normal(torch, TorchNormal)), ppo(loom, noise_normal(loom, loom.distributions.Normal))
    torch.manual_seed(1)
    theirs = t.Agent(PushEnvs(2))
    mine = load_from(theirs, m.Agent(PushEnvs(2)), device)
    want = t.train(PushEnvs(2), theirs, "cpu", PPO_SETTINGS)
    got = m.train(PushEnvs(2), mine, device, PPO_SETTINGS)
    for key in ("v_loss", "pg_loss", "entropy", "old_kl", "kl", "explained"):
        assert got[key] == pytest.approx(want[key], rel=1e-4, abs=1e-6), key
    assert got["clipped"] == pytest.approx(want["clipped"], abs=1e-6)
    np.testing.assert_allclose(got["advantages"], want["advantages"], rtol=1e-4, atol=1e-5)
    assert_same_state(mine, theirs, 1e-4)


class Pole:
    """A pole-balancing task's interface (reset; step's five results): the pole stays up 12 steps
    whatever the actions; the state moves with them."""

    def __init__(self):
        self.rng = np.random.default_rng(3)

    def reset(self, seed=None):
        self.t, self.state = 0, self.rng.uniform(-0.05, 0.05, 4)  # float64, as such environments give
        return self.state, {}

    def step(self, action):
        self.t += 1
        self.state = self.state + (0.1 if action else -0.1) * np.array([1.0, 0.5, -0.2, 0.3])
        return self.state, 1.0, self.t >= 12, False, {}


def policy_gradient(torch, Categorical):
    nn, F = torch.nn, torch.nn.functional
    tiny = np.finfo(np.float32).eps.item()

    def normalized_returns(rewards, gamma):
        """Discounted returns (on the CPU, where the script builds them), standardized."""
        total, out = 0.0, collections.deque()
        for r in reversed(rewards):
            total = r + gamma * total
            out.appendleft(total)
        out = torch.tensor(out)
        return (out - out.mean()) / (out.std() + tiny)

    class Reinforce(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 64)
            self.drop = nn.Dropout(p=0.6)
            self.scores = nn.Linear(64, 2)

        def forward(self, x):
            return F.softmax(self.scores(F.relu(self.drop(self.fc(x)))), dim=1)

        def episode(self, env, device):
            state, _ = env.reset()
            log_probs, rewards, done = [], [], False
            while not done:
                dist = Categorical(self(torch.from_numpy(state).float().unsqueeze(0).to(device)))
                action = dist.sample()
                log_probs.append(dist.log_prob(action))
                state, reward, ended, cut, _ = env.step(action.item())
                rewards.append(reward)
                done = ended or cut
            return log_probs, rewards

        def loss(self, log_probs, rewards, gamma):
            # each return is a 0-dim CPU tensor: on lazy it joins the lazy log-probability
            return torch.cat([-lp * g for lp, g in zip(log_probs, normalized_returns(rewards, gamma))]).sum()

    Saved = collections.namedtuple("Saved", ["log_prob", "value"])

    class ActorCritic(nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk = nn.Linear(4, 64)
            self.actor = nn.Linear(64, 2)
            self.critic = nn.Linear(64, 1)

        def forward(self, x):
            h = F.relu(self.trunk(x))
            return F.softmax(self.actor(h), dim=-1), self.critic(h)

        def episode(self, env, device):
            state, _ = env.reset()
            saved, rewards, done = [], [], False
            while not done:
                probs, value = self(torch.from_numpy(state).float().to(device))
                dist = Categorical(probs)
                action = dist.sample()
                saved.append(Saved(dist.log_prob(action), value))
                state, reward, ended, cut, _ = env.step(action.item())
                rewards.append(reward)
                done = ended or cut
            return saved, rewards

        def loss(self, saved, rewards, gamma):
            actor, critic = [], []
            for (log_prob, value), g in zip(saved, normalized_returns(rewards, gamma)):
                actor.append(-log_prob * (g - value.item()))
                critic.append(F.smooth_l1_loss(value, torch.tensor([g]).to(value.device)))
            return torch.stack(actor).sum() + torch.stack(critic).sum()

    def run(model, env, device, lr, episodes=7, gamma=0.99):
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        running = 10.0
        for _ in range(episodes):
            record, rewards = model.episode(env, device)
            running = 0.05 * sum(rewards) + 0.95 * running
            opt.zero_grad()
            model.loss(record, rewards, gamma).backward()
            opt.step()
        return running

    return types.SimpleNamespace(Reinforce=Reinforce, ActorCritic=ActorCritic, run=run)


def same_draws(lib, Categorical):
    """Categorical whose sample() inverts the CDF at uniforms from a numpy generator."""
    draws = np.random.default_rng(11)

    class SameDraws(Categorical):
        def sample(self, sample_shape=()):
            p = self.probs.detach().cpu().double().numpy()
            u = draws.random(p.shape[:-1] + (1,))
            return lib.tensor((p.cumsum(-1) < u).sum(-1)).to(self.probs.device)

    return SameDraws


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind, lr", [("Reinforce", 1e-2), ("ActorCritic", 3e-2)])
def test_policy_gradient(kind, lr, device):
    from torch.distributions import Categorical as TorchCategorical
    t = policy_gradient(torch, same_draws(torch, TorchCategorical))
    m = policy_gradient(loom, same_draws(loom, loom.distributions.Categorical))
    torch.manual_seed(0)
    theirs = getattr(t, kind)()
    mine = load_from(theirs, getattr(m, kind)(), device)
    if kind == "Reinforce":
        theirs.drop.p = mine.drop.p = 0.0  # one dropout mask cannot be drawn in both libraries
    want = t.run(theirs, Pole(), "cpu", lr)
    got = m.run(mine, Pole(), device, lr)
    assert got == pytest.approx(want)
    assert_same_state(mine, theirs, 2e-4)
