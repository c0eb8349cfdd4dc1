"""`pockengine search`: budget logic (estimate, exact check, repair, impossible budgets),
determinism, the cache, the spec it writes and the --json contract; `fit --train auto`."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import numpy as np
import pytest

import codegen.models as bundled
from codegen.errors import PockError
from codegen.search import (
    Budget,
    Candidate,
    Contributions,
    UnitCosts,
    evolve,
    fits,
    holdout_split,
    parse_size,
    repair,
    spec_yaml,
)


def run_cli(*args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codegen", *args], check=False,
                          capture_output=True,
                          text=True, env=env)


# -- pieces -----------------------------------------------------------------------------------

@pytest.mark.parametrize("text,value", [("131072", 131072), ("128KiB", 131072),
                                        ("128 KiB", 131072), ("96kB", 96000),
                                        ("1MiB", 1 << 20), ("0.5MiB", 1 << 19)])
def test_sizes(text, value):
    assert parse_size(text, "--sram") == value


@pytest.mark.parametrize("text", ["", "12XB", "-4KiB", "0", "nan"])
def test_bad_sizes(text):
    with pytest.raises(PockError, match="--sram"):
        parse_size(text, "--sram")


def test_candidate_short_form_round_trip():
    c = Candidate(3, ((2, 0.25), (4, 1.0)))
    assert c.short() == "bias:last3+weight:2@0.25+weight:4"
    assert Candidate.parse(c.short()) == c
    assert Candidate().short() == "none" and Candidate.parse("none") == Candidate()


def test_holdout_is_stratified_and_seeded():
    y = np.repeat(np.arange(4), 10)
    fit, val = holdout_split(y, len(y), 0.25, seed=3)
    assert sorted(np.concatenate([fit, val]).tolist()) == list(range(40))
    assert [int((y[val] == c).sum()) for c in range(4)] == [2, 2, 2, 2]  # round(2.5) -> 2
    again = holdout_split(y, len(y), 0.25, seed=3)
    assert np.array_equal(val, again[1])
    assert not np.array_equal(val, holdout_split(y, len(y), 0.25, seed=4)[1])
    with pytest.raises(PockError, match="too few"):
        holdout_split(np.arange(3), 3, 0.25, seed=0)     # one sample per class


def toy_costs() -> tuple[UnitCosts, Contributions, list[tuple[int, float]]]:
    """Three layers; weight units at ratios 0.5 and 1 per layer; made-up bytes and gains."""
    L = 3
    costs = UnitCosts(layers=L, fixed_sram=100)
    units = [(i, r) for i in range(L) for r in (0.5, 1.0)]
    for i in range(L):
        costs.units[("bias", i, 1.0)] = {"arena": 1000 * (L - i), "params": 10,
                                          "flash": 0, "instructions": 100 * (L - i)}
    for i, r in units:
        costs.units[("weight", i, r)] = {"arena": 1000 * (L - i) + 200, "kept": 300,
                                         "params": int(800 * r), "flash": 0,
                                         "instructions": 100 * (L - i) + 50}
    contrib = Contributions(bias=[0.1, 0.3, 0.35, 0.4],
                            weight={(0, 0.5): 0.05, (0, 1.0): 0.06, (1, 0.5): 0.2,
                                    (1, 1.0): 0.3, (2, 0.5): 0.1, (2, 1.0): 0.25})
    return costs, contrib, units


def brute_force(costs, contrib, units, budget):
    """Every candidate of the toy space, the best predicted one that fits the estimate."""
    per_layer = {i: [0.0] + [r for j, r in units if j == i] for i in range(costs.layers)}
    best = None
    for k in range(costs.layers + 1):
        for rs in itertools.product(*per_layer.values()):
            c = Candidate(k, tuple((i, r) for i, r in enumerate(rs) if r))
            if c.empty or not fits(costs.estimate(c), budget):
                continue
            key = (contrib.predict(c), c)
            best = key if best is None or key[0] > best[0] else best
    return best


@pytest.mark.parametrize("sram", [2500, 3200, 4200, 6000])
def test_evolution_finds_the_optimum_of_a_small_space_deterministically(sram):
    costs, contrib, units = toy_costs()
    budget = Budget(sram=sram)
    found = evolve(contrib, costs, budget, units, [], seed=7)
    assert found == evolve(contrib, costs, budget, units, [], seed=7)
    assert all(fits(costs.estimate(c), budget) for _, c in found)
    best = brute_force(costs, contrib, units, budget)
    assert found[0][0] == pytest.approx(best[0])


def test_the_estimate_adds_the_kept_inputs_of_further_weight_updates():
    costs, _, _ = toy_costs()
    one = costs.estimate(Candidate(1, ((2, 1.0),)))
    two = costs.estimate(Candidate(1, ((1, 1.0), (2, 1.0))))
    # arena: the deepest unit's (layer 1: 2200) + one more kept input (300); params add up
    assert two["sram"] == 2200 + 300 + 10 + 800 + 800 + 100
    assert one["sram"] == 1200 + 10 + 800 + 100


def test_a_winner_that_does_not_fit_exactly_is_repaired():
    costs, contrib, _ = toy_costs()
    big = Candidate(2, ((1, 1.0), (2, 1.0)))
    budget = Budget(sram=4300)
    assert costs.estimate(big)["sram"] == 4220 and fits(costs.estimate(big), budget)
    # the exact planner says 700 B more than the estimate: repair shrinks until it fits
    exact = lambda c: {**costs.estimate(c), "sram": costs.estimate(c)["sram"] + 700}
    fixed = repair(big, exact, budget, contrib, costs)
    assert fixed is not None and fixed != big
    assert fits(exact(fixed), budget)
    assert set(fixed.units(3)) <= set(big.units(3)) | {("weight", i, 0.5) for i in range(3)}
    # each step gives up the least predicted gain per byte: layer 1's weights shrink to half
    # (0.10 for 400 B; layer 2's half would lose 0.15, a bias 0.05 for 10 B), then go (0.20 for
    # 900 B: their bytes and the input they kept alive), and the set fits
    assert fixed == Candidate(2, ((2, 1.0),))
    # a set that fits exactly stays as it is; nothing that fits: None
    assert repair(big, costs.estimate, budget, contrib, costs) == big
    assert repair(big, exact, Budget(sram=100), contrib, costs) is None


def test_spec_yaml_reads_back(tmp_path):
    from codegen.search import candidate_spec, default_base
    from codegen.train.spec import load_spec

    spec = candidate_spec(default_base("fp32", 300), Candidate(2, ((1, 0.25),)))
    p = tmp_path / "s.yaml"
    p.write_text(spec_yaml(spec, ["a header", "with numbers 1,234 B"]))
    back = load_spec(p)
    assert p.read_text().startswith("# a header\n# with numbers 1,234 B\n")
    assert back.trainable == spec.trainable
    assert back.optimizer == spec.optimizer and back.schedule == spec.schedule
    assert back.schedule.name == "cosine" and back.schedule.total_steps == 300
    assert (back.backward, back.master_weights) == ("fp32", "fp32")


# -- the verb on the bundled digits model -----------------------------------------------------

@pytest.fixture(scope="module")
def digits_data(tmp_path_factory):
    d = tmp_path_factory.mktemp("search")
    x, y = bundled.digits("train")
    xe, ye = bundled.digits("test")
    np.savez(d / "train.npz", x=bundled.shift_digits(x[:160]), y=y[:160])
    np.savez(d / "eval.npz", x=bundled.shift_digits(xe[:100]), y=ye[:100])
    np.savez(d / "calib.npz", x=x[:50])
    return d


def test_an_impossible_budget_is_one_line_with_the_smallest_footprint(digits_data, tmp_path):
    model = str(bundled.path("digits_cnn.onnx"))
    r = run_cli("search", model, "--data", str(digits_data / "train.npz"), "--calib",
                str(digits_data / "calib.npz"), "--board", "mps2-an386", "--sram", "4KiB",
                "-o", str(tmp_path / "s.yaml"))
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert "nothing trainable fits SRAM 4 KiB, flash 1 MiB on mps2-an386" in lines[0]
    # (streamed: the chain of dw, pw and the add in row bands, docs/memory.md)
    assert "the smallest set (bias:last1) needs 10.9 KiB SRAM (arena 2.2 KiB " in lines[0]
    assert "+ stack 8.0 KiB" in lines[0] and "instructions per step" in lines[0]
    assert not (tmp_path / "s.yaml").exists()
    r = run_cli("search", model, "--data", str(digits_data / "train.npz"), "--calib",
                str(digits_data / "calib.npz"), "-o", str(tmp_path / "s.yaml"))
    assert r.returncode == 2 and "--board BOARD" in r.stderr and "--sram" in r.stderr


def test_search_writes_a_spec_that_fits_and_is_deterministic(digits_data, tmp_path):
    env = {**__import__("os").environ, "POCKENGINE_CACHE_DIR": str(tmp_path / "cache")}
    model = str(bundled.path("digits_cnn.onnx"))
    args = ["search", model, "--data", str(digits_data / "train.npz"), "--eval",
            str(digits_data / "eval.npz"), "--calib", str(digits_data / "calib.npz"),
            "--board", "mps2-an386", "--sram", "40KiB", "--epochs", "1", "--engine", "golden",
            "--base", "bias:last1,opt=sgd,lr=0.002,momentum=0.9", "--json"]
    r = run_cli(*args, "-o", str(tmp_path / "a.yaml"), env=env)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    for key in ("spec", "sram_bytes", "flash_bytes", "instructions_per_step", "accuracy",
                "baselines", "candidates"):
        assert key in j
    assert j["sram_bytes"] <= 40 * 1024
    assert all(b["sram_bytes"] <= 40 * 1024 and 0 <= b["accuracy"] <= 1
               for b in j["baselines"])
    assert {b["name"] for b in j["baselines"]} == {"bias-only", "last-k layers"}
    # the winner is the best of the finalists on the held-back part of TRAIN
    assert j["validation_score"] == max(c["validation_score"] for c in j["candidates"])
    assert j["fine_tunes"]["analysis_cached"] == 0
    # the spec file: a header, then a spec the planner puts at the reported SRAM
    text = (tmp_path / "a.yaml").read_text()
    assert text.startswith("# pockengine search: digits_cnn.onnx, budget 40 KiB SRAM, 1 MiB flash (mps2-an386)\n")
    p = run_cli("plan", model, "--calib", str(digits_data / "calib.npz"), "--train",
                str(tmp_path / "a.yaml"), "--board", "mps2-an386", "--json", env=env)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["project_memory"]["sram"] == j["sram_bytes"]
    # the winner's firmware was built and linked (arm-none-eabi-gcc) within the budget
    import shutil

    assert (j["linked"] is not None) == (shutil.which("arm-none-eabi-gcc") is not None)
    if j["linked"] is not None:
        assert j["linked"]["sram_bytes"] <= 40 * 1024 and j["linked"]["over_budget"] == []
        assert abs(j["linked"]["sram_bytes"] - j["sram_bytes"]) < 256
    # again, other budget file name: the same result, every analysis fine-tune from the cache
    r2 = run_cli(*args, "-o", str(tmp_path / "b.yaml"), env=env)
    assert r2.returncode == 0, r2.stderr
    j2 = json.loads(r2.stdout)
    assert j2["fine_tunes"]["analysis_cached"] == j2["fine_tunes"]["analysis"]
    assert j2["spec"] == j["spec"] and j2["accuracy"] == j["accuracy"]
    assert (tmp_path / "b.yaml").read_text() == text
    # an existing output is not overwritten without --force
    r3 = run_cli(*args, "-o", str(tmp_path / "a.yaml"), env=env)
    assert r3.returncode == 2 and "a.yaml" in r3.stderr


def test_fit_train_auto_uses_the_search(digits_data, tmp_path):
    env = {**__import__("os").environ, "POCKENGINE_CACHE_DIR": str(tmp_path / "cache")}
    model = str(bundled.path("digits_cnn.onnx"))
    base = ["fit", model, "--train", "auto", "--data", str(digits_data / "train.npz"),
            "--eval", str(digits_data / "eval.npz"), "--calib",
            str(digits_data / "calib.npz"), "--engine", "golden", "--json"]
    r = run_cli(*base, env=env)
    assert r.returncode == 2 and "--train auto" in r.stderr and "--board" in r.stderr
    r = run_cli(*base, "--board", "mps2-an385", env=env)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["train_auto"] and j["steps"] == 160 and j["backward"] == "int8"
