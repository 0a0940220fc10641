"""Privacy budgets of learning processes: what a budget names, the consortium's cap, and how the ledger
charges a round (docs/ledger.md "Privacy budgets"; docs/dpsda.md "On the ledger").

A budget is ``{mechanism, epsilon, delta?, accounting?, scope?}`` (stored resolved on the process):

* ``accounting`` — how the pure-ε releases of the Laplace rounds compose: ``"basic"``, ε adds up
  (pure ε-DP, δ = 0); ``"zcdp"``, their zCDP ρ adds up and is converted at the budget's δ,
  ε(δ) = ρ + 2√(ρ ln(1/δ)) (Bun & Steinke 2016, Prop. 1.3), capped by the basic sum (both bounds are
  sound; the smaller holds). Default: zcdp when a δ is given, else basic. Gaussian rounds are always
  charged by their own accountant (below) and need a δ.
* ``scope`` — which observer the budget protects against: ``"network"`` (default; an eavesdropper on
  every link, who sees every node's release of a round) or ``"node"`` (the messages of one
  organisation). Both totals are recorded on every execution record whatever the scope.

**The cap.** No process may declare a budget above the consortium's cap on rigorous ε
(:data:`chaincode.limits.PRIVACY_CAP_EPSILON` = 10 at :data:`~chaincode.limits.PRIVACY_CAP_DELTA` = 1e-5):
a budget of ε above the cap, or with a δ above the cap's δ, is refused at ``LearningProcess:create``.
A pure-ε budget (no δ) is (ε, δ)-DP for every δ, so only its ε is compared.

A process with a budget must clip its per-round contribution (hyper-parameter ``gradient_clip`` > 0):
without a bound on what one record can change, no sensitivity, hence no ε, holds. Every round's result
reports ``privacy_rigorous`` = 1 (its sensitivity is a proven bound, not a nominal normalisation); a
nominal figure is never charged. Then, by the mechanism its metrics name:

* **Laplace rounds** (pure ε per release) report ``epsilon_spent`` / ``epsilon_network_spent`` and, for
  zCDP, ``rho_spent`` / ``rho_network_spent``; the contract adds them to the organisation's totals of
  the previous round.
* **Gaussian rounds** (the round reports ``noise_multiplier``; DPSDA's Gaussian mode, docs/dpsda.md)
  report ``noise_multiplier`` z, ``sampling_rate`` q, ``parallel_composition`` (1: every record enters
  one round only), ``rho_spent`` = ``rho_network_spent`` ∈ {0, 1/(2z²)} and ``privacy_delta``; a round
  of k releases (k DP-SGD steps, each a sampled Gaussian release) reports ``gaussian_releases`` = k and
  ``rho_spent`` = k/(2z²), and its k releases compose like k rounds. The
  contract checks them -- ρ = 1/(2z²) for the z reported (or 0: no release), δ = the budget's, z, q,
  δ, ``gradient_clip`` and the sampling as the process's hyper-parameters name them, the same z, q and
  composition as the organisation's previous round -- counts the rounds that released, and computes
  the ε itself from (z, q, releases, δ): :func:`gaussian_epsilon`. It never takes a reported ε.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any, TypeGuard

from chaincode.errors import InvalidArgument
from chaincode.limits import PRIVACY_CAP_DELTA, PRIVACY_CAP_EPSILON
from chaincode.records import (
    ExecutionRecord,
    PrivacyBudget,
    PrivacyCharge,
    PrivacyCharges,
    PrivacySpent,
    PrivacyTotals,
    ProcessPrivacy,
)

ACCOUNTINGS = ("basic", "zcdp")
SCOPES = ("network", "node")
BUDGET_FIELDS = {"mechanism", "epsilon", "delta", "accounting", "scope"}
#: Rényi orders of the ledger's sampled-Gaussian accountant: integers, whose A_α is an exact finite sum
RDP_ORDERS = (*range(2, 65), 80, 96, 128, 256)
#: relative tolerance of the consistency checks on reported figures (the image computes them in float64)
CONSISTENCY_TOLERANCE = 1e-9


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def parse_budget(budget: Any, hyperparameters: Mapping[str, Any]) -> PrivacyBudget | None:
    """Validate a process's privacy budget against the cap and return it with its accounting and
    scope resolved."""
    if budget is None:
        return None
    if not isinstance(budget, dict):
        raise InvalidArgument("privacy budget must be an object")
    unknown = set(budget) - BUDGET_FIELDS
    if unknown:
        raise InvalidArgument(f"privacy budget has unknown fields {sorted(unknown)}")
    missing = {"mechanism", "epsilon"} - set(budget)
    if missing:
        raise InvalidArgument(f"privacy budget is missing {sorted(missing)}")
    if not isinstance(budget["mechanism"], str) or not 1 <= len(budget["mechanism"]) <= 64:
        raise InvalidArgument("privacy budget mechanism must be a name of 1 to 64 characters")
    eps = budget["epsilon"]
    if not _number(eps) or eps <= 0:
        raise InvalidArgument("privacy budget epsilon must be a positive finite number")
    delta = budget.get("delta")
    if delta is not None and not (_number(delta) and 0 < delta < 1):
        raise InvalidArgument("privacy budget delta must be a number in (0, 1)")
    if eps > PRIVACY_CAP_EPSILON:
        raise InvalidArgument(
            f"privacy budget ε = {eps} is over the consortium's cap on rigorous ε = {PRIVACY_CAP_EPSILON} "
            f"(at δ = {PRIVACY_CAP_DELTA})",
            limit=PRIVACY_CAP_EPSILON,
            delta=PRIVACY_CAP_DELTA,
        )
    if delta is not None and delta > PRIVACY_CAP_DELTA:
        raise InvalidArgument(
            f"privacy budget δ = {delta} is over the consortium's cap δ = {PRIVACY_CAP_DELTA} "
            f"(rigorous ε ≤ {PRIVACY_CAP_EPSILON} at δ ≤ {PRIVACY_CAP_DELTA})",
            limit=PRIVACY_CAP_EPSILON,
            delta=PRIVACY_CAP_DELTA,
        )
    accounting = budget.get("accounting", "zcdp" if delta is not None else "basic")
    if accounting not in ACCOUNTINGS:
        raise InvalidArgument(f"privacy budget accounting must be one of {ACCOUNTINGS}")
    if accounting == "zcdp" and delta is None:
        raise InvalidArgument(
            "zCDP accounting converts ρ to ε at a δ: the privacy budget needs a delta in (0, 1)"
        )
    scope = budget.get("scope", "network")
    if scope not in SCOPES:
        raise InvalidArgument(f"privacy budget scope must be one of {SCOPES}")
    clip = hyperparameters.get("gradient_clip")
    if not (_number(clip) and clip > 0):
        raise InvalidArgument(
            "a process with a privacy budget must clip: hyperparameters.gradient_clip must be a "
            "positive finite number (without it no sensitivity bound holds and ε is nominal)"
        )
    if delta is None:
        return PrivacyBudget(mechanism=budget["mechanism"], epsilon=eps, accounting=accounting, scope=scope)
    return PrivacyBudget(
        mechanism=budget["mechanism"], epsilon=eps, accounting=accounting, scope=scope, delta=delta
    )


# ---------------------------------------------------------------------------------------- accountants
def zcdp_epsilon(rho: float, delta: float) -> float:
    """ε(δ) = ρ + 2√(ρ ln(1/δ)) (Bun & Steinke 2016, Prop. 1.3)."""
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def log_ndtr(x: float) -> float:
    """ln Φ(x) of the standard normal: ln(1 − Φ(−x)) for x > 0 (no cancellation near 1), from ``erfc``
    down to x = −30, below that the asymptotic series ln Φ(x) = −x²/2 − ln(−x) − ½ ln 2π +
    ln(1 − 1/x² + 3/x⁴ − 15/x⁶ + 105/x⁸) (Abramowitz & Stegun 26.2.12; its next term, 945/x¹⁰, is
    below 2e-12 for x ≤ −30)."""
    if x > 0.0:
        return math.log1p(-0.5 * math.erfc(x / math.sqrt(2.0)))
    if x > -30.0:
        return math.log(0.5 * math.erfc(-x / math.sqrt(2.0)))
    x2 = x * x
    series = 1.0 - 1.0 / x2 + 3.0 / x2**2 - 15.0 / x2**3 + 105.0 / x2**4
    return -0.5 * x2 - math.log(-x) - 0.5 * math.log(2.0 * math.pi) + math.log(series)


def gdp_delta(mu: float, epsilon: float) -> float:
    """δ(ε) of a μ-GDP mechanism, exact: Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Balle & Wang 2018,
    Thm. 8; Dong, Roth & Su 2022, Cor. 2.13), in log space."""
    first = log_ndtr(-epsilon / mu + mu / 2.0)
    second = epsilon + log_ndtr(-epsilon / mu - mu / 2.0)
    if second >= first:
        return 0.0
    return math.exp(first) * -math.expm1(second - first)


def gdp_epsilon(mu: float, delta: float) -> float:
    """The ε at which a μ-GDP mechanism is (ε, δ)-DP: bisection of :func:`gdp_delta` to 1e-12
    relative, on the safe side (the upper end, whose δ(ε) ≤ δ, is returned). Deterministic: a fixed
    sequence of IEEE operations on the same inputs."""
    if gdp_delta(mu, 0.0) <= delta:
        return 0.0
    lo, hi = 0.0, max(1.0, mu * mu)
    while gdp_delta(mu, hi) > delta:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        if hi - lo <= 1e-12 * hi:
            break
        mid = 0.5 * (lo + hi)
        if gdp_delta(mu, mid) > delta:
            lo = mid
        else:
            hi = mid
    return hi


def _logsumexp(terms: list[float]) -> float:
    top = max(terms)
    return top + math.log(math.fsum(math.exp(t - top) for t in terms))


@lru_cache(maxsize=64)
def sampled_gaussian_rdp(sampling_rate: float, noise_multiplier: float) -> tuple[float, ...]:
    """ε_α of one release of the sampled Gaussian mechanism (Poisson rate q, noise multiplier z,
    add/remove-one adjacency) at every order of :data:`RDP_ORDERS`: ε_α = ln(A_α)/(α−1),
    A_α = Σ_k C(α,k) (1−q)^{α−k} q^k e^{(k²−k)/(2z²)} for an integer α (Mironov, Talwar & Zhang 2019,
    §3.3; every term positive, summed in log space). q = 1 is the Gaussian mechanism, α/(2z²)."""
    q, z = sampling_rate, noise_multiplier
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


def rdp_epsilon(rdp: tuple[float, ...], delta: float) -> float:
    """min over :data:`RDP_ORDERS` of ε_α + ln((α−1)/α) − (ln δ + ln α)/(α−1) (Balle et al. 2020,
    Thm. 21; Canonne, Kamath & Steinke 2020, Prop. 12), clipped at 0."""
    best = math.inf
    for a, e in zip(RDP_ORDERS, rdp):
        best = min(best, e + math.log1p(-1.0 / a) - (math.log(delta) + math.log(a)) / (a - 1.0))
    return max(0.0, best)


def gaussian_epsilon(
    noise_multiplier: float, sampling_rate: float, parallel: bool, releases: int, delta: float
) -> tuple[str, float, float]:
    """(accounting, ρ, ε at δ) of ``releases`` rounds of the (sampled) Gaussian mechanism, each of noise
    multiplier z and Poisson rate q (docs/dpsda.md, eq. (G3)):

    * ``parallel`` (a stream: every record enters one round): the run is one release, 1/z-GDP, exact;
    * q = 1, sequential: R releases compose exactly, √R/z-GDP (Dong, Roth & Su 2022, Cor. 3.3);
    * q < 1: the RDP curve R·ε_α(q, z) converted as :func:`rdp_epsilon`, or the zCDP bound of the
      summed ρ = R/(2z²) if smaller (subsampling never raises the Rényi divergence).
    """
    if releases == 0:
        return ("gdp" if sampling_rate == 1.0 else "rdp", 0.0, 0.0)
    z = noise_multiplier
    if parallel:
        return ("gdp", 1.0 / (2.0 * z * z), gdp_epsilon(1.0 / z, delta))
    rho = releases / (2.0 * z * z)
    if sampling_rate == 1.0:
        return ("gdp", rho, gdp_epsilon(math.sqrt(releases) / z, delta))
    curve = tuple(releases * e for e in sampled_gaussian_rdp(sampling_rate, z))
    return ("rdp", rho, min(rdp_epsilon(curve, delta), zcdp_epsilon(rho, delta)))


# ---------------------------------------------------------------------------------------- charging
def _metric(metrics: Mapping[str, Any], name: str, what: str) -> float:
    value = metrics.get(name)
    if value is None or value < 0:
        raise InvalidArgument(
            f"{what} has a privacy budget; the result must report a non-negative metric {name!r}"
        )
    return float(value)


def _totals(budget: PrivacyBudget, before: PrivacyTotals | None, spent: PrivacySpent) -> PrivacyTotals:
    """``before`` (the previous round's totals of one observer) plus this round's charge, and the ε
    they amount to: the basic sum, or under zCDP the smaller of it and ε(δ) of the summed ρ."""
    basic = ((before.epsilon_basic or 0.0) if before else 0.0) + (spent.epsilon_basic or 0.0)
    rho = (before.rho if before else 0.0) + spent.rho
    epsilon = basic
    if budget.accounting == "zcdp" and budget.delta is not None:
        epsilon = min(basic, zcdp_epsilon(rho, float(budget.delta)))
    return PrivacyTotals(epsilon_basic=basic, rho=rho, epsilon=epsilon)


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=CONSISTENCY_TOLERANCE, abs_tol=0.0)


def charge(
    budget: PrivacyBudget,
    previous: PrivacyCharge | None,
    metrics: Mapping[str, Any],
    what: str,
    hyperparameters: Mapping[str, Any] | None = None,
) -> PrivacyCharge:
    """The privacy block of an execution record: this round's charge added to the previous round's
    totals of the same organisation (``previous`` = that record's block, None in round 1)."""
    if metrics.get("privacy_rigorous") != 1:
        raise InvalidArgument(
            f"{what} has a privacy budget; the result reports a nominal ε (metric "
            f"'privacy_rigorous' is not 1), which cannot be charged to a budget"
        )
    gaussian = "noise_multiplier" in metrics
    if previous is not None and (previous.mechanism == "gaussian") != gaussian:
        raise InvalidArgument(
            f"{what}: this round's result is {'a Gaussian' if gaussian else 'a pure-ε'} release, the "
            f"organisation's previous round was not; a process's rounds are charged by one accountant"
        )
    if gaussian:
        return _gaussian_charge(budget, previous, metrics, what, hyperparameters or {})
    epsilon_node = _metric(metrics, "epsilon_spent", what)
    epsilon_network = _metric(metrics, "epsilon_network_spent", what)
    zcdp = budget.accounting == "zcdp"
    node = PrivacySpent(epsilon_basic=epsilon_node, rho=_metric(metrics, "rho_spent", what) if zcdp else 0.0)
    network = PrivacySpent(
        epsilon_basic=epsilon_network, rho=_metric(metrics, "rho_network_spent", what) if zcdp else 0.0
    )
    for key in ("epsilon_basic", "rho"):
        if getattr(network, key) < getattr(node, key):
            raise InvalidArgument(
                f"{what}: the network charge {key} = {getattr(network, key)} is below the "
                f"node charge {getattr(node, key)}; every link sees at least one node's release"
            )
    return PrivacyCharge(
        accounting=budget.accounting,
        scope=budget.scope,
        delta=budget.delta,
        rigorous=True,
        sensitivity=metrics.get("sensitivity"),
        gradient_clip=metrics.get("gradient_clip"),
        spent=PrivacyCharges(node=node, network=network),
        node=_totals(budget, previous.node if previous else None, node),
        network=_totals(budget, previous.network if previous else None, network),
    )


def _gaussian_charge(
    budget: PrivacyBudget,
    previous: PrivacyCharge | None,
    metrics: Mapping[str, Any],
    what: str,
    hyper: Mapping[str, Any],
) -> PrivacyCharge:
    """A Gaussian round: its reported figures checked for consistency, then charged by
    :func:`gaussian_epsilon` from (z, q, composition, releases so far, the budget's δ)."""
    if budget.delta is None:
        raise InvalidArgument(
            f"{what}: a Gaussian release has no pure ε; its privacy budget needs a delta in (0, 1)"
        )
    delta = float(budget.delta)
    z = metrics.get("noise_multiplier")
    if not (_number(z) and z > 0):
        raise InvalidArgument(
            f"{what}: a Gaussian round must report a positive finite 'noise_multiplier' (z = 0 adds no noise)"
        )
    q = metrics.get("sampling_rate")
    if not (_number(q) and 0 < q <= 1):
        raise InvalidArgument(f"{what}: a Gaussian round must report a 'sampling_rate' in (0, 1]")
    parallel = metrics.get("parallel_composition")
    if parallel not in (0, 1):
        raise InvalidArgument(f"{what}: a Gaussian round must report 'parallel_composition' 0 or 1")
    if parallel == 1 and q != 1:
        raise InvalidArgument(
            f"{what}: parallel composition (every record in one round) needs sampling_rate 1, got {q}"
        )
    reported_delta = metrics.get("privacy_delta")
    if not (_number(reported_delta) and _same(float(reported_delta), delta)):
        raise InvalidArgument(
            f"{what}: the round reports privacy_delta = {reported_delta}, the process's budget has "
            f"δ = {delta}; a Gaussian round is accounted at the budget's δ"
        )
    rho_step = 1.0 / (2.0 * float(z) ** 2)
    rho = _metric(metrics, "rho_spent", what)
    rho_network = _metric(metrics, "rho_network_spent", what)
    steps = metrics.get("gaussian_releases")
    if steps is None:
        released = 1 if rho > 0 else 0
    elif _number(steps) and steps >= 0 and steps == int(steps):
        released = int(steps)
    else:
        raise InvalidArgument(
            f"{what}: a Gaussian round's 'gaussian_releases' must be a non-negative integer, got {steps!r}"
        )
    if not ((released == 0 and rho == 0.0) or (released > 0 and _same(rho, released * rho_step))):
        raise InvalidArgument(
            f"{what}: the round reports rho_spent = {rho} for {released} release(s), but a Gaussian "
            f"release of noise multiplier z = {z} is ρ = 1/(2z²) = {rho_step:.12g} each (0 for a round "
            f"that releases nothing)"
        )
    if rho_network != rho:
        raise InvalidArgument(
            f"{what}: the round reports rho_network_spent = {rho_network} ≠ rho_spent = {rho}; one "
            f"Gaussian release of a round covers the whole network"
        )
    expected = {
        "noise_multiplier": z,
        "sampling_rate": q,
        "privacy_delta": reported_delta,
        "gradient_clip": metrics.get("gradient_clip"),
    }
    for name, value in expected.items():
        if name in hyper and not (
            _number(hyper[name]) and _number(value) and _same(float(hyper[name]), float(value))
        ):
            raise InvalidArgument(
                f"{what}: the round reports {name} = {value}, the process's hyper-parameters name "
                f"{name} = {hyper[name]}"
            )
    if "sampling" in hyper and (hyper["sampling"] == "stream") != (parallel == 1):
        raise InvalidArgument(
            f"{what}: the round reports parallel_composition = {parallel}, but the process samples "
            f"{hyper['sampling']!r} (only a stream, where every record enters one round, composes in parallel)"
        )
    if previous is not None and not (
        previous.noise_multiplier == float(z)
        and previous.sampling_rate == float(q)
        and previous.parallel_composition == bool(parallel)
    ):
        raise InvalidArgument(
            f"{what}: the round reports z = {z}, q = {q}, parallel_composition = {parallel}; the "
            f"organisation's previous round had z = {previous.noise_multiplier}, q = "
            f"{previous.sampling_rate}, parallel_composition = {previous.parallel_composition}"
        )
    releases = ((previous.network.releases or 0) if previous else 0) + released
    accounting, rho_total, epsilon = gaussian_epsilon(float(z), float(q), parallel == 1, releases, delta)
    spent = PrivacySpent(rho=rho_step * released, releases=released)
    totals = PrivacyTotals(rho=rho_total, epsilon=epsilon, releases=releases)
    return PrivacyCharge(
        mechanism="gaussian",
        accounting=accounting,
        scope=budget.scope,
        delta=delta,
        rigorous=True,
        sensitivity=metrics.get("sensitivity"),
        gradient_clip=metrics.get("gradient_clip"),
        noise_multiplier=float(z),
        sampling_rate=float(q),
        parallel_composition=parallel == 1,
        spent=PrivacyCharges(node=spent, network=spent),
        node=totals,
        network=totals,
    )


# ---------------------------------------------------------------------------------------- reading
def privacy_status(budget: PrivacyBudget | None, records: Iterable[ExecutionRecord]) -> ProcessPrivacy:
    """What a process's privacy amounts to, from (at least) each member's latest completed execution
    record: with a budget, the largest ε the ledger charged a member (budget's scope) against it; the
    largest running ε an image reported itself, labelled rigorous or nominal, in any case."""
    spent: float | None = 0.0 if budget is not None else None
    accounting: str | None = budget.accounting if budget is not None else None
    reported: float | None = None
    reported_rigorous: bool | None = None
    latest_round = 0
    for rec in records:
        if rec.status != "completed" or rec.result is None:
            continue
        if budget is not None and rec.privacy is not None and spent is not None:
            spent = max(spent, rec.epsilon_total)
            if rec.round >= latest_round:
                latest_round, accounting = rec.round, rec.privacy.accounting
        metrics = rec.result.metrics
        value = metrics.get("epsilon_network_total", metrics.get("epsilon_total"))
        if value is not None and (reported is None or value > reported):
            reported, reported_rigorous = float(value), metrics.get("privacy_rigorous") == 1
    return ProcessPrivacy(
        rigorous=budget is not None,
        epsilon_spent=spent,
        epsilon_budget=None if budget is None else float(budget.epsilon),
        delta=None if budget is None else budget.delta,
        scope=None if budget is None else budget.scope,
        accounting=accounting,
        cap_epsilon=PRIVACY_CAP_EPSILON,
        cap_delta=PRIVACY_CAP_DELTA,
        reported_epsilon=reported,
        reported_rigorous=reported_rigorous,
    )
