"""The examples of README.md and docs/*.md run as written on a fresh clone, in order, within the budgets they
declare (as tests/test_install_docs.py does for the install commands).

What counts as an example: every ``dpgeo`` command of a ``sh`` block (with the variables set before it in
its block), and README's Python blocks. Left out, each for its reason: transcripts (lines that start with
``$ ``, shown with their output), commands with an elided part (``...``), commands on data that is not in
the clone by design (``--scheduler``: the user's own cluster and files; ``dpgeo serve``: a service;
``postgresql://``: the user's own database), and
benchmark commands (``benchmarks/``; their own README runs them).

README's examples run after ``./dev/run-sample`` as the README says (its three releases of ε 1 are
recorded first); each page of docs/ runs on a clone and ledger of its own.

* ``test_examples_are_complete_and_within_budget`` (default, bounded): every example parses, every input
  it names exists in the clone or is written by an example before it, and the ε of README's releases fits
  the total its first lines declare.
* ``test_examples_run_as_written`` (slow: ``--run-slow``): runs every example in a copy of the clone and
  checks each exits 0.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"^```(?P<lang>[a-z]*)\n(?P<body>.*?)^```", re.S | re.M)
_ASSIGN = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S+\s*)+$")
#: Commands on purpose not run: why.
_LEFT_OUT = {"...": "an elided part", "--scheduler": "the user's own cluster and files",
             "postgresql://": "the user's own database (tests/test_postgis_*.py run them on a throwaway server)",
             "dpgeo serve": "a service", "benchmarks/": "a benchmark"}
#: Options whose value is an input file.
_INPUT_OPTIONS = {"--domain", "--file"}


def _lines(body):
    """The logical lines of a shell block (backslash continuations joined), comments dropped."""
    out, cur = [], ""
    for raw in body.splitlines():
        cur += raw.rstrip()
        if cur.endswith("\\"):
            cur = cur[:-1] + " "
            continue
        try:
            words = shlex.split(cur, comments=True) if cur.strip() else []
        except ValueError:  # not a command (a diagram, a comment with an apostrophe)
            if cur.lstrip().startswith(("dpgeo", "$ dpgeo")):
                raise
            words = []
        if words:
            out.append((cur.strip(), words))
        cur = ""
    return out


def examples(page):
    """``(kind, text, words, env)`` of each example of ``page`` in order: kind "sh" or "python"."""
    text = page.read_text(encoding="utf-8")
    found = []
    for m in _BLOCK.finditer(text):
        lang, body = m.group("lang"), m.group("body")
        if lang == "python" and page.name == "README.md":
            found.append(("python", body, [], {}))
        if lang not in ("sh", "bash"):
            continue
        env = {}
        for line, words in _lines(body):
            if line.startswith("$ "):
                continue  # a transcript
            if _ASSIGN.match(line.split("#")[0].strip()):
                env.update(w.split("=", 1) for w in words)
                continue
            if words[0] != "dpgeo" or any(k in " ".join(words) for k in _LEFT_OUT):
                continue
            words = [re.sub(r"\$(\w+)|\$\{(\w+)\}", lambda v: env.get(v.group(1) or v.group(2), v.group(0)), w)
                     for w in words]
            found.append(("sh", line, words, dict(env)))
    return found


def _outputs(words):
    return [words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-o", "--output")]


def _inputs(words):
    """Files a command reads: the input of a run (its first argument), and the files named by options."""
    files = []
    if len(words) > 2 and words[1] in ("spans", "wavecluster", "kmeans", "heat", "hotspots", "compare", "export",
                                       "info") and not words[2].startswith("-"):
        files.append(words[2])
    for i, w in enumerate(words[:-1]):
        if w in _INPUT_OPTIONS and not re.match(r"^-?[\d.]+,", words[i + 1]):
            files.append(words[i + 1])
        if w.startswith("--domain=") and not re.match(r"^--domain=-?[\d.]+,", w):
            files.append(w.split("=", 1)[1])
    return files


def _epsilon(words):
    if words[1] not in ("spans", "wavecluster", "kmeans", "heat", "hotspots") or "--append" in words:
        return 0.0
    for i, w in enumerate(words[:-1]):
        if w == "--epsilon":
            return float(words[i + 1])
    return 0.0


#: What ./dev/run-sample spends at most before README's examples (three releases of ε 1; the fourth is refused).
RUN_SAMPLE_EPSILON = 3.0


def test_examples_are_complete_and_within_budget():
    for page in PAGES:
        made = set()
        for kind, line, words, _ in examples(page):
            if kind != "sh":
                continue
            for f in _inputs(words):
                assert (ROOT / f).exists() or f in made, f"{page.name}: {line!r} reads {f}, which a fresh clone lacks"
            made.update(_outputs(words))
    readme = examples(ROOT / "README.md")
    totals = [float(w[w.index("--total") + 1]) for k, _, w, _ in readme if k == "sh" and "--total" in w]
    spent = sum(_epsilon(w) for k, _, w, _ in readme if k == "sh")
    spent += sum(float(e) for k, body, _, _ in readme if k == "python" for e in re.findall(r"epsilon=([\d.]+)", body)
                 if "dataset=" in body)
    assert totals and RUN_SAMPLE_EPSILON + spent <= totals[-1], (spent, totals)


def _clone(tmp_path):
    """A fresh clone's files the examples read (the sample layers and the docs), and a ``dpgeo`` command of
    this checkout."""
    work = tmp_path / "clone"
    shutil.copytree(ROOT / "sample_layers", work / "sample_layers")
    (work / "out").mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "dpgeo"
    exe.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m dpgeo \"$@\"\n")
    exe.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", DPGEO_LEDGER=str(tmp_path / "ledger.sqlite"),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), MPLBACKEND="Agg")
    return work, env


def _run_sample_spent(work, env):
    """The ledger after ./dev/run-sample ran three times: the dataset declared (total 3) and spent."""
    code = (
        "from dpgeo.budget import Ledger\n"
        "l = Ledger()\n"
        "l.declare('minneapolis-stops', ['sample_layers/minneapolis_police_stops_2017.gpkg'], total_epsilon=3)\n"
        "for _ in range(3):\n"
        "    with l.reserve('minneapolis-stops', epsilon=1, mechanism='dp-dbscan-spans') as r:\n"
        "        r.complete(outputs=['out/minneapolis_spans.gpkg'])\n")
    subprocess.run([sys.executable, "-c", code], cwd=work, env=env, check=True, timeout=120)


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_examples_run_as_written(page, tmp_path):
    """Bounded counterpart: test_examples_are_complete_and_within_budget."""
    found = examples(page)
    if not found:
        pytest.skip(f"{page.name} has no runnable example")
    work, env = _clone(tmp_path)
    if page.name == "README.md":
        _run_sample_spent(work, env)
    for kind, text, words, _ in found:
        if kind == "python":
            p = subprocess.run([sys.executable, "-c", text], cwd=work, env=env, capture_output=True, text=True,
                               timeout=600)
        else:
            p = subprocess.run(words, cwd=work, env=env, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, f"{page.name}: {text}\n{p.stderr[-2000:]}"
