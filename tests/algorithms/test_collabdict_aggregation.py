"""Tests for algorithms.collabdict.aggregation: sums as message rounds (seed 000 eqs. (2)–(6); docs/collabdict.md)."""

import numpy as np
import pytest

from algorithms import codec
from algorithms.collabdict import aggregation as ag
from algorithms.collabdict.aggregation import AggregationConfig
from algorithms.simulator import context


def run_session(cfg, values, seed=0, session=1, segments=None):
    """Drive one session over all participants, messages through the codec; return (totals, rounds, first outboxes)."""
    S = len(values)
    orgs = tuple(f"o{i}" for i in range(S))
    rnd = 1
    states, inbox = {}, {o: {} for o in orgs}
    first = {}
    for i, o in enumerate(orgs):
        st, out = ag.start(
            cfg, values[i], session, context(seed, rnd, 10_000, o, orgs, None), segments=segments
        )
        states[o] = codec.decode(codec.encode(st))
        first[o] = out
        for r, msg in out.items():
            inbox[r][o] = codec.decode(codec.encode(msg))
    totals = {}
    while len(totals) < S:
        rnd += 1
        nxt = {o: {} for o in orgs}
        for o in orgs:
            st, out, tot = ag.advance(
                cfg, states[o], dict(sorted(inbox[o].items())), context(seed, rnd, 10_000, o, orgs, None)
            )
            states[o] = codec.decode(codec.encode(st))
            if tot is not None:
                totals[o] = tot
            for r, msg in out.items():
                nxt[r][o] = codec.decode(codec.encode(msg))
        inbox = nxt
    return totals, rnd - 1, first


@pytest.mark.parametrize("shares", [None, 2, 3])
def test_exact_sum_takes_two_rounds_and_is_identical_everywhere(shares):
    S = 7
    values = np.random.default_rng(0).normal(size=(S, 12))
    totals, rounds, first = run_session(AggregationConfig(mode="exact", shares=shares), values)
    assert rounds == 2
    ref = values.sum(axis=0)
    for o, t in totals.items():
        assert np.allclose(t, ref, rtol=1e-12, atol=1e-12)
        assert np.array_equal(t, totals["o0"])  # same bits at every participant
    for o, out in first.items():  # no share equals the participant's value
        i = int(o[1:])
        for msg in out.values():
            assert not np.allclose(msg["value"], values[i])


@pytest.mark.parametrize("chunks", [1, 2, 5])
def test_consensus_session_with_chunks_and_relabelling(chunks):
    S = 7
    values = np.random.default_rng(1).normal(size=(S, 4))
    cfg = AggregationConfig(mode="consensus", graph="cic", chunks=chunks, rounds=170)
    totals, rounds, first = run_session(cfg, values)
    assert rounds == 170
    for t in totals.values():
        assert np.allclose(t, values.sum(axis=0), rtol=1e-10, atol=1e-10)
    if chunks > 1:
        for o, out in first.items():
            i = int(o[1:])
            for msg in out.values():
                for v in msg["values"]:
                    assert not np.allclose(v, values[i] / 1.0)


def test_consensus_error_decays_geometrically_in_kmax():
    S = 11
    values = np.random.default_rng(2).normal(size=(S, 3))
    errs = []
    for k in (20, 40, 80):
        totals, _, _ = run_session(AggregationConfig(mode="consensus", graph="cic", rounds=k), values)
        errs.append(max(np.abs(t - values.sum(0)).max() for t in totals.values()))
    assert errs[0] > errs[1] > errs[2]
    assert errs[2] < errs[0] * 0.5**4


def test_random_link_graph_session_converges():
    S = 6
    values = np.random.default_rng(3).normal(size=(S, 2))
    totals, _, _ = run_session(AggregationConfig(mode="consensus", graph="random-link", rounds=150), values)
    for t in totals.values():
        assert np.allclose(t, values.sum(0), atol=1e-6)


def test_default_is_the_seeds_chunked_cic_consensus():
    cfg = AggregationConfig()
    assert (cfg.mode, cfg.chunks, cfg.graph) == ("consensus", 3, "auto")
    assert ag.consensus_topology("auto", 31, 0).name == "cic(31)"
    assert ag.consensus_topology("auto", 6, 0).name == "complete(6)"  # CIC needs S prime


def test_default_rounds_and_validation():
    assert ag.rounds_per_session(AggregationConfig(mode="exact"), 31) == 2
    assert ag.rounds_per_session(AggregationConfig(mode="consensus", chunks=1), 31) == 347
    # C = 3 chunks of scale 10·|ξ|: k_max = ⌈ln(√S·S·10·C/tol)/ln(1/ρ)⌉, more rounds than the unchunked 347
    assert ag.rounds_per_session(AggregationConfig(), 31) == 465
    with pytest.raises(ValueError, match="explicit"):
        ag.rounds_per_session(AggregationConfig(mode="consensus", graph="random-link"), 8)
    with pytest.raises(ValueError):
        AggregationConfig(mode="gossip")
    with pytest.raises(ValueError):
        AggregationConfig(graph="torus")


def test_missing_or_foreign_message_is_rejected():
    orgs = ("a", "b", "c")
    cfg = AggregationConfig(mode="exact")
    ctx = context(0, 1, 5, "a", orgs, None)
    st, _ = ag.start(cfg, np.ones(2), 4, ctx)
    st, _, _ = ag.advance(cfg, st, {}, context(0, 2, 5, "a", orgs, None))
    with pytest.raises(ag.AggregationError, match="no partial"):
        ag.advance(
            cfg,
            st,
            {"b": {"agg": "partial", "session": 4, "value": np.ones(2)}},
            context(0, 3, 5, "a", orgs, None),
        )
    with pytest.raises(ag.AggregationError, match="session 4"):
        ag.advance(
            cfg,
            st,
            {
                "b": {"agg": "partial", "session": 3, "value": np.ones(2)},
                "c": {"agg": "partial", "session": 4, "value": np.ones(2)},
            },
            context(0, 3, 5, "a", orgs, None),
        )


def test_chunked_consensus_is_exact_per_statistic_at_the_default_kmax():
    """Statistics of very different size packed in one vector (like N_k, m_k, C_k and the log-likelihood):
    with per-segment chunk scales every one comes back to 1e-9 relative at the default k_max; one scale
    for the whole vector (κ = 10·max|ξ|) loses the small ones."""
    S = 5
    rng = np.random.default_rng(4)
    sizes = np.array([3e-2, 1.0, 5e2, 4e5, -2e6])
    values = sizes[None, :] * (1 + 0.3 * rng.random((S, sizes.size)))
    values[:, 0] *= np.array([1, 0.01, 0.5, 2, 0.1])  # one participant dominates a statistic
    ref = values.sum(axis=0)
    segments = [1] * sizes.size
    cfg = AggregationConfig()  # CIC(5), C = 3, default k_max
    for seed in range(3):
        totals, _, _ = run_session(cfg, values, seed=seed, segments=segments)
        for t in totals.values():
            assert np.all(np.abs(t - ref) <= 1e-9 * np.abs(ref))
    totals, _, _ = run_session(AggregationConfig(kappa=10 * 2.6e6), values, seed=0)
    worst = max(np.abs(t[0] - ref[0]) / abs(ref[0]) for t in totals.values())
    assert worst > 1e-6
