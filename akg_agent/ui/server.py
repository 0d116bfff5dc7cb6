"""`akg ui`: a local web page over the run directories (the runs, each run's plan to approve, edit or
reject, attempts with their source diffs, verdicts and reasons, profile feedback, speed-of-light, plots
of time per attempt and of bench reports), from which a translate or tune starts in the background.

Loopback only unless the user says otherwise; reads are open to the page, every write needs the token
printed on the console (sent as the `X-Akg-Token` header); requests naming another host are refused
(a page elsewhere cannot reach it through DNS rebinding). Standard library only."""

from __future__ import annotations

import difflib
import json
import os
import re
import secrets
import subprocess
import sys
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PAGE = Path(__file__).with_name("page.html")
NAME = re.compile(r"^[A-Za-z0-9._-]{1,200}$")
MAX_BODY = 1 << 20
# what waits for which answer (agents.human.FileHuman reads the answers)
DECISIONS = {"plan": ("pending_plan.json", "plan_decision.json", ("approve", "edit", "reject")),
             "step": ("pending_step.json", "step_decision.json", ("continue", "stop", "redirect"))}


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _status(d: Path, run: dict | None, job: dict) -> str:
    if (d / "pending_plan.json").is_file():
        return "waiting for plan approval"
    if (d / "pending_step.json").is_file():
        return "waiting after an attempt"
    if run and run.get("result"):
        return "verified" if run["result"].get("verified") else "failed"
    if job.get("returncode") is not None:
        return "done" if job["returncode"] == 0 else "failed"
    if job and not _alive(job.get("pid")):
        return "stopped"
    return "running"


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


class Runs:
    """The run directories under `root`: what the page reads and the jobs it starts."""

    def __init__(self, root: Path, python: str = sys.executable) -> None:
        self.root = root
        self.python = python
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        root.mkdir(parents=True, exist_ok=True)

    def dir(self, rid: str) -> Path:
        if not NAME.match(rid) or not (self.root / rid).is_dir():
            raise KeyError(rid)
        return self.root / rid

    def list(self) -> list[dict[str, Any]]:
        out = []
        for d in sorted((p for p in self.root.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True):
            run, job = _json(d / "run.json") or {}, _json(d / "job.json") or {}
            if not run and not job:
                continue
            cfg = run.get("config") or job.get("config") or {}
            atts = run.get("attempts") or []
            times = [a["time_ms"] for a in atts if a.get("accepted") and a.get("time_ms")]
            out.append({"id": d.name, "kind": job.get("kind", "translate"),
                        "problem": Path(str(cfg.get("problem", "?"))).name, "dsl": cfg.get("dsl"),
                        "target": cfg.get("target"), "status": _status(d, run, job),
                        "attempts": len(atts), "best_ms": min(times) if times else None,
                        "modified": d.stat().st_mtime})
        return out

    def detail(self, rid: str) -> dict[str, Any]:
        d = self.dir(rid)
        run, job = _json(d / "run.json") or {}, _json(d / "job.json") or {}
        atts, prev = [], ""
        for a in run.get("attempts") or []:
            src = (d / a.get("source_file", "")).read_text() if (d / a.get("source_file", "_")).is_file() else ""
            diff = "".join(difflib.unified_diff(prev.splitlines(True), src.splitlines(True),
                                                f"attempt {a['n'] - 1}", f"attempt {a['n']}", n=2)) if prev else ""
            atts.append({**a, "diff": diff, "source": src if not prev else "", "lines": src.count("\n")})
            prev = src
        plan = run.get("plan")
        pending = _json(d / "pending_plan.json")
        console = (d / "console.log").read_text(errors="replace")[-20000:] if (d / "console.log").is_file() else ""
        return {"id": rid, "status": _status(d, run, job), "config": run.get("config") or job.get("config"), "job": job,
                "plan": plan, "pending_plan": pending, "pending_step": _json(d / "pending_step.json"),
                "plan_error": (d / "plan_error.txt").read_text() if (d / "plan_error.txt").is_file() else "",
                "attempts": atts, "result": run.get("result"), "guidance": run.get("guidance") or [],
                "events": (run.get("events") or [])[-40:], "usage": run.get("usage"), "console": console,
                "feedback": [e for e in run.get("events") or [] if e.get("event") in ("profile", "feedback")][-5:],
                "report": _json(d / "tune.json") or _json(d / "results.json")}

    def benches(self) -> list[dict[str, Any]]:
        """Every bench report under the root (results.json with records): per problem, its speedups."""
        out = []
        for f in sorted(self.root.rglob("results.json"))[:50]:
            doc = _json(f)
            if isinstance(doc, dict) and isinstance(doc.get("records"), list):
                out.append({"path": str(f.relative_to(self.root)), "summary": doc.get("summary"),
                            "rows": [{"problem": r.get("problem"), "correct": r.get("correct"),
                                      "speedup": r.get("speedup"), "sol_fraction": r.get("sol_fraction")}
                                     for r in doc["records"]]})
        return out

    def decide(self, rid: str, what: str, body: dict[str, Any]) -> None:
        d = self.dir(rid)
        pending, decision, actions = DECISIONS[what]
        if not (d / pending).is_file():
            raise ValueError(f"run {rid} is not waiting for a {what} decision")
        if body.get("action") not in actions:
            raise ValueError(f"action must be one of {', '.join(actions)}")
        tmp = d / (decision + ".tmp")
        tmp.write_text(json.dumps(body))
        tmp.replace(d / decision)

    def start(self, body: dict[str, Any]) -> str:
        """A translate (waiting for the page's plan decision) or a tune, in the background."""
        kind = body.get("kind", "translate")
        problem, dsl, target = str(body.get("problem", "")), str(body.get("dsl", "")), str(body.get("target", ""))
        if kind not in ("translate", "tune"):
            raise ValueError("kind must be translate or tune")
        if not Path(problem).is_file():
            raise ValueError(f"no such problem file: {problem}")
        if not (NAME.match(dsl) and NAME.match(target)):
            raise ValueError("dsl and target are names: letters, digits, '.', '_' or '-'")
        rid = f"{Path(problem).stem}-{dsl}-{target}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
        d = self.root / rid
        d.mkdir(parents=True)
        if kind == "translate":
            argv = [self.python, "-m", "akg_agent", "translate", problem, "--dsl", dsl, "--target", target,
                    "--run-dir", str(d), "-o", str(d / "module.py")]
            if body.get("interactive", True):
                argv.append("--await-decisions")
        else:
            argv = [self.python, "-m", "akg_agent", "tune", problem, "--dsl", dsl, "--target", target,
                    "-o", str(d / "module.py"), "--json", "--budget", str(int(body.get("budget", 4)))]
        log = (d / "console.log").open("wb")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs[rid] = p
        doc = {"kind": kind, "argv": argv, "pid": p.pid, "started": time.time(), "returncode": None,
               "config": {"problem": problem, "dsl": dsl, "target": target}}
        (d / "job.json").write_text(json.dumps(doc, indent=1))
        return rid

    def reap(self) -> None:
        """Records the exit status of finished jobs (the page's status reads it)."""
        for rid, p in list(self.procs.items()):
            if p.poll() is not None:
                f = self.root / rid / "job.json"
                doc = _json(f) or {}
                doc["returncode"] = p.returncode
                if doc.get("kind") == "tune":
                    m = re.search(r"\{.*\}\s*$", (self.root / rid / "console.log").read_text(errors="replace"), re.S)
                    if m:
                        (self.root / rid / "tune.json").write_text(m.group(0))
                f.write_text(json.dumps(doc, indent=1))
                del self.procs[rid]


def make_handler(runs: Runs, token: str, port: int, any_host: bool = False) -> type[BaseHTTPRequestHandler]:
    hosts = {f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"}

    class Handler(BaseHTTPRequestHandler):
        server_version = "akg-ui"

        def log_message(self, fmt: str, *args: Any) -> None:  # quiet: the console shows the URL only
            pass

        def _send(self, code: int, body: Any, ctype: str = "application/json") -> None:
            data = body if isinstance(body, bytes) else (json.dumps(body, default=str).encode() if ctype ==
                                                         "application/json" else str(body).encode())
            self.send_response(code)
            self.send_header("Content-Type", ctype + "; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def _host_ok(self) -> bool:
            return any_host or self.headers.get("Host", "") in hosts

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if not self._host_ok():
                return self._send(HTTPStatus.FORBIDDEN, {"error": "unknown Host header"})
            runs.reap()
            path = self.path.split("?", 1)[0]
            try:
                if path == "/":
                    return self._send(200, PAGE.read_bytes(), "text/html")
                if path == "/api/runs":
                    return self._send(200, runs.list())
                if path == "/api/benches":
                    return self._send(200, runs.benches())
                m = re.fullmatch(r"/api/runs/([^/]+)", path)
                if m:
                    return self._send(200, runs.detail(m.group(1)))
            except KeyError:
                return self._send(404, {"error": "no such run"})
            return self._send(404, {"error": f"no such page: {path}"})

        def do_POST(self) -> None:  # noqa: N802
            if not self._host_ok():
                return self._send(HTTPStatus.FORBIDDEN, {"error": "unknown Host header"})
            if not secrets.compare_digest(self.headers.get("X-Akg-Token", ""), token):
                return self._send(HTTPStatus.FORBIDDEN, {"error": "a write needs the token akg ui printed on its "
                                                          "console (open the URL it printed)"})
            n = int(self.headers.get("Content-Length") or 0)
            if n > MAX_BODY:
                return self._send(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"error": "request too large"})
            try:
                body = json.loads(self.rfile.read(n) or b"{}")
                if not isinstance(body, dict):
                    raise ValueError("a JSON object, please")
                path = self.path.split("?", 1)[0]
                if path == "/api/start":
                    return self._send(200, {"id": runs.start(body)})
                m = re.fullmatch(r"/api/runs/([^/]+)/(plan|step)", path)
                if m:
                    runs.decide(m.group(1), m.group(2), body)
                    return self._send(200, {"ok": True})
                return self._send(404, {"error": "no such action"})
            except KeyError:
                return self._send(404, {"error": "no such run"})
            except (ValueError, json.JSONDecodeError) as e:
                return self._send(400, {"error": str(e)})

    return Handler


def serve(root: Path, host: str = "127.0.0.1", port: int = 1430, token: str | None = None,
          ready: Any = None) -> None:
    """Serves until interrupted. `ready(url, token)` is called once listening (tests start it in a thread)."""
    token = token or secrets.token_urlsafe(18)
    runs = Runs(root)
    loopback = host in ("127.0.0.1", "localhost", "::1")
    httpd = ThreadingHTTPServer((host, port), make_handler(runs, token, port))
    port = httpd.server_address[1]  # port 0: the one the system gave
    httpd.RequestHandlerClass = make_handler(runs, token, port, any_host=not loopback)
    url = f"http://{'127.0.0.1' if loopback else host}:{port}/?token={token}"
    if ready is not None:
        ready(url, token, httpd)
    else:
        print(f"akg ui: {url}\n  runs in {root.resolve()}; writes need the token above; Ctrl-C stops", flush=True)
    try:
        httpd.serve_forever(poll_interval=0.2)
    finally:
        httpd.server_close()
