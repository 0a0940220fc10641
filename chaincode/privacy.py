"""Privacy budgets of learning processes: what a budget names and how the ledger charges a round.

A budget is ``{mechanism, epsilon, delta?, accounting?, scope?}`` (stored resolved on the process):

* ``accounting`` — ``"basic"``: ε adds up over releases (pure ε-DP, δ = 0); ``"zcdp"``: the zCDP ρ of
  the releases adds up and is converted at the budget's δ, ε(δ) = ρ + 2√(ρ ln(1/δ)) (Bun & Steinke
  2016, Prop. 1.3), capped by the basic sum (both bounds are sound; the smaller holds). Default: zcdp
  when a δ is given, else basic.
* ``scope`` — which observer the budget protects against: ``"network"`` (default; an eavesdropper on
  every link, who sees every node's release of a round) or ``"node"`` (the messages of one
  organisation). Both totals are recorded on every execution record whatever the scope.

A process with a budget must clip its per-round contribution (hyper-parameter ``gradient_clip`` > 0):
without a bound on what one record can change, no sensitivity, hence no ε, holds. Each round's result
then reports, as metrics, ``privacy_rigorous`` = 1 (its sensitivity is a proven bound, not a nominal
normalisation), ``epsilon_spent`` / ``epsilon_network_spent`` and, for zCDP, ``rho_spent`` /
``rho_network_spent``; the contract adds them to the organisation's totals of the previous round.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypeGuard

from chaincode.errors import InvalidArgument
from chaincode.records import PrivacyBudget, PrivacyCharge, PrivacyCharges, PrivacySpent, PrivacyTotals

ACCOUNTINGS = ("basic", "zcdp")
SCOPES = ("network", "node")
BUDGET_FIELDS = {"mechanism", "epsilon", "delta", "accounting", "scope"}


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def parse_budget(budget: Any, hyperparameters: Mapping[str, Any]) -> PrivacyBudget | None:
    """Validate a process's privacy budget and return it with its accounting and scope resolved."""
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


def _metric(metrics: Mapping[str, Any], name: str, what: str) -> float:
    value = metrics.get(name)
    if value is None or value < 0:
        raise InvalidArgument(
            f"{what} has a privacy budget; the result must report a non-negative metric {name!r}"
        )
    return float(value)


def zcdp_epsilon(rho: float, delta: float) -> float:
    """ε(δ) = ρ + 2√(ρ ln(1/δ)) (Bun & Steinke 2016, Prop. 1.3)."""
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def _totals(budget: PrivacyBudget, before: PrivacyTotals | None, spent: PrivacySpent) -> PrivacyTotals:
    """``before`` (the previous round's totals of one observer) plus this round's charge, and the ε
    they amount to: the basic sum, or under zCDP the smaller of it and ε(δ) of the summed ρ."""
    basic = (before.epsilon_basic if before else 0.0) + spent.epsilon_basic
    rho = (before.rho if before else 0.0) + spent.rho
    epsilon = basic
    if budget.accounting == "zcdp" and budget.delta is not None:
        epsilon = min(basic, zcdp_epsilon(rho, float(budget.delta)))
    return PrivacyTotals(epsilon_basic=basic, rho=rho, epsilon=epsilon)


def charge(
    budget: PrivacyBudget, previous: PrivacyCharge | None, metrics: Mapping[str, Any], what: str
) -> PrivacyCharge:
    """The privacy block of an execution record: this round's charge added to the previous round's
    totals of the same organisation (``previous`` = that record's block, None in round 1)."""
    if metrics.get("privacy_rigorous") != 1:
        raise InvalidArgument(
            f"{what} has a privacy budget; the result reports a nominal ε (metric "
            f"'privacy_rigorous' is not 1), which cannot be charged to a budget"
        )
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
