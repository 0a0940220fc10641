"""benchmarks.collab_rf_seeds: the report over tree seeds, rebuilt from printed per-run lines."""

import json

import benchmarks.collab_rf_seeds as seeds


def test_report_from_printed_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(seeds, "RESULTS", tmp_path)
    means = {
        t: {"bacc": 0.88, "prec": 0.92, "rec": 0.77} for t in ("full", "pairwise", "random", "disconnected")
    }
    runs = [
        {
            "tree_seed": s,
            "test_means": means,
            "max_abs_gap": {"bacc": g, "prec": 0.03, "rec": 0.04},
            "seconds": 1,
        }
        for s, g in ((42, 0.01), (None, 0.03))
    ]
    log = tmp_path / "sweep.log"
    log.write_text("noise\n" + "\n".join(json.dumps(r, sort_keys=True) for r in runs) + "\n")
    out = seeds.main(["--from-runs", str(log)])
    assert out["tree_seeds"] == [42, None]
    assert out["max_abs_gap"]["bacc"] == {"mean": 0.02, "std": 0.0141, "min": 0.01, "max": 0.03}
    assert list(out["test_means"]) == ["full", "pairwise", "random", "disconnected"]  # no centralised run
    md = (tmp_path / "collab_rf_seeds.md").read_text()
    assert "| process |" in md and "| 42 |" in md and "(0.89)" in md


def test_centralised_only_runs_merge_into_the_report_runs():
    base = [
        {
            "tree_seed": 42,
            "test_means": {"full": {}},
            "max_abs_gap": {"bacc": 0.01, "prec": 0.04, "rec": 0.02},
        },
        {
            "tree_seed": None,
            "test_means": {"full": {}},
            "max_abs_gap": {"bacc": 0.02, "prec": 0.02, "rec": 0.05},
        },
    ]
    extra = [
        {
            "tree_seed": 42,
            "test_means": {"centralised": {}},
            "max_abs_gap": {"bacc": 0.02, "prec": 0.01, "rec": 0.0},
        }
    ]
    out = seeds.merge_runs(base, extra)
    assert list(out[0]["test_means"]) == ["full", "centralised"]
    assert out[0]["max_abs_gap"] == {"bacc": 0.02, "prec": 0.04, "rec": 0.02}
    assert out[1] == base[1] and list(base[0]["test_means"]) == ["full"]  # inputs unchanged
