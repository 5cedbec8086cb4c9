"""Every install command the documentation or a message gives must work from a clone of this repository.

dpgeo is on no package index, so ``pip install dpgeo`` (or ``'dpgeo[serve]'``) fails for everyone who
copies it. What may be installed: the checkout itself (``.``, ``'.[serve]'``, ``-e .``), a wheel built
from it (``dist/dpgeo-*.whl``, with the command that builds it beside), or another package by its
name (numpy, fiona, scikit-learn, ...). Extras must be ones ``pyproject.toml`` declares, and files
named with ``-c``/``-r`` must exist in the checkout.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "README.md",
        ROOT / "sample_layers" / "README.md"]
SOURCES = [p for d in ("dpgeo", "qgis_plugin", "tests", "benchmarks", "dev") for p in sorted((ROOT / d).rglob("*"))
           if p.is_file() and (p.suffix == ".py" or p.parent.name == "dev")]

#: ``pip install`` (``python -m pip install``, ``pipx install``) up to the end of the command.
_INSTALL = re.compile(r"\b(?:pipx|pip3?)\s+install\s+(?P<args>[^`\n#();]*)")
#: A shell command substitution (one level of parentheses inside), and the one that names the built wheel.
_SUBST = re.compile(r"\$\((?:[^()]|\([^()]*\))*\)")
_WHEEL_SUBST = "$(ls dist/dpgeo-*.whl)"
_WITH_VALUE = {"-c", "--constraint", "-r", "--requirement", "-i", "--index-url", "--extra-index-url", "-f",
               "--find-links", "-t", "--target", "--prefix", "--root", "--python"}


def _extras():
    with open(ROOT / "pyproject.toml", "rb") as f:
        return set(tomllib.load(f)["project"]["optional-dependencies"])


def _commands(text):
    """The argument strings of every install command in ``text`` (shell quoting intact)."""
    out = []
    text = _SUBST.sub(lambda m: "dist/dpgeo-*.whl" if m.group(0) == _WHEEL_SUBST else "SUBST", text)
    for m in _INSTALL.finditer(text):
        args = m.group("args").strip().rstrip(",;:")
        if args.endswith(".") and len(args) > 1 and not args[-2].isspace():  # a full stop, not the checkout
            args = args[:-1]
        for q in "\"'":  # the end of a string the command was quoted in (a message in the code)
            if args.count(q) % 2 and args.endswith(q):
                args = args[:-1].rstrip()
        if args:
            out.append(args)
    return out


def _problems(args, context):
    """What is wrong with one install command's arguments (empty when it works from a clone)."""
    wheel = "dist/dpgeo-*.whl"
    args = _SUBST.sub(lambda m: wheel if m.group(0) == _WHEEL_SUBST else "SUBST", args)
    try:
        words = shlex.split(args)
    except ValueError:
        words = args.split()
    problems, skip = [], False
    for w in words:
        if skip:
            skip = False
            if w.endswith(".txt") and not (ROOT / w).exists():
                problems.append(f"{w} does not exist in the checkout")
            continue
        if w in _WITH_VALUE:
            skip = True
            continue
        if w.startswith(("-", "{", "$")):
            continue
        m = re.match(r"^(?P<what>[^\[\]]+?)(\[(?P<extras>[^\]]*)\])?$", w.strip("'\""))
        if not m:
            continue
        what, extras = m.group("what"), m.group("extras")
        unknown = sorted(set(filter(None, (e.strip() for e in (extras or "").split(",")))) - _extras())
        if re.match(r"^dpgeo\b(?!-\*\.whl)", what, re.I) and "/" not in what:
            problems.append(f"{w!r} names dpgeo on a package index, where it is not")
        elif what == wheel and "pip wheel" not in context:
            problems.append(f"{w!r}: no command building that wheel (pip wheel ... -w dist .) next to it")
        if unknown and (what in (".", wheel) or what.startswith("dpgeo")):
            problems.append(f"{w!r}: no extra {', '.join(unknown)} in pyproject.toml")
    return problems


def test_the_checker_knows_good_from_bad():
    assert _problems("'dpgeo[serve]'", "") and _problems("dpgeo", "") and _problems("dpgeo[fiona]", "")
    assert _problems("'.[nosuch]'", "") and _problems("-c nowhere/constraints.txt .", "")
    assert _problems('"$(ls dist/dpgeo-*.whl)[serve]"', "no build command here")
    for fine in (".", "'.[serve]'", "-e '.[test]'", "-q -c dev/constraints-debian-qgis.txt -e .", "fiona",
                 '"numpy==1.24.2" .', "scikit-learn", '"diffprivlib>=0.6.5"', "--upgrade pip"):
        assert _problems(fine, "") == [], fine
    assert _problems('"$(ls dist/dpgeo-*.whl)[dask]"', "python3 -m pip wheel --no-deps -w dist .") == []
    assert _commands("x `pip install 'dpgeo[serve]'` y (or `pip install fiona`)") == ["'dpgeo[serve]'", "fiona"]
    assert _commands('pip install "numpy==$(python3 -c \'print(1)\')" .') == ['"numpy==SUBST" .']


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_install_command_in_the_docs_works_from_a_clone(doc):
    text = doc.read_text(encoding="utf-8")
    bad = {args: p for args in _commands(text) if (p := _problems(args, text))}
    assert not bad, f"{doc.name}: {bad}"


def test_every_install_hint_in_a_message_works():
    bad = {}
    for path in SOURCES:
        if path.name == "test_install_docs.py":
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for args in _commands(text):
            p = _problems(args, text)
            if p:
                bad[f"{path.relative_to(ROOT)}: {args}"] = p
    assert not bad, bad


def test_a_wheel_builds_from_the_checkout_and_holds_the_package(tmp_path):
    """The documented ``pip wheel --no-deps -w dist .``, offline: the build backend must be installed."""
    try:
        import setuptools
    except ImportError:
        pytest.skip("setuptools is not installed")
    need = tuple(int(x) for x in re.findall(r"setuptools>=(\d+)", (ROOT / "pyproject.toml").read_text())[0:1])
    if tuple(int(x) for x in setuptools.__version__.split(".")[:1]) < need:
        pytest.skip(f"setuptools {setuptools.__version__} is older than pyproject.toml's build requirement")
    src = tmp_path / "src"  # a copy of what the wheel is built from: building writes build/ and *.egg-info
    shutil.copytree(ROOT / "dpgeo", src / "dpgeo", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                        str(tmp_path / "dist"), "."], cwd=src, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PIP_NO_INDEX="1"))
    assert p.returncode == 0, p.stderr
    wheels = list((tmp_path / "dist").glob("dpgeo-*-py3-none-any.whl"))
    assert len(wheels) == 1
    names = zipfile.ZipFile(wheels[0]).namelist()
    assert "dpgeo/io/vendor/leaflet/leaflet.js" in names and "dpgeo/cli/__init__.py" in names
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "dpgeo = dpgeo.cli:main" in zipfile.ZipFile(wheels[0]).read(entry).decode()
