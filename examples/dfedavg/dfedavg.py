"""Decentralised federated averaging of a PyTorch network, with an optional DP-SGD mode.

Written only against the public SDK (``consortia_sdk``), torch and numpy: it is the showcase of an
algorithm that lives outside the platform's repository (docs/sdk.md).

**Federated averaging over a graph** (McMahan et al. 2017, "Communication-Efficient Learning of Deep
Networks from Decentralized Data", Algorithm 1). Every organisation s holds n_s rows. A round is

    w_s ← Σ_{j ∈ N̄(s)} a_{sj} w_j          (averaging with the in-neighbours' models, closed neighbourhood)
    w_s ← LocalUpdate(w_s; E epochs of SGD or Adam over the rows of s, batches of B)
    send w_s (and n_s) to every out-neighbour

with a_{sj} = n_j / Σ_{k ∈ N̄(s)} n_k (``weighting="samples"``) or 1/|N̄(s)| (``"uniform"``). On the
complete graph with sample weights, the average is McMahan's server step w ← Σ_k (n_k/n) w_k exactly, so
FedAvg is the complete-graph case; on a sparser graph it is decentralised (gossip) FedAvg. Messages
sent in round r arrive in round r + 1, so a process of R rounds performs R − 1 local updates and its
last round only averages (the models of that round are the result). All organisations start from the
same network, drawn from ``ctx.shared_rng``.

**DP-SGD** (Abadi et al. 2016, "Deep Learning with Differential Privacy", Algorithm 1). With ``dp`` on,
each local step draws a Poisson sample (every row independently with probability q =
``sampling_rate``), clips every per-example gradient to norm C = ``gradient_clip``,

    ḡ_i = g_i / max(1, ‖g_i‖₂ / C),

adds Gaussian noise of standard deviation σC (σ = ``noise_multiplier``) to their sum, and divides by
the expected lot size qn:  g̃ = (Σ_i ḡ_i + N(0, σ²C² I)) / (qn). Each step is one release of the
sampled Gaussian mechanism; the organisation's privacy loss is accounted with Rényi DP (Mironov 2017,
"Rényi Differential Privacy"): for an integer order α, one step is (α, ε_α)-RDP with

    ε_α = 1/(α−1) · ln Σ_{k=0}^{α} C(α,k) (1−q)^{α−k} q^k exp((k²−k)/(2σ²))

(Mironov, Talwar & Zhang 2019, "Rényi Differential Privacy of the Sampled Gaussian Mechanism", §3.3;
q = 1 gives the Gaussian mechanism's α/(2σ²), Mironov 2017 Prop. 7); T steps compose to T·ε_α
(Mironov 2017 Prop. 1), and are (ε, δ)-DP with

    ε = min_α  T ε_α + ln((α−1)/α) − (ln δ + ln α)/(α−1)

(Balle et al. 2020, Thm. 21, which tightens Mironov 2017 Prop. 3, ε = T ε_α + ln(1/δ)/(α−1)). Every
round reports these figures in the form the platform's ledger charges a Gaussian release against the
process's privacy budget (``noise_multiplier``, ``sampling_rate``, ``gaussian_releases``,
``rho_spent`` = steps/(2σ²), ``privacy_delta``, ...): the ledger recomputes ε itself and refuses the
round that would take it over the budget. The running ε is reported as ``epsilon_total``.

**Determinism.** The process is bit-reproducible: torch runs with one thread and
``torch.use_deterministic_algorithms(True)``, every random draw (initial network, batch order, Poisson
samples, noise) comes from a generator seeded from ``ctx.rng``/``ctx.shared_rng``, averages are
summed in the consortium's order, and all payloads are numpy arrays through the SDK's codec.
Parameters are float32 by default (``dtype``): the network is small enough that float64 gains nothing
in accuracy, and float32 halves messages and runs about twice as fast on the CPU; float64 is there for
experiments that need it. Both are deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from consortia_sdk import LocalDataset, StepResult, TaskContext

OPTIMIZERS = ("sgd", "adam")
WEIGHTINGS = ("samples", "uniform")
DTYPES = {"float32": torch.float32, "float64": torch.float64}
#: integer Rényi orders of the accountant (each A_α is then an exact finite sum)
RDP_ORDERS = (*range(2, 65), 80, 96, 128, 256)


# ---------------------------------------------------------------------------------------- accountant
def _logsumexp(terms: list[float]) -> float:
    top = max(terms)
    return top + math.log(math.fsum(math.exp(t - top) for t in terms))


def sampled_gaussian_rdp(sampling_rate: float, noise_multiplier: float) -> tuple[float, ...]:
    """ε_α of one step of the sampled Gaussian mechanism at every order of :data:`RDP_ORDERS`
    (Mironov, Talwar & Zhang 2019, §3.3, integer α; summed in log space):
    ε_α = ln(Σ_k C(α,k) (1−q)^{α−k} q^k e^{(k²−k)/(2σ²)}) / (α−1); q = 1 gives α/(2σ²)."""
    q, z = float(sampling_rate), float(noise_multiplier)
    if not (0.0 < q <= 1.0 and z > 0.0):
        raise ValueError(f"need 0 < q <= 1 and σ > 0, got q = {q}, σ = {z}")
    if q == 1.0:
        return tuple(a / (2.0 * z * z) for a in RDP_ORDERS)
    log_q, log_1q = math.log(q), math.log1p(-q)
    out = []
    for a in RDP_ORDERS:
        lg = math.lgamma(a + 1.0)
        terms = [
            lg
            - math.lgamma(k + 1.0)
            - math.lgamma(a - k + 1.0)
            + (a - k) * log_1q
            + k * log_q
            + (k * k - k) / (2.0 * z * z)
            for k in range(a + 1)
        ]
        out.append(max(0.0, _logsumexp(terms) / (a - 1.0)))
    return tuple(out)


def rdp_to_epsilon(rdp: tuple[float, ...], delta: float) -> float:
    """(ε, δ) from an RDP curve: min_α ε_α + ln((α−1)/α) − (ln δ + ln α)/(α−1) (Balle et al. 2020,
    Thm. 21), clipped at 0."""
    if not 0.0 < delta < 1.0:
        raise ValueError(f"δ must be in (0, 1), got {delta}")
    best = min(
        e + math.log1p(-1.0 / a) - (math.log(delta) + math.log(a)) / (a - 1.0)
        for a, e in zip(RDP_ORDERS, rdp, strict=True)
    )
    return max(0.0, best)


def dp_sgd_epsilon(sampling_rate: float, noise_multiplier: float, steps: int, delta: float) -> float:
    """ε at δ of ``steps`` DP-SGD steps: the RDP curve composed over the steps (Mironov 2017 Prop. 1,
    T·ε_α), converted by :func:`rdp_to_epsilon`; the zCDP bound ρ + 2√(ρ ln 1/δ) of ρ = T/(2σ²) (Bun &
    Steinke 2016, Prop. 1.3) when smaller, as the ledger takes it."""
    if steps == 0:
        return 0.0
    curve = tuple(steps * e for e in sampled_gaussian_rdp(sampling_rate, noise_multiplier))
    rho = steps / (2.0 * noise_multiplier**2)
    return min(rdp_to_epsilon(curve, delta), rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta)))


# ---------------------------------------------------------------------------------------- network
def _network(features: int, hidden: int, classes: int) -> torch.nn.Module:
    """A multilayer perceptron for flattened 28×28 images (784 → hidden → classes, ReLU), or softmax
    regression with ``hidden`` = 0: small enough for tens of organisations on two CPU cores."""
    if hidden == 0:
        return torch.nn.Sequential(torch.nn.Linear(features, classes))
    return torch.nn.Sequential(
        torch.nn.Linear(features, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, classes)
    )


def _seed(rng: Any) -> int:
    return int(rng.integers(0, 2**62))


class DecentralisedFedAvg:
    """FedAvg over the process topology, optionally with DP-SGD local updates (module docstring)."""

    name = "dfedavg"
    warm_imports = ("torch",)

    def __init__(
        self,
        hidden: int = 100,
        classes: int = 10,
        optimizer: str = "sgd",
        learning_rate: float = 0.05,
        momentum: float = 0.0,
        local_epochs: int = 1,
        batch_size: int = 32,
        weighting: str = "samples",
        dtype: str = "float32",
        dp: bool = False,
        gradient_clip: float = 1.0,
        noise_multiplier: float = 1.0,
        sampling_rate: float = 0.01,
        dp_steps: int = 0,
        privacy_delta: float = 1e-5,
    ) -> None:
        if not (isinstance(hidden, int) and hidden >= 0):
            raise ValueError(f"hidden must be an integer >= 0, got {hidden!r}")
        if not (isinstance(classes, int) and classes >= 2):
            raise ValueError(f"classes must be an integer >= 2, got {classes!r}")
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
        if weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {tuple(DTYPES)}, got {dtype!r}")
        for label, value in (("learning_rate", learning_rate), ("gradient_clip", gradient_clip)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{label} must be a positive number, got {value!r}")
        if not (isinstance(momentum, (int, float)) and 0 <= momentum < 1):
            raise ValueError(f"momentum must be in [0, 1), got {momentum!r}")
        for label, count in (("local_epochs", local_epochs), ("batch_size", batch_size)):
            if not (isinstance(count, int) and count >= 1):
                raise ValueError(f"{label} must be an integer >= 1, got {count!r}")
        if not (isinstance(noise_multiplier, (int, float)) and noise_multiplier > 0):
            raise ValueError(f"noise_multiplier must be > 0, got {noise_multiplier!r}")
        if not (isinstance(sampling_rate, (int, float)) and 0 < sampling_rate <= 1):
            raise ValueError(f"sampling_rate must be in (0, 1], got {sampling_rate!r}")
        if not (isinstance(dp_steps, int) and dp_steps >= 0):
            raise ValueError(f"dp_steps must be an integer >= 0, got {dp_steps!r}")
        if not (isinstance(privacy_delta, (int, float)) and 0 < privacy_delta < 1):
            raise ValueError(f"privacy_delta must be in (0, 1), got {privacy_delta!r}")
        self.hidden = hidden
        self.classes = classes
        self.optimizer = optimizer
        self.learning_rate = float(learning_rate)
        self.momentum = float(momentum)
        self.local_epochs = local_epochs
        self.batch_size = batch_size
        self.weighting = weighting
        self.dtype = dtype
        self.dp = bool(dp)
        self.gradient_clip = float(gradient_clip)
        self.noise_multiplier = float(noise_multiplier)
        self.sampling_rate = float(sampling_rate)
        self.dp_steps = dp_steps
        self.privacy_delta = float(privacy_delta)

    def params(self) -> dict[str, Any]:
        return {
            "hidden": self.hidden,
            "classes": self.classes,
            "optimizer": self.optimizer,
            "learning_rate": self.learning_rate,
            "momentum": self.momentum,
            "local_epochs": self.local_epochs,
            "batch_size": self.batch_size,
            "weighting": self.weighting,
            "dtype": self.dtype,
            "dp": self.dp,
            "gradient_clip": self.gradient_clip,
            "noise_multiplier": self.noise_multiplier,
            "sampling_rate": self.sampling_rate,
            "dp_steps": self.dp_steps,
            "privacy_delta": self.privacy_delta,
        }

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.params() == self.params()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.params().items())))

    # ------------------------------------------------------------------------------------ helpers
    @property
    def steps_per_round(self) -> int:
        """DP-SGD steps per local update: ``dp_steps``, or E/q (E epochs' worth of Poisson lots)."""
        return self.dp_steps or max(1, round(self.local_epochs / self.sampling_rate))

    def _module(self, features: int) -> torch.nn.Module:
        return _network(features, self.hidden, self.classes).to(DTYPES[self.dtype])

    def _load(self, module: torch.nn.Module, params: Mapping[str, np.ndarray]) -> None:
        module.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in params.items()})

    @staticmethod
    def _dump(module: torch.nn.Module) -> dict[str, np.ndarray]:
        return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}

    def _average(
        self, own: Mapping[str, np.ndarray], n: int, inbox: Mapping[str, Any], ctx: TaskContext
    ) -> dict[str, np.ndarray]:
        """Σ_j a_{sj} w_j over the closed in-neighbourhood, summed in the consortium's order."""
        members = {ctx.organisation: (own, n)}
        members.update({sender: (msg["params"], int(msg["n"])) for sender, msg in inbox.items()})
        order = [org for org in ctx.consortium if org in members]
        if self.weighting == "samples":
            total = sum(members[o][1] for o in order)
            weights = [members[o][1] / total for o in order]
        else:
            weights = [1.0 / len(order)] * len(order)
        out = {}
        for key, value in own.items():
            acc = np.zeros(value.shape, dtype=np.float64)
            for org, weight in zip(order, weights, strict=True):
                acc += weight * np.asarray(members[org][0][key], dtype=np.float64)
            out[key] = acc.astype(value.dtype)
        return out

    # ------------------------------------------------------------------------------------ contract
    def init(self, data: LocalDataset, ctx: TaskContext) -> dict[str, Any]:
        torch.set_num_threads(1)
        torch.use_deterministic_algorithms(True)
        torch.manual_seed(_seed(ctx.shared_rng("dfedavg-init")))
        module = self._module(int(data.features.shape[1]))
        return {"params": self._dump(module), "n": len(data), "steps": 0}

    def step(
        self, state: dict[str, Any], inbox: Mapping[str, Any], data: LocalDataset, ctx: TaskContext
    ) -> StepResult:
        torch.set_num_threads(1)
        torch.use_deterministic_algorithms(True)
        params = self._average(state["params"], int(state["n"]), inbox, ctx)
        steps = int(state["steps"])
        metrics: dict[str, float] = {"neighbours_averaged": float(len(inbox))}
        released = 0
        outbox: dict[str, Any] = {}
        if ctx.round < ctx.rounds:
            torch.manual_seed(_seed(ctx.rng("dfedavg-train")))
            module = self._module(int(data.features.shape[1]))
            self._load(module, params)
            if self.dp:
                loss, released = self._dp_sgd(module, data), self.steps_per_round
            else:
                loss = self._local_epochs(module, data)
            params = self._dump(module)
            metrics["train_loss"] = loss
            outbox = {nb: {"params": params, "n": len(data)} for nb in ctx.out_neighbours}
        steps += released
        if self.dp:
            metrics.update(self._privacy_metrics(released, steps))
        new_state = {"params": params, "n": len(data), "steps": steps}
        return StepResult(state=new_state, outbox=outbox, metrics=metrics, model=params)

    def _tensors(self, data: LocalDataset) -> tuple[torch.Tensor, torch.Tensor]:
        if data.labels is None:
            raise ValueError("dfedavg is supervised: the organisation's dataset has no labels")
        x = torch.from_numpy(np.ascontiguousarray(data.features, dtype=np.dtype(self.dtype)))
        y = torch.from_numpy(np.asarray(data.labels, dtype=np.int64))
        return x, y

    def _optimiser(self, module: torch.nn.Module) -> torch.optim.Optimizer:
        if self.optimizer == "adam":
            return torch.optim.Adam(module.parameters(), lr=self.learning_rate)
        return torch.optim.SGD(module.parameters(), lr=self.learning_rate, momentum=self.momentum)

    def _local_epochs(self, module: torch.nn.Module, data: LocalDataset) -> float:
        """E epochs of minibatch SGD/Adam over shuffled rows (McMahan et al. 2017, ClientUpdate)."""
        x, y = self._tensors(data)
        opt = self._optimiser(module)
        loss_fn = torch.nn.CrossEntropyLoss()
        total, batches = 0.0, 0
        for _ in range(self.local_epochs):
            order = torch.randperm(len(y))
            for start in range(0, len(y), self.batch_size):
                idx = order[start : start + self.batch_size]
                opt.zero_grad()
                loss = loss_fn(module(x[idx]), y[idx])
                loss.backward()
                opt.step()
                total += float(loss.detach())
                batches += 1
        return total / max(1, batches)

    def clipped_gradients(
        self, module: torch.nn.Module, x: torch.Tensor, y: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """Per-example gradients of the loss, each clipped to norm C: ḡ_i = g_i / max(1, ‖g_i‖/C)
        (Abadi et al. 2016, Algorithm 1), as {parameter name: (batch, *shape)}."""
        names = [name for name, _ in module.named_parameters()]
        values = {name: p.detach() for name, p in module.named_parameters()}
        loss_fn = torch.nn.CrossEntropyLoss()

        def loss(p: dict[str, torch.Tensor], xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
            out = torch.func.functional_call(module, p, (xi.unsqueeze(0),))
            return loss_fn(out, yi.unsqueeze(0))

        grads = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))(values, x, y)
        norms = torch.sqrt(sum(grads[n].flatten(1).pow(2).sum(1) for n in names))
        factor = 1.0 / torch.clamp(norms / self.gradient_clip, min=1.0)
        return {n: grads[n] * factor.view(-1, *([1] * (grads[n].dim() - 1))) for n in names}

    def _dp_sgd(self, module: torch.nn.Module, data: LocalDataset) -> float:
        """``steps_per_round`` DP-SGD steps: Poisson lots of rate q, clipped per-example gradients,
        Gaussian noise σC on their sum, divided by the expected lot size qn (Abadi et al. 2016)."""
        x, y = self._tensors(data)
        opt = self._optimiser(module)
        expected = self.sampling_rate * len(y)
        total = 0.0
        for _ in range(self.steps_per_round):
            lot = torch.nonzero(torch.rand(len(y), dtype=torch.float64) < self.sampling_rate).flatten()
            opt.zero_grad()
            clipped = self.clipped_gradients(module, x[lot], y[lot]) if len(lot) else None
            for name, p in module.named_parameters():
                noise = torch.randn(p.shape, dtype=p.dtype) * (self.noise_multiplier * self.gradient_clip)
                summed = clipped[name].sum(0) if clipped is not None else torch.zeros_like(p)
                p.grad = (summed + noise) / expected
            opt.step()
            if len(lot):
                with torch.no_grad():
                    total += float(torch.nn.functional.cross_entropy(module(x[lot]), y[lot]))
        return total / self.steps_per_round

    def _privacy_metrics(self, released: int, steps: int) -> dict[str, float]:
        """This round's Gaussian releases in the form the ledger charges them (docs/ledger.md "Privacy
        budgets"): it recomputes ε from (σ, q, releases so far, δ) and never takes ``epsilon_total``."""
        rho = released / (2.0 * self.noise_multiplier**2)
        return {
            "privacy_rigorous": 1,
            "noise_multiplier": self.noise_multiplier,
            "sampling_rate": self.sampling_rate,
            "parallel_composition": 0,
            "gaussian_releases": released,
            "rho_spent": rho,
            "rho_network_spent": rho,
            "privacy_delta": self.privacy_delta,
            "gradient_clip": self.gradient_clip,
            "sensitivity": self.gradient_clip,
            "epsilon_total": dp_sgd_epsilon(
                self.sampling_rate, self.noise_multiplier, steps, self.privacy_delta
            ),
        }


def predict(model: Mapping[str, np.ndarray], features: np.ndarray) -> np.ndarray:
    """Class predictions of a final model (its parameters) on rows of ``features``."""
    weights = [np.asarray(model[k], dtype=np.float64) for k in sorted(model) if k.endswith("weight")]
    biases = [np.asarray(model[k], dtype=np.float64) for k in sorted(model) if k.endswith("bias")]
    h = np.asarray(features, dtype=np.float64)
    for i, (w, b) in enumerate(zip(weights, biases, strict=True)):
        h = h @ w.T + b
        if i < len(weights) - 1:
            h = np.maximum(h, 0.0)
    return np.argmax(h, axis=1)
