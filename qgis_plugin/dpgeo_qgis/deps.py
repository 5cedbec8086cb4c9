"""Making the dpgeo library importable inside QGIS's own Python.

QGIS runs plugins in the Python it was built with (on Debian/Ubuntu that is
``/usr/bin/python3``). dpgeo and the packages it needs (shapely 2, geopandas,
pyproj, PyWavelets, ...) are usually installed in a separate virtual
environment made with ``--system-site-packages``, so that it shares QGIS's
numpy. This module finds such an environment and puts its ``site-packages``
in front of ``sys.path``, exactly as that environment's own interpreter
would, before importing dpgeo.

Environments are looked for, in order, in

1. the environment variable ``DPGEO_VENV`` (a venv folder),
2. the QGIS setting ``dpgeo/venv`` (a venv folder),
3. the default folder ``<user data folder>/dpgeo/qgis-venv``
   (``~/.local/share/dpgeo/qgis-venv`` on Linux).

If dpgeo still cannot be imported, :class:`DpgeoImportError` carries a
message that says which commands to run.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import site
import sys

__all__ = [
    "DpgeoImportError",
    "SETTINGS_KEY",
    "ENV_VAR",
    "default_venv",
    "candidate_venvs",
    "venv_site_packages",
    "add_venv",
    "BUNDLED_BINARY_PACKAGES",
    "import_dpgeo",
    "dpgeo_available",
    "fix_message",
]

#: QGIS setting (QgsSettings key) that may name a venv folder.
SETTINGS_KEY = "dpgeo/venv"
#: Environment variable that may name a venv folder.
ENV_VAR = "DPGEO_VENV"

_PY = f"{sys.version_info[0]}.{sys.version_info[1]}"


class DpgeoImportError(ImportError):
    """dpgeo cannot be imported; the message says how to fix it."""


def default_venv() -> str:
    """The venv folder the plugin looks in by default.

    ``<generic data folder>/dpgeo/qgis-venv``: ``~/.local/share/dpgeo/qgis-venv``
    on Linux, ``%LOCALAPPDATA%\\dpgeo\\qgis-venv`` on Windows,
    ``~/Library/Application Support/dpgeo/qgis-venv`` on macOS.
    """
    base = ""
    try:
        from qgis.PyQt.QtCore import QStandardPaths

        base = QStandardPaths.writableLocation(QStandardPaths.GenericDataLocation)
    except Exception:  # pragma: no cover - Qt is always there inside QGIS
        pass
    if not base:
        base = os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "dpgeo", "qgis-venv")


def _setting_venv() -> str:
    try:
        from qgis.core import QgsSettings

        value = QgsSettings().value(SETTINGS_KEY, "")
    except Exception:  # pragma: no cover
        return ""
    return str(value or "")


def candidate_venvs() -> list[tuple[str, str]]:
    """``(folder, where it came from)`` for every venv the plugin will try."""
    out = []
    env = os.environ.get(ENV_VAR, "")
    if env:
        out.append((os.path.expanduser(env), f"environment variable {ENV_VAR}"))
    setting = _setting_venv()
    if setting:
        out.append((os.path.expanduser(setting), f"QGIS setting {SETTINGS_KEY}"))
    out.append((default_venv(), "default location"))
    return out


def venv_site_packages(venv: str) -> tuple[str | None, str]:
    """The ``site-packages`` folder of ``venv`` usable by this Python, or ``(None, why not)``."""
    if not os.path.isdir(venv):
        return None, "does not exist"
    cfg = os.path.join(venv, "pyvenv.cfg")
    if os.path.exists(cfg):
        version = ""
        with open(cfg, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition("=")
                if key.strip() in ("version", "version_info"):
                    version = value.strip()
                    break
        if version and ".".join(version.split(".")[:2]) != _PY:
            return None, f"was made with Python {version}, but QGIS runs Python {_PY}"
    if os.name == "nt":
        sp = os.path.join(venv, "Lib", "site-packages")
    else:
        sp = os.path.join(venv, "lib", f"python{_PY}", "site-packages")
    if not os.path.isdir(sp):
        return None, f"has no {sp}"
    return sp, "ok"


def add_venv(venv: str) -> tuple[bool, str]:
    """Put ``venv``'s site-packages (and its ``.pth`` entries) at the front of ``sys.path``.

    Returns ``(added, reason)``; adding the same venv twice is a no-op.
    """
    sp, why = venv_site_packages(venv)
    if sp is None:
        return False, why
    norm = os.path.normcase(os.path.abspath(sp))
    if any(os.path.normcase(os.path.abspath(p)) == norm for p in sys.path if p):
        return True, "already on sys.path"
    before = list(sys.path)
    site.addsitedir(sp)  # appends sp and processes its .pth files (editable installs)
    new = [p for p in sys.path if p not in before]
    sys.path[:] = new + before  # the venv wins over system packages, as in the venv itself
    importlib.invalidate_caches()
    return True, "added"


def _qgis_python() -> str:
    """Path of the Python interpreter that QGIS embeds (for the fix commands)."""
    if os.name == "nt":
        return os.path.join(sys.base_exec_prefix, "python.exe")
    for name in (f"python{_PY}", "python3"):
        cand = os.path.join(sys.base_exec_prefix, "bin", name)
        if os.path.exists(cand):
            return cand
    return f"python{_PY}"


def _numpy_pin() -> str:
    try:
        import numpy

        return f'"numpy=={numpy.__version__}" '
    except Exception:
        return ""


def _quote(path: str) -> str:
    return f'"{path}"' if (" " in path or "\\" in path) else path


def fix_message(error: BaseException | None = None, tried=None) -> str:
    """Text that explains why dpgeo cannot be imported and what to run."""
    venv = default_venv()
    if os.name == "nt":
        venv_py = os.path.join(venv, "Scripts", "python.exe")
    else:
        venv_py = os.path.join(venv, "bin", "python")
    reason = f"{type(error).__name__}: {error}" if error is not None else "not installed"
    lines = [
        f"The dpgeo plugin needs the dpgeo Python library, which cannot be imported in QGIS's "
        f"Python {_PY} ({_qgis_python()}): {reason}",
        "",
        "Fix: install dpgeo into a virtual environment that shares QGIS's Python packages, "
        "then restart QGIS. In a terminal run:",
        "",
        f"    {_quote(_qgis_python())} -m venv --system-site-packages {_quote(venv)}",
        f"    {_quote(venv_py)} -m pip install {_numpy_pin()}/path/to/dpgeo",
        "",
        "(/path/to/dpgeo: the folder of a dpgeo source checkout, or a dpgeo wheel built from one with "
        "'python3 -m pip wheel --no-deps -w dist .'; dpgeo is not on a package index. The numpy pin keeps "
        "the numpy that QGIS itself was built with).",
        f"The plugin finds that folder by itself. To use another environment made the same way, set "
        f"the environment variable {ENV_VAR} to its folder before starting QGIS, or run "
        f"QgsSettings().setValue('{SETTINGS_KEY}', '/path/to/venv') in the QGIS Python console.",
    ]
    if tried:
        lines += ["", "Looked in:"] + [f"    {folder} ({source}): {why}" for folder, source, why in tried]
    return "\n".join(lines)


#: Packages whose wheels bundle their own copies of GEOS, PROJ or GDAL. QGIS is linked
#: with other versions of the same libraries, and inside the QGIS executable the dynamic
#: linker would resolve the wheels' calls to QGIS's copies (mixing two versions crashes).
#: On Linux they are therefore imported with RTLD_DEEPBIND, so that each extension uses
#: the libraries it was built with. Elsewhere libraries are isolated anyway.
BUNDLED_BINARY_PACKAGES = ("shapely", "pyproj", "pyogrio", "fiona")


def _import_with_extensions(name: str, required: bool) -> None:
    """Import package ``name`` and every compiled extension module inside it."""
    import importlib.machinery

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return
    try:
        importlib.import_module(name)
    except Exception:
        if required:
            raise
        return
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    for base in spec.submodule_search_locations:
        for folder, dirs, files in os.walk(base):
            dirs[:] = [d for d in dirs if d not in ("tests", "__pycache__")]
            rel = os.path.relpath(folder, base)
            prefix = name if rel == "." else name + "." + rel.replace(os.sep, ".")
            for f in files:
                for suffix in suffixes:
                    if f.endswith(suffix):
                        module = prefix + "." + f[: -len(suffix)]
                        if module not in sys.modules:
                            try:
                                importlib.import_module(module)
                            except Exception:
                                pass
                        break


def _try_import():
    flag = getattr(os, "RTLD_DEEPBIND", 0) if sys.platform.startswith("linux") else 0
    old = sys.getdlopenflags() if flag else None
    if flag:
        sys.setdlopenflags(old | flag)
    try:
        for name in BUNDLED_BINARY_PACKAGES:
            _import_with_extensions(name, required=name in ("shapely", "pyproj"))
        import dpgeo  # noqa: F401
    finally:
        if flag:
            sys.setdlopenflags(old)
    return sys.modules["dpgeo"]


def import_dpgeo():
    """Import dpgeo, adding a configured venv to ``sys.path`` if needed.

    Raises
    ------
    DpgeoImportError
        With :func:`fix_message` as its message.
    """
    if sys.modules.get("dpgeo") is not None:
        return sys.modules["dpgeo"]
    tried = []
    first_error = None
    try:
        return _try_import()
    except Exception as exc:  # ImportError, or a broken binary dependency
        first_error = exc
    for folder, source in candidate_venvs():
        added, why = add_venv(folder)
        tried.append((folder, source, why))
        if not added:
            continue
        try:
            return _try_import()
        except Exception as exc:
            first_error = exc
            tried[-1] = (folder, source, f"on sys.path, but import failed: {type(exc).__name__}: {exc}")
    raise DpgeoImportError(fix_message(first_error, tried))


def _find(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # e.g. sys.modules[name] is None
        return False


def dpgeo_available() -> tuple[bool, str]:
    """Cheap check (no heavy import) whether dpgeo can be found: ``(ok, message)``."""
    if sys.modules.get("dpgeo") is not None or _find("dpgeo"):
        return True, ""
    tried = []
    for folder, source in candidate_venvs():
        added, why = add_venv(folder)
        tried.append((folder, source, why))
        if added and _find("dpgeo"):
            return True, ""
    return False, fix_message(ModuleNotFoundError("No module named 'dpgeo'"), tried)
