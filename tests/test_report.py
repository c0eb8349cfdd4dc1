"""Reports people look at: ``pockengine report`` (one self-contained HTML page, checked in
headless Chromium too), the run record ``sim`` leaves in the project, ``plan --csv``, and the
progress bars of ``fit`` and ``sim`` on a terminal."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from codegen.cli import format_kernel_rows, main
from tests.firmware.helpers import SPEC, digits_graph, write_npz

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)


def run(*argv: object) -> tuple[int, str, str]:
    """``pockengine ARGV`` in this process: (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([str(a) for a in argv])
    return status, out.getvalue(), err.getvalue()


class Terminal(io.StringIO):
    """A stderr that says it is a terminal (of unknown size, as some pseudo-terminals)."""

    def isatty(self) -> bool:
        return True


def run_on_terminal(monkeypatch, *argv: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), Terminal()
    with monkeypatch.context() as m:
        m.setattr("sys.stderr", err)
        with contextlib.redirect_stdout(out):
            status = main([str(a) for a in argv])
    return status, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def digits(tmp_path_factory) -> dict[str, Path]:
    """The quantized digits CNN as .tflite, with train/eval/calib .npz files."""
    from codegen.frontend import save_model

    d = tmp_path_factory.mktemp("digits")
    save_model(digits_graph(), d / "digits_int8.tflite")
    train, evals, calib = write_npz(d)
    return {"model": d / "digits_int8.tflite", "train": train, "eval": evals, "calib": calib}


@pytest.fixture(scope="module")
def simulated(digits, tmp_path_factory) -> tuple[Path, dict]:
    """A training project for mps2-an386, compiled, built and run with per-op counts."""
    from tests.targets.helpers import runnable

    runnable("mps2-an386")
    fw = tmp_path_factory.mktemp("sim") / "fw"
    status, _, err = run("compile", digits["model"], "--board", "mps2-an386", "--train", SPEC,
                         "--data", digits["train"], "--eval", digits["eval"], "--epochs", 2,
                         "--no-measure", "-o", fw)
    assert status == 0, err
    status, out, err = run("sim", fw, "--profile-ops", "--json")
    assert status == 0, err
    return fw, json.loads(out)


# -- the run record -------------------------------------------------------------------------------
def test_sim_saves_its_result_in_the_project(simulated):
    fw, printed = simulated
    record = json.loads((fw / "pe_run.json").read_text())
    digest = hashlib.sha256((fw / "pockengine.json").read_bytes()).hexdigest()
    assert record == printed | {"manifest_sha256": digest}
    assert "manifest_sha256" not in printed             # sim --json itself is unchanged
    assert printed["steps"] == len(printed["loss"]) == 2 * 24
    plan = json.loads((fw / "pe_plan.json").read_text())   # written by compile
    m = json.loads((fw / "pockengine.json").read_text())
    assert plan["graphs"]["train"]["arena_bytes"] == m["training"]["arena_bytes"]
    assert [c["op"] for c in plan["graphs"]["train"]["calls"]] == \
        [op["op"] for op in m["training"]["ops"]]


# -- the page -------------------------------------------------------------------------------------
def _rows(html: str, table_id: str) -> list[str]:
    body = html.split(f'id="{table_id}"', 1)[1].split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return re.findall(r"<tr>.*?</tr>", body, re.DOTALL)


def test_report_of_a_simulated_project(simulated, tmp_path):
    fw, sim = simulated
    out = tmp_path / "report.html"
    status, stdout, err = run("report", fw, "-o", out, "--json")
    assert status == 0, err
    summary = json.loads(stdout)
    assert summary["plan"] and summary["run"] and summary["notes"] == []
    html = out.read_text()
    m = json.loads((fw / "pockengine.json").read_text())
    plan = json.loads((fw / "pe_plan.json").read_text())["graphs"]
    # nothing loaded from elsewhere (and the page's policy forbids it)
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    assert not re.search(r"\b(?:src|href)\s*=", html)
    assert "url(" not in html and "@import" not in html and "http" not in html.split(
        "<body>", 1)[1]
    # the memory plans: one rectangle per arena buffer
    for key in ("train", "infer"):
        svg = html.split(f'id="plan-{key}"', 1)[1].split("</svg>", 1)[0]
        assert svg.count('class="buf"') == len(plan[key]["pools"]["arena"]["buffers"]) > 5
    # the kernel tables: a row per call, MACs, and the instructions measured per op
    train_rows, infer_rows = _rows(html, "ops-train"), _rows(html, "ops-infer")
    assert len(train_rows) == len(m["training"]["ops"]) and len(infer_rows) == len(m["ops"])
    conv = next(r for r in infer_rows if ">conv2d<" in r)
    assert re.search(r'data-v="[1-9]\d*">[\d,]+</td>', conv)                    # MACs
    per_op = sim["instructions"]["per_op"]
    assert f"{per_op[0]['per_step']:,}</td>" in train_rows[0] and "run, per step" in train_rows[0]
    first = sim["instructions"]["per_op_infer"][0]
    assert f"{first['per_call']:,}</td>" in infer_rows[0]
    # SRAM and flash against the board's budget, measured
    assert "256.0 KiB" in html and "1.00 MiB" in html and "fits" in html
    assert "the firmware image that sim ran (measured)" in html
    # the loss curve and accuracy before/after
    loss = html.split('id="loss-curve"', 1)[1].split("</svg>", 1)[0]
    points = sum(len(p.split()) for p in re.findall(r'class="loss" points="([^"]+)"', loss))
    assert points == sim["steps"]
    acc = f"{sim['accuracy_before']:.1%} &rarr; {sim['accuracy_after']:.1%}"
    assert acc in html
    # an existing report is not overwritten without --force
    status, _, err = run("report", fw, "-o", out)
    assert status == 2 and err.count("\n") == 1 and "already exists" in err
    assert run("report", fw, "-o", out, "--force")[0] == 0


def test_report_without_a_run_and_with_a_stale_one(digits, tmp_path):
    fw = tmp_path / "fw"
    assert run("compile", digits["model"], "--board", "mps2-an386", "--train", "bias:all",
               "--no-measure", "-o", fw)[0] == 0
    status, _, err = run("report", fw, "-o", tmp_path / "a.html")
    assert status == 0 and "not run yet" in err
    html = (tmp_path / "a.html").read_text()
    assert 'id="plan-train"' in html and 'id="loss-curve"' not in html
    assert "compile-time estimate" in html
    # a run of an earlier compile of the directory is not shown as this one's
    (fw / "pe_run.json").write_text(json.dumps({"loss": [1.0, 0.5], "steps": 2,
                                                "manifest_sha256": "0" * 64}))
    status, _, err = run("report", fw, "-o", tmp_path / "b.html")
    assert status == 0 and "earlier compile" in err
    assert 'id="loss-curve"' not in (tmp_path / "b.html").read_text()


def test_report_escapes_model_names(tmp_path):
    """Names come from the model: text in the page, never markup."""
    from codegen.pipeline import compile_model
    from tests.render.helpers import rename_graph

    evil = '</script><img src=x onerror="alert(1)">'
    g = rename_graph(digits_graph(), lambda n: f"{n}{evil}" if n else n)
    compile_model(g, out_dir=tmp_path / "p")
    status, _, err = run("report", tmp_path / "p", "-o", tmp_path / "r.html")
    assert status == 0, err
    html = (tmp_path / "r.html").read_text()
    assert "<img" not in html and html.count("<script") == 1
    assert "&lt;/script&gt;&lt;img src=x" in html


def test_report_bad_input(tmp_path):
    status, _, err = run("report", tmp_path, "-o", tmp_path / "r.html")
    assert status == 2 and err.count("\n") == 1 and "not a pockengine project" in err
    assert not (tmp_path / "r.html").exists()


# -- the page in a browser ------------------------------------------------------------------------
def _chromium(page: Path, profile: Path) -> tuple[str, list[str]]:
    """The DOM after scripts ran, and every console line (errors, CSP violations, logs)."""
    r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                        "--no-first-run", f"--user-data-dir={profile}",
                        "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri()],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout, [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install "
                    "chromium; .ci/setup installs it)")
def test_report_in_headless_chromium(simulated, tmp_path):
    fw, _ = simulated
    page = tmp_path / "report.html"
    assert run("report", fw, "-o", page)[0] == 0
    dom, console = _chromium(page, tmp_path / "profile")
    assert console == []                               # no errors, no blocked loads, no logs
    assert 'data-report-ready="2"' in dom              # the script ran to its end
    assert 'id="ops-train"' in dom and 'id="plan-train"' in dom and "<svg" in dom
    assert 'tabindex="0"' in dom                       # the sortable headers were set up
    # the check sees what it must: a script error and a resource from elsewhere
    broken = tmp_path / "broken.html"
    broken.write_text(page.read_text().replace(
        "</body>", '<img src="http://127.0.0.1:9/x.png"><script>notDefined();</script></body>'))
    _, console = _chromium(broken, tmp_path / "profile")
    assert any("Uncaught ReferenceError" in ln for ln in console), console
    assert any("Content Security Policy" in ln for ln in console), console


# -- plan --csv -----------------------------------------------------------------------------------
def test_plan_csv(digits, tmp_path):
    out = tmp_path / "ops.csv"
    status, stdout, err = run("plan", digits["model"], "--train", SPEC, "--no-measure",
                              "--csv", out, "--json")
    assert status == 0, err
    result = json.loads(stdout)
    assert result["csv"] == str(out)
    with open(out, newline="") as f:
        rows = list(csv.reader(f))
    shown = format_kernel_rows(result["kernels"])
    raw = ["backend", "kernel", "scratch_bytes", "macs", "instructions"]
    assert rows[0] == [*shown[0], *raw]
    assert len(rows) == len(result["kernels"]) + 1
    for row, text, k in zip(rows[1:], shown[1:], result["kernels"]):
        assert row[:len(text)] == list(text)
        assert row[len(text):len(text) + 3] == [k["backend"], k["kernel"],
                                                str(k["scratch_bytes"])]
    macs = {r[0]: int(r[len(shown[0]) + 3]) for r in rows[1:]}
    assert macs["/conv2/Conv"] == 8 * 8 // 4 * 24 * 3 * 3 * 16 > 0       # 4x4x24 outputs
    assert macs["/conv2/Conv:conv2d_grad_input"] == macs["/conv2/Conv"]
    status, _, err = run("plan", digits["model"], "--csv", out)
    assert status == 2 and "already exists" in err
    assert run("plan", digits["model"], "--csv", out, "--force")[0] == 0


# -- progress -------------------------------------------------------------------------------------
def test_fit_progress_bar_on_a_terminal_only(digits, monkeypatch):
    args = ["fit", digits["model"], "--train", "bias:all", "--data", digits["train"],
            "--epochs", 2, "--log-every", 10]
    status, _, err = run_on_terminal(monkeypatch, *args)
    assert status == 0
    assert "fit golden: 100%|" in err and "48/48" in err and "step/s" in err
    assert "epoch 2 step 40: loss" in err                 # the lines stay, above the bar
    status, _, err = run_on_terminal(monkeypatch, *args, "--quiet")
    assert status == 0 and err == ""
    status, out, err = run_on_terminal(monkeypatch, *args, "--json")
    assert status == 0 and err == "" and json.loads(out)["steps"] == 48
    status, _, err = run(*args)                          # not a terminal: lines as before
    assert status == 0 and "%|" not in err and "epoch 2 step 40: loss" in err


def test_sim_progress_bar_on_a_terminal(simulated, monkeypatch, tmp_path):
    fw = tmp_path / "fw"
    shutil.copytree(simulated[0], fw)
    status, out, err = run_on_terminal(monkeypatch, "sim", fw)
    assert status == 0, err
    assert "sim mps2-an386: 100%|" in err and "48/48" in err
    assert "board mps2-an386: 48 training steps" in out and "%|" not in out
    status, out, err = run_on_terminal(monkeypatch, "sim", fw, "--quiet")
    assert status == 0 and err == "" and "accuracy" in out


def test_compile_progress_bar_on_a_terminal(digits, monkeypatch, tmp_path):
    """compile draws a bar over its stages on a terminal only, and --quiet / --json keep stderr
    free of it."""
    args = ["compile", digits["model"], "--board", "host", "--train", "bias:all"]
    status, _, err = run_on_terminal(monkeypatch, *args, "-o", tmp_path / "a")
    assert status == 0, err
    assert "compile: 100%|" in err and "5/5" in err and "stage" in err
    status, _, err = run_on_terminal(monkeypatch, *args, "-o", tmp_path / "b", "--quiet")
    assert status == 0 and "%|" not in err
    status, out, err = run_on_terminal(monkeypatch, *args, "-o", tmp_path / "c", "--json")
    assert status == 0 and "%|" not in err and json.loads(out)["board"] == "host"
    status, _, err = run(*args, "-o", tmp_path / "d")     # not a terminal: no bar
    assert status == 0 and "%|" not in err
