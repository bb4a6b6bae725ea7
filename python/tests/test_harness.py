"""info(), check(), bench() and the registry helpers over the C harness."""

import json
import os
import subprocess

import numpy as np
import pytest

import kernelkit
from kernelkit import harness


def test_info():
    i = kernelkit.info()
    assert i["build"]["version"] == kernelkit.version() == kernelkit.__version__
    assert i["devices"][0]["device"] == "cpu"
    assert i["devices"][0]["threads"] >= 1
    assert [b["name"] for b in i["backends"]] == ["cpu", "cuda"]
    assert i["best_device"] in ("cpu", "cuda:0")
    json.dumps(i)  # plain data


def test_info_matches_the_cli():
    cli = kernelkit.cli_path()
    if cli is None:
        pytest.skip("no kernelkit executable next to the library")
    env = dict(os.environ)
    out = subprocess.run([cli, "info", "--json"], capture_output=True, text=True, env=env,
                         check=True)
    c = json.loads(out.stdout)
    i = kernelkit.info()
    assert c["build"]["version"] == i["build"]["version"]
    assert c["build"]["commit"] == i["build"]["commit"]
    assert c["devices"][0]["name"] == i["devices"][0]["name"]
    assert c["best_device"] == i["best_device"]


def test_check_pass_and_json():
    r = kernelkit.check("gemm", "M=5 N=7 K=33 dtype=f32", device="cpu")
    assert r["status"] == "PASS", r
    assert r["op"] == "gemm"
    r2 = kernelkit.check("attention", "B=1 Hq=2 Hkv=1 Sq=5 Sk=9 D=32 causal=1", seed=3)
    assert r2["status"] == "PASS"


def test_check_fuzz():
    rs = kernelkit.check("rmsnorm", fuzz=3, seed=2)
    assert len(rs) == 3
    assert all(r["status"] == "PASS" for r in rs), rs
    assert rs[0]["name"] == "fuzz/rmsnorm/0"


def test_check_same_as_cli(tmp_path):
    """check() and `kernelkit check --params` give the same case: the same seed,
    verdict and errors."""
    cli = kernelkit.cli_path()
    if cli is None:
        pytest.skip("no kernelkit executable next to the library")
    r = kernelkit.check("softmax", "rows=3 n=17 dtype=f32", seed=5, device="cpu")
    js = tmp_path / "check.json"
    out = subprocess.run([cli, "check", "--device", "cpu", "--op", "softmax", "--params",
                          "rows=3 n=17 dtype=f32", "--seed", "5", "--json", str(js)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    c = json.loads(js.read_text())["cases"][0]
    assert c["seed"] == r["seed"] and c["status"] == r["status"]
    assert c["max_abs_err"] == r["max_abs_err"]


def test_bench_quick():
    d = kernelkit.bench("rmsnorm", "rows=8 n=256 dtype=f32", device="cpu", quick=True,
                        time_budget=0.2)
    assert d["schema"] == "kernelkit.bench/1"
    (b,) = d["benchmarks"]
    assert b["op"] == "rmsnorm" and b["device"] == "cpu"
    assert b["summary"]["median"] > 0
    assert b["params"]["rows"] == 8


def test_registry_helpers():
    assert "attention" in harness.ops()
    ts = harness.op_tensors("gemm", "M=2 N=3 K=4 dtype=f32")
    assert [(t["name"], t["shape"], t["is_output"]) for t in ts] == [
        ("a", (2, 4), False), ("b", (3, 4), False), ("c", (2, 3), True)]
    p = harness.op_params("attention", "causal=1")
    assert p["causal"] is True and p["dtype"] == "bf16"
    tol = harness.tolerance("gemm", "f32")
    assert tol["atol"] >= 0
    x = harness.fill_inputs("gemm", "M=2 N=3 K=4 dtype=f32", seed=9)
    y = harness.fill_inputs("gemm", "M=2 N=3 K=4 dtype=f32", seed=9)
    assert np.array_equal(x["a"], y["a"])
