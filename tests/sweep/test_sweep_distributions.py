"""Conformance sweep, ``torch.distributions`` in teaching code: a VAE loss step (the
reparameterization trick and KL to the prior), REINFORCE and actor-critic updates with a
Categorical policy, a Bernoulli policy, fitting a Gaussian by maximum likelihood, a Gaussian
mixture (written out, and as MixtureSameFamily), a full-covariance Gaussian with a learned
Cholesky factor, Beta/Dirichlet conjugate updates, soft actor-critic's tanh-squashed Gaussian,
Gumbel-softmax relaxations, and the errors and reprs teaching code meets.

Each program runs with ``import gradviz as torch`` and with real PyTorch; ``sweep_harness``
compares everything observed (see its docstring). Weights are filled with fixed values in both
libraries; draws (``sample``/``rsample``) come from different generators, so the programs feed
the same noise or actions to both and observe only the shapes and dtypes of the draws.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from sweep_harness import check, registry

program = registry()


def _fill(torch, module, scale=0.3):
    """Every parameter set to a scrambled sine (the same values in both libraries)."""
    with torch.no_grad():
        for i, (_, p) in enumerate(module.named_parameters()):
            values = np.sin(np.arange(p.numel()) * 0.7 + i) * scale
            p.copy_(torch.tensor(values.reshape(tuple(p.shape)), dtype=p.dtype))
    return module


def _data(torch, *shape, shift=0.0):
    n = math.prod(shape)
    return torch.tensor(np.cos(np.arange(n) * 1.3 + shift).reshape(shape), dtype=torch.float32)


@program(1e-5, atol=1e-6)
def vae_loss_step(torch, o):
    """The VAE of every course: the encoder gives mu and log-variance, z = mu + std * eps (the
    same eps in both libraries), reconstruction + KL(q(z|x) || N(0, I)), one Adam step."""
    nn, D = torch.nn, torch.distributions
    encoder, decoder = _fill(torch, nn.Linear(6, 4)), _fill(torch, nn.Linear(2, 6), 0.2)
    optimizer = torch.optim.Adam(list(encoder.parameters()) + list(decoder.parameters()), lr=0.01)
    x = _data(torch, 5, 6)
    eps = _data(torch, 5, 2, shift=0.4)
    for step in range(3):
        optimizer.zero_grad()
        mu, logvar = encoder(x).chunk(2, dim=-1)
        q = D.Normal(mu, torch.exp(0.5 * logvar))
        prior = D.Normal(torch.zeros_like(mu), torch.ones_like(mu))
        o(f"rsample shape {step}", q.rsample().shape)
        o(f"rsample requires grad {step}", q.rsample().requires_grad)
        z = q.loc + q.scale * eps
        recon = decoder(z)
        kl = D.kl_divergence(q, prior).sum(-1).mean()
        loss = nn.functional.mse_loss(recon, x, reduction="sum") / 5 + kl
        loss.backward()
        o(f"kl {step}", kl)
        o(f"loss {step}", loss)
        o(f"encoder grad {step}", encoder.weight.grad)
        optimizer.step()
    o("log q(z)", q.log_prob(z).sum(-1))
    o("analytic vs Monte Carlo term", (q.log_prob(z) - prior.log_prob(z)).sum(-1))
    o("entropy", q.entropy())


@program(1e-5, atol=1e-6)
def reinforce_update(torch, o):
    """REINFORCE (Williams 1992) as in the PyTorch examples: a Categorical policy over logits,
    log-probabilities of the actions taken (the same actions in both libraries), discounted
    normalized returns, an entropy bonus, one SGD step."""
    nn, D = torch.nn, torch.distributions
    policy = _fill(torch, nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)))
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.1)
    states = _data(torch, 6, 4)
    actions = torch.tensor([0, 2, 1, 1, 0, 2])
    rewards = [1.0, 0.0, 0.5, 1.0, -1.0, 2.0]
    returns, running = [], 0.0
    for r in reversed(rewards):
        running = r + 0.99 * running
        returns.insert(0, running)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + 1e-8)
    dist = D.Categorical(logits=policy(states))
    sampled = dist.sample()
    o("sample shape", sampled.shape)
    o("sample dtype", sampled.dtype)
    o("batch shape", dist.batch_shape)
    log_probs = dist.log_prob(actions)
    o("log_probs", log_probs)
    o("entropy", dist.entropy())
    o("probs", dist.probs)
    loss = -(log_probs * returns).sum() - 0.01 * dist.entropy().sum()
    optimizer.zero_grad()
    loss.backward()
    o("loss", loss)
    o("grad", policy[2].weight.grad)
    optimizer.step()
    o("new log_probs", D.Categorical(logits=policy(states)).log_prob(actions))


@program(1e-5, atol=1e-6)
def actor_critic_step(torch, o):
    """Actor-critic with a shared trunk: Categorical(probs=softmax(...)), the advantage
    detached from the critic, a smooth-L1 value loss, and the entropy regularizer."""
    nn, F, D = torch.nn, torch.nn.functional, torch.distributions
    trunk = _fill(torch, nn.Linear(3, 6))
    actor, critic = _fill(torch, nn.Linear(6, 2), 0.5), _fill(torch, nn.Linear(6, 1), 0.4)
    states = _data(torch, 4, 3, shift=1.0)
    actions = torch.tensor([1, 0, 0, 1])
    returns = torch.tensor([1.0, 0.5, -0.5, 2.0])
    hidden = F.relu(trunk(states))
    dist = D.Categorical(probs=F.softmax(actor(hidden), dim=-1))
    values = critic(hidden).squeeze(-1)
    advantage = returns - values.detach()
    actor_loss = -(dist.log_prob(actions) * advantage).mean()
    critic_loss = F.smooth_l1_loss(values, returns)
    loss = actor_loss + 0.5 * critic_loss - 0.01 * dist.entropy().mean()
    loss.backward()
    o("logits", dist.logits)
    o("loss", loss)
    o("trunk grad", trunk.weight.grad)
    o("actor grad", actor.bias.grad)
    o("mode", dist.mode)
    o("enumerate", dist.enumerate_support())
    o("one-hot log_prob",
      D.OneHotCategorical(probs=dist.probs).log_prob(F.one_hot(actions, 2).float()))


@program(1e-5, atol=1e-6)
def bernoulli_policy(torch, o):
    """A Bernoulli policy (left/right, CartPole style) from logits: log-probabilities of the
    chosen actions, entropy, KL to the old policy (a PPO-style penalty), and gradients."""
    nn, D = torch.nn, torch.distributions
    policy = _fill(torch, nn.Linear(4, 1))
    states = _data(torch, 5, 4, shift=0.3)
    actions = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0])
    with torch.no_grad():
        old = D.Bernoulli(logits=policy(states).squeeze(-1) + 0.2)
    dist = D.Bernoulli(logits=policy(states).squeeze(-1))
    o("sample", (dist.sample().shape, dist.sample().dtype, dist.sample((3,)).shape))
    ratio = torch.exp(dist.log_prob(actions) - old.log_prob(actions))
    advantages = torch.tensor([0.5, -1.0, 0.3, 1.2, -0.2])
    clipped = torch.min(ratio * advantages, torch.clamp(ratio, 0.8, 1.2) * advantages)
    loss = -clipped.mean() + 0.1 * D.kl_divergence(old, dist).mean() - 0.01 * dist.entropy().mean()
    loss.backward()
    o("probs", dist.probs)
    o("ratio", ratio)
    o("loss", loss)
    o("weight grad", policy.weight.grad)
    o("mean", dist.mean)
    o("variance", dist.variance)
    o("from probs", D.Bernoulli(probs=dist.probs).log_prob(actions))


@program(1e-4, atol=1e-5)
def gaussian_nll_fit(torch, o):
    """Fitting a Gaussian by maximum likelihood: loc and log-scale parameters, the loss is
    -Normal(loc, exp(log_scale)).log_prob(data).mean(), 50 Adam steps; then cdf, icdf."""
    D = torch.distributions
    data = 2.0 + 0.5 * _data(torch, 40)
    loc = torch.zeros(1, requires_grad=True)
    log_scale = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.Adam([loc, log_scale], lr=0.1)
    for step in range(50):
        optimizer.zero_grad()
        nll = -D.Normal(loc, log_scale.exp()).log_prob(data).mean()
        nll.backward()
        optimizer.step()
        if step % 10 == 0:
            o(f"nll {step}", nll)
    o("loc", loc)
    o("log_scale", log_scale)
    fitted = D.Normal(loc.detach(), log_scale.exp().detach())
    o("cdf", fitted.cdf(torch.tensor([1.0, 2.0, 3.0])))
    o("icdf", fitted.icdf(torch.tensor([0.1, 0.5, 0.9])))
    o("laplace nll", -D.Laplace(loc, log_scale.exp()).log_prob(data).mean())
    o("student-free hessian", torch.autograd.grad(
        torch.autograd.grad(-D.Normal(loc, 1.0).log_prob(data).sum(), loc, create_graph=True)[0].sum(),
        loc)[0])


@program(1e-5, atol=1e-6)
def gaussian_mixture_log_likelihood(torch, o):
    """A 1-d Gaussian mixture written out by hand: log p(x) = logsumexp_k (log pi_k +
    log N(x; mu_k, sigma_k)), responsibilities (the E step) and gradients (the M step by
    gradient descent)."""
    D = torch.distributions
    logits = torch.tensor([0.2, -0.1, 0.5], requires_grad=True)
    means = torch.tensor([-1.0, 0.5, 2.0], requires_grad=True)
    log_scales = torch.tensor([0.0, -0.5, 0.3], requires_grad=True)
    x = 1.5 * _data(torch, 12)
    mixing = D.Categorical(logits=logits)
    components = D.Normal(means, log_scales.exp())
    o("component batch shape", components.batch_shape)
    joint = mixing.logits + components.log_prob(x.unsqueeze(-1))
    log_likelihood = torch.logsumexp(joint, dim=-1)
    o("log likelihood", log_likelihood)
    o("responsibilities", torch.softmax(joint, dim=-1))
    (-log_likelihood.mean()).backward()
    o("logits grad", logits.grad)
    o("means grad", means.grad)
    o("log_scales grad", log_scales.grad)
    o("mixing entropy", mixing.entropy())
    o("expanded", components.expand((12, 3)).log_prob(x.unsqueeze(-1)).shape)


@program(1e-5, atol=1e-6)
def full_covariance_gaussian(torch, o):
    """A 2-d Gaussian with a learned Cholesky factor (tril + softplus diagonal), its
    log-likelihood on data, the KL between two such Gaussians, and the same model built from
    its covariance and precision matrices."""
    D, F = torch.distributions, torch.nn.functional
    raw = torch.tensor([[0.3, 0.0], [0.4, -0.2]], requires_grad=True)
    loc = torch.tensor([0.5, -0.5], requires_grad=True)
    scale_tril = torch.tril(raw, -1) + torch.diag_embed(F.softplus(torch.diagonal(raw)))
    mvn = D.MultivariateNormal(loc, scale_tril=scale_tril)
    data = _data(torch, 8, 2)
    nll = -mvn.log_prob(data).mean()
    nll.backward()
    o("nll", nll)
    o("raw grad", raw.grad)
    o("loc grad", loc.grad)
    o("covariance", mvn.covariance_matrix)
    o("entropy", mvn.entropy())
    o("variance", mvn.variance)
    o("rsample shape", mvn.rsample((3,)).shape)
    cov = mvn.covariance_matrix.detach()
    o("from covariance", D.MultivariateNormal(loc.detach(), cov).log_prob(data))
    o("from precision", D.MultivariateNormal(loc.detach(), precision_matrix=torch.inverse(cov))
      .log_prob(data))
    diag = D.Independent(D.Normal(torch.zeros(2), torch.ones(2)), 1)
    o("kl to standard", D.kl_divergence(mvn, D.MultivariateNormal(torch.zeros(2), torch.eye(2))))
    o("diag log_prob", diag.log_prob(data))
    o("diag kl", D.kl_divergence(diag, D.Independent(D.Normal(torch.ones(2), torch.ones(2)), 1)))


@program(1e-5, atol=1e-6)
def gaussian_mixture_training(torch, o):
    """A 2-d Gaussian mixture with torch's own classes: MixtureSameFamily(Categorical,
    Independent(Normal)), trained by gradient descent on the negative log-likelihood, then its
    mean, variance, repr and the shape of its draws."""
    D = torch.distributions
    weights = torch.zeros(3, requires_grad=True)
    means = torch.tensor([[-1.0, 0.0], [0.0, 1.0], [1.0, -1.0]], requires_grad=True)
    log_scales = torch.zeros(3, 2, requires_grad=True)
    data = 1.2 * _data(torch, 20, 2)
    optimizer = torch.optim.SGD([weights, means, log_scales], lr=0.2)
    for step in range(10):
        gmm = D.MixtureSameFamily(D.Categorical(logits=weights),
                                  D.Independent(D.Normal(means, log_scales.exp()), 1))
        nll = -gmm.log_prob(data).mean()
        optimizer.zero_grad()
        nll.backward()
        optimizer.step()
        o(f"nll {step}", nll)
    o("weights", weights)
    o("means", means)
    o("mixture mean", gmm.mean)
    o("mixture variance", gmm.variance)
    o("shapes", (gmm.batch_shape, gmm.event_shape, gmm.sample((4,)).shape))
    o("repr", repr(gmm))
    o.raises("wrong components",
             lambda: D.MixtureSameFamily(D.Categorical(logits=torch.zeros(2)), D.Normal(means, 1.0)),
             "does not equal `component_distribution.batch_shape[-1]`")


@program(1e-5, atol=1e-6)
def bayesian_coin_and_dice(torch, o):
    """Conjugate updates in a Bayesian statistics notebook: a Beta prior on a coin's bias and a
    Dirichlet prior on a die, their posteriors, log-densities, entropies and KL from prior to
    posterior, gradients of the log marginal likelihood w.r.t. the prior; Binomial counts."""
    D = torch.distributions
    a = torch.tensor(2.0, requires_grad=True)
    b = torch.tensor(3.0, requires_grad=True)
    heads, flips = 7.0, 10.0
    prior, posterior = D.Beta(a, b), D.Beta(a + heads, b + flips - heads)
    o("posterior mean", posterior.mean)
    o("posterior variance", posterior.variance)
    o("log density", posterior.log_prob(torch.tensor([0.25, 0.5, 0.75])))
    o("entropy", posterior.entropy())
    kl = D.kl_divergence(posterior, prior)
    o("kl", kl)
    log_evidence = (torch.lgamma(a + b) - torch.lgamma(a) - torch.lgamma(b)
                    + torch.lgamma(a + heads) + torch.lgamma(b + flips - heads)
                    - torch.lgamma(a + b + flips))
    (log_evidence + kl).backward()
    o("a.grad", a.grad)
    o("b.grad", b.grad)
    alpha = torch.tensor([1.0, 2.0, 1.5, 1.0, 0.5, 3.0], requires_grad=True)
    counts = torch.tensor([3.0, 0.0, 2.0, 5.0, 1.0, 4.0])
    die = D.Dirichlet(alpha + counts)
    o("die mean", die.mean)
    o("die log_prob", die.log_prob(torch.full((6,), 1 / 6)))
    die_kl = D.kl_divergence(die, D.Dirichlet(alpha))
    die_kl.backward()
    o("die kl", die_kl)
    o("alpha.grad", alpha.grad)
    binomial = D.Binomial(10, probs=torch.tensor([0.2, 0.7]))
    o("binomial log_prob", binomial.log_prob(torch.tensor([[2.0, 7.0], [5.0, 5.0]])))
    o("binomial entropy", binomial.entropy())
    o("gamma", D.Gamma(torch.tensor(2.0), torch.tensor(0.5)).log_prob(torch.tensor([1.0, 4.0])))


@program(1e-5, atol=1e-6)
def sac_squashed_gaussian_policy(torch, o):
    """Soft actor-critic's policy: a Gaussian squashed by tanh, as TransformedDistribution with
    a cached TanhTransform; the action comes from the same noise in both libraries, its
    log-probability uses the cache (no atanh), then the entropy-regularized actor loss."""
    nn, D = torch.nn, torch.distributions
    net = _fill(torch, nn.Linear(3, 4))
    states = _data(torch, 5, 3, shift=0.7)
    mu, log_std = net(states).chunk(2, dim=-1)
    std = log_std.clamp(-5, 2).exp()
    tanh = D.TanhTransform(cache_size=1)
    policy = D.TransformedDistribution(D.Normal(mu, std), [tanh])
    o("shapes", (policy.batch_shape, policy.event_shape, policy.rsample((3,)).shape))
    pre_tanh = mu + std * _data(torch, 5, 2, shift=0.2)
    action = tanh(pre_tanh)
    log_prob = policy.log_prob(action).sum(-1)
    o("action", action)
    o("log_prob", log_prob)
    o("by hand", (D.Normal(mu, std).log_prob(pre_tanh)
                  - torch.log(1 - action.pow(2) + 1e-6)).sum(-1))
    q_value = (action * torch.tensor([0.5, -1.0])).sum(-1)
    loss = (0.2 * log_prob - q_value).mean()
    loss.backward()
    o("loss", loss)
    o("weight grad", net.weight.grad)
    o("support", repr(policy.support))
    o("lognormal", D.LogNormal(torch.tensor([0.0, 1.0]), 0.5).log_prob(torch.tensor([1.0, 2.0])))


@program(1e-5, atol=1e-6)
def gumbel_softmax_relaxation(torch, o):
    """Discrete latent variables with the Concrete relaxation: RelaxedOneHotCategorical and
    RelaxedBernoulli log-densities of fixed relaxed samples, their gradients with respect to
    logits and temperature, and the straight-through one-hot estimator's gradient."""
    D = torch.distributions
    logits = torch.tensor([[0.5, -0.2, 0.1], [1.0, 0.0, -1.0]], requires_grad=True)
    temperature = torch.tensor(0.7, requires_grad=True)
    relaxed = D.RelaxedOneHotCategorical(temperature, logits=logits)
    y = torch.softmax(_data(torch, 2, 3), -1)
    log_density = relaxed.log_prob(y)
    log_density.sum().backward()
    o("log density", log_density)
    o("logits grad", logits.grad)
    o("temperature grad", temperature.grad)
    o("rsample", (relaxed.rsample().shape, relaxed.rsample().requires_grad))
    coin = D.RelaxedBernoulli(torch.tensor(0.5), logits=torch.tensor([0.3, -0.4]))
    o("relaxed bernoulli", coin.log_prob(torch.tensor([0.2, 0.9])))
    o("repr", repr(coin))
    straight = D.OneHotCategoricalStraightThrough(logits=logits)
    draw = straight.rsample()
    o("one-hot", draw.sum(-1))
    o("straight-through grad", torch.autograd.grad((draw * torch.tensor([1.0, 2.0, 3.0])).sum(),
                                                   logits)[0])


@program
def distribution_errors_and_reprs(torch, o):
    """What a student meets first: validation errors for bad parameters and values, a missing
    KL pair, reprs, shapes of draws, and switching validation off."""
    D = torch.distributions
    o.raises("negative scale", lambda: D.Normal(0.0, -1.0), "Expected parameter scale")
    o.raises("negative scale text", lambda: D.Normal(torch.zeros(2), torch.tensor([1.0, -1.0])),
             "to satisfy the constraint GreaterThan(lower_bound=0.0), but found invalid values")
    o.raises("probs and logits", lambda: D.Categorical(probs=torch.ones(2), logits=torch.ones(2)),
             "Either `probs` or `logits` must be specified, but not both.")
    o.raises("bad probs", lambda: D.Bernoulli(probs=torch.tensor(1.5)),
             "to satisfy the constraint Interval(lower_bound=0.0, upper_bound=1.0)")
    o.raises("outside support", lambda: D.Bernoulli(0.5).log_prob(torch.tensor(0.3)),
             "Expected value argument")
    o.raises("wrong event shape",
             lambda: D.MultivariateNormal(torch.zeros(2), torch.eye(2)).log_prob(torch.zeros(3)),
             "The right-most size of value must match event_shape")
    o.raises("no kl", lambda: D.kl_divergence(D.Normal(0.0, 1.0), D.Categorical(torch.ones(2))),
             "No KL(p || q) is implemented for p type Normal and q type Categorical")
    o.raises("not positive definite",
             lambda: D.MultivariateNormal(torch.zeros(2), torch.tensor([[1.0, 2.0], [2.0, 1.0]])),
             "PositiveDefinite()")
    o.raises("no rsample", lambda: D.Categorical(torch.ones(3)).rsample(), "")
    o("repr", repr(D.Normal(torch.zeros(3), 1.0)))
    o("repr scalar", repr(D.Bernoulli(logits=torch.tensor(0.0))))
    o("repr independent", repr(D.Independent(D.Normal(torch.zeros(2, 3), 1.0), 1)))
    o("sample shape", D.Normal(torch.zeros(2), 1.0).sample((4, 3)).shape)
    o("event shape", D.OneHotCategorical(torch.ones(2, 5)).sample((3,)).shape)
    o("unvalidated", D.Normal(0.0, -1.0, validate_args=False).scale)
    o("support", repr(D.Uniform(0.0, 2.0).support))
    o("has_rsample", [D.Normal(0.0, 1.0).has_rsample, D.Bernoulli(0.5).has_rsample,
                      D.Independent(D.Normal(torch.zeros(1), 1.0), 1).has_rsample])


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)
