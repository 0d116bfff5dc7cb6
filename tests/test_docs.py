"""The README and docs/ as a newcomer reads them: short, every `akg` command shown parses against the real
CLI (a renamed flag fails here), every page and script they point to exists, the cheap commands run, and
the training example of docs/torch-compile.md runs as written."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from akg_agent.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# what a placeholder in a documented command stands for, so the command parses as a user would type it
SMALL = "tests/problems/rule_sum_through_linear.py"
PLACEHOLDERS = {"PROBLEM.py": SMALL, "FILE": SMALL, "CANDIDATE.py": "out.py", "RUN_DIR": "x", "MODEL": "m",
                "NAME": "h100", "T": "cpu", "D": "cpp"}


def _blocks(page: Path, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", page.read_text(), re.S)


def _commands(prefix: str) -> list[tuple[str, str]]:
    out = []
    for page in PAGES:
        for block in _blocks(page, "sh"):
            for line in block.splitlines():
                cmd = re.split(r"\s{2,}#", line)[0].strip()
                if cmd.startswith(prefix):
                    out.append((page.name, cmd))
    return out


def test_the_readme_is_short_and_its_first_screen_says_how_to_translate_a_program():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    first = "\n".join(text.splitlines()[:40])
    assert "akg translate PROBLEM.py" in first and "make demo" in first and "make test" in first


def test_every_page_and_file_the_docs_point_to_exists():
    missing = []
    for page in PAGES:
        for ref in re.findall(r"`((?:docs|benchmarks|tests|akg_agent|ir|dsl_backends)/[\w./-]+\.(?:md|py))`",
                              page.read_text()):
            if not (ROOT / ref).exists():
                missing.append(f"{page.name}: {ref}")
    assert not missing


@pytest.mark.parametrize("page,cmd", _commands("akg "), ids=lambda v: v if len(v) < 40 else v[:40])
def test_every_documented_akg_command_parses(page, cmd):
    words = [PLACEHOLDERS.get(w, w) for w in shlex.split(cmd)[1:]]
    words = [w for w in words if w != "&"]
    try:
        build_parser().parse_args(words)
    except SystemExit as e:
        pytest.fail(f"{page}: `{cmd}` does not parse (exit {e.code})")


@pytest.mark.parametrize("page,cmd", _commands("python benchmarks/"), ids=lambda v: v if len(v) < 40 else v[:40])
def test_every_documented_script_exists_and_takes_its_flags(page, cmd):
    words = shlex.split(cmd)
    script = ROOT / words[1]
    assert script.is_file(), f"{page}: {words[1]}"
    text = script.read_text()
    for flag in (w for w in words[2:] if w.startswith("--")):
        assert f'"{flag}"' in text, f"{page}: {words[1]} takes no {flag}"


CHEAP = ("akg hw list", "akg ir ")  # the documented commands run here as written (the rest: parsed above)


@pytest.mark.parametrize("page,cmd", [c for c in _commands("akg ") if c[1].startswith(CHEAP)],
                         ids=lambda v: v if len(v) < 40 else v[:40])
def test_the_cheap_documented_commands_run(page, cmd):
    words = [PLACEHOLDERS.get(w, w) for w in shlex.split(cmd)[1:]]
    r = subprocess.run([sys.executable, "-m", "akg_agent", *words], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, f"{page}: `{cmd}`: {r.stderr[-2000:]}"
    assert r.stdout.strip()


def test_the_training_example_runs_as_written(tmp_path):
    (code,) = _blocks(ROOT / "docs" / "torch-compile.md", "python")
    script = tmp_path / "example.py"
    script.write_text(code)
    r = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=600,
                       env={**__import__("os").environ, "AKG_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == 0, r.stderr[-2000:]
    assert "graph0.forward: cpp on cpu: 1 translated" in r.stdout and "graph0.backward: cpp on cpu: 1 translated" \
        in r.stdout and "left in torch" not in r.stdout, r.stdout
