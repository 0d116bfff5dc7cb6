"""`akg ui`: the page's API (runs, diffs, decisions, the token and Host checks), decisions through files
(agents.human.FileHuman), and the whole loop in a real headless browser: start a translate, approve its
plan on the page, watch the run finish, save a screenshot."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from akg_agent.agents.human import FileHuman
from akg_agent.agents.plan import GroupPlan, Plan
from akg_agent.ui.server import serve

from .conftest import problem_path


@pytest.fixture()
def ui(tmp_path):
    got: dict = {}
    ready = threading.Event()

    def on_ready(url, token, httpd):
        got.update(url=url, token=token, httpd=httpd)
        ready.set()

    th = threading.Thread(target=serve, args=(tmp_path / "runs", "127.0.0.1", 0), kwargs={"ready": on_ready},
                          daemon=True)
    th.start()
    assert ready.wait(10)
    got["base"] = got["url"].split("/?")[0]
    got["root"] = tmp_path / "runs"
    yield got
    got["httpd"].shutdown()


def _call(ui, path, body=None, token=None, host=None):
    req = urllib.request.Request(ui["base"] + path, data=None if body is None else json.dumps(body).encode(),
                                 method="GET" if body is None else "POST")
    if token:
        req.add_header("X-Akg-Token", token)
    if host:
        req.add_header("Host", host)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _fake_run(root: Path) -> str:
    d = root / "relu-cpp-cpu-1"
    d.mkdir(parents=True)
    (d / "attempt_1.py").write_text("def f(x):\n    return x\n")
    (d / "attempt_2.py").write_text("def f(x):\n    return max(x, 0)\n")
    att = {"action": "write", "by": "rules", "accepted": True, "code": "ok", "reason": "matches", "baselines_ms": {},
           "sol_frac": 0.5, "notes": []}
    (d / "run.json").write_text(json.dumps({
        "config": {"problem": "/x/relu.py", "dsl": "cpp", "target": "cpu"}, "plan": None, "events": [],
        "attempts": [{**att, "n": 1, "source_file": "attempt_1.py", "time_ms": 2.0},
                     {**att, "n": 2, "source_file": "attempt_2.py", "time_ms": 1.5}],
        "result": {"verified": True, "attempt": 2}}))
    return d.name


def test_the_api_lists_runs_with_diffs_and_guards_every_write(ui):
    rid = _fake_run(ui["root"])
    code, runs = _call(ui, "/api/runs")
    assert code == 200 and runs[0]["id"] == rid and runs[0]["status"] == "verified" and runs[0]["best_ms"] == 1.5
    code, d = _call(ui, f"/api/runs/{rid}")
    assert code == 200 and "+    return max(x, 0)" in d["attempts"][1]["diff"] and d["attempts"][0]["source"]
    assert _call(ui, "/api/runs/../etc")[0] == 404
    # writes: the token, a pending decision, a known action; a foreign Host is refused outright
    assert _call(ui, f"/api/runs/{rid}/plan", {"action": "approve"})[0] == 403
    assert _call(ui, f"/api/runs/{rid}/plan", {"action": "approve"}, token="wrong")[0] == 403
    code, err = _call(ui, f"/api/runs/{rid}/plan", {"action": "approve"}, token=ui["token"])
    assert code == 400 and "not waiting" in err["error"]
    (ui["root"] / rid / "pending_plan.json").write_text("{}")
    assert _call(ui, f"/api/runs/{rid}/plan", {"action": "launch"}, token=ui["token"])[0] == 400
    assert _call(ui, f"/api/runs/{rid}/plan", {"action": "approve"}, token=ui["token"])[0] == 200
    assert json.loads((ui["root"] / rid / "plan_decision.json").read_text()) == {"action": "approve"}
    assert _call(ui, "/api/runs", host="evil.example:1430")[0] == 403
    code, err = _call(ui, "/api/start", {"problem": "/no/such.py", "dsl": "cpp", "target": "cpu"}, token=ui["token"])
    assert code == 400 and "no such problem file" in err["error"]


def _plan() -> Plan:
    return Plan("p.py", "cpp", "cpu", [GroupPlan(0, "pointwise", ["relu"], "generated", {}, None, "")], 0.1, None)


@pytest.mark.parametrize("answers,approved", [([{"action": "approve"}], True), ([{"action": "reject"}], False),
                                              (["{not json", {"action": "approve"}], True)])
def test_file_human_waits_for_the_pages_decision(tmp_path, answers, approved):
    h = FileHuman(poll_s=0.02, timeout_s=10)

    def answer():
        for a in answers:
            while not (tmp_path / "pending_plan.json").is_file():
                time.sleep(0.01)
            (tmp_path / "plan_decision.json").write_text(a if isinstance(a, str) else json.dumps(a))
            time.sleep(0.1)

    th = threading.Thread(target=answer)
    th.start()
    got = h.review_plan(_plan(), tmp_path)
    th.join()
    assert (got is not None) == approved and not (tmp_path / "pending_plan.json").exists()


def _browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return None
    chrome, driver = shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")
    if not (chrome and driver):
        return None
    opts = webdriver.ChromeOptions()
    opts.binary_location = chrome
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service(driver), options=opts)


def test_in_a_browser_a_plan_approved_on_the_page_runs_to_a_verified_module(ui, tmp_path):
    browser = _browser()
    if browser is None:
        if os.environ.get("AKG_REQUIRE_BROWSER"):
            pytest.fail("AKG_REQUIRE_BROWSER is set but chromium, chromedriver or selenium is missing")
        pytest.skip("no chromium + chromedriver + selenium here (apt-get install chromium chromium-driver)")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        browser.get(ui["url"])
        assert "writes enabled" in browser.find_element(By.ID, "token-state").text
        browser.find_element(By.ID, "problem").send_keys(str(problem_path("ew_activations_a")))
        browser.find_element(By.ID, "start").click()
        WebDriverWait(browser, 180).until(ec.element_to_be_clickable((By.ID, "approve")))
        assert "group" in browser.find_element(By.ID, "plan-review").text
        browser.find_element(By.ID, "approve").click()
        WebDriverWait(browser, 300).until(ec.text_to_be_present_in_element((By.ID, "run-status"), "verified"))
        assert "accepted" in browser.find_element(By.CLASS_NAME, "verdict").text
        shot = tmp_path / "akg-ui.png"
        browser.save_screenshot(str(shot))
        if os.environ.get("AKG_UI_SCREENSHOT"):
            browser.save_screenshot(os.environ["AKG_UI_SCREENSHOT"])
        assert shot.stat().st_size > 10_000
    finally:
        browser.quit()
    (run,) = [d for d in ui["root"].iterdir() if d.is_dir()]
    doc = json.loads((run / "run.json").read_text())
    assert doc["result"]["verified"] and (run / "module.py").is_file()
    assert "class ModelNew" in (run / "module.py").read_text()


def test_maxkernel_loop_jax_in_plan_approved_pallas_tpu_module_and_its_tests_out(ui, tmp_path):
    """The README's walk-through: a JAX function in, the plan approved through the page's API, a Pallas
    TPU module (lowered for TPU, run in TPU interpret mode) and a test file out that passes on it and
    fails on a copy whose answer is nudged."""
    pytest.importorskip("jax")
    import subprocess
    import sys

    from akg_agent.cli import main

    jax_problem = Path(__file__).parent / "jax_problems" / "softmax.py"
    code, doc = _call(ui, "/api/start", {"problem": str(jax_problem), "dsl": "pallas", "target": "tpu-v5p"},
                      token=ui["token"])
    assert code == 200
    rid, end = doc["id"], time.monotonic() + 300
    while _call(ui, f"/api/runs/{rid}")[1]["status"] != "waiting for plan approval":
        assert time.monotonic() < end, _call(ui, f"/api/runs/{rid}")[1]["console"][-2000:]
        time.sleep(0.2)
    assert _call(ui, f"/api/runs/{rid}/plan", {"action": "approve"}, token=ui["token"])[0] == 200
    while (d := _call(ui, f"/api/runs/{rid}")[1])["status"] not in ("verified", "failed"):
        assert time.monotonic() < end, d["console"][-2000:]
        time.sleep(0.2)
    assert d["status"] == "verified", d["console"][-2000:]
    module = ui["root"] / rid / "module.py"
    assert "lowered for TPU, run in TPU interpret mode" in module.read_text()
    nudge = "\n_m = model\nmodel = lambda params, x: _m(params, x) * 1.001\n"
    (tmp_path / "off.py").write_text(module.read_text() + nudge)
    for mod, sub in ((module, "good"), (tmp_path / "off.py", "bad")):
        assert main(["testgen", str(jax_problem), str(mod), "-o", str(tmp_path / sub / "test_softmax.py")]) == 0
    run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    ok = subprocess.run([*run, str(tmp_path / "good")], capture_output=True, text=True, cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout[-2000:]
    bad = subprocess.run([*run, str(tmp_path / "bad")], capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 1 and "test_matches_the_reference[" in bad.stdout, bad.stdout[-2000:]
