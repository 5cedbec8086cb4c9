"""Declared datasets and the files they live in: which dataset an input is charged to.

A dataset is declared once, with its name, the file(s) it lives in and its
total (``dpgeo budget declare NAME --file F --total T``, `Ledger.declare`).
Every front end then finds it from the input itself (`Ledger.resolve`):

* an input whose content (`dpgeo.budget.fingerprint`) is a declared file is
  charged to that dataset, whatever the file is called or wherever it was
  copied; a run that names *another* dataset for it is refused (a file the
  owner declared for several datasets, which is said loudly when declared,
  must be run with one of their names);
* an input without a name whose content is not declared is charged to a key
  of its content (``unnamed file <digest>``), shared by every copy, and the
  owner is told that nothing limits its spending and how to declare it; a
  later declaration of that file takes over what the key has spent;
* an input that is a near-copy of a declared file (rows added or removed)
  is warned about: the ledger cannot tell whether it holds the same people.

Paths and fingerprints stay in the ledger (owner-side); what a release
publishes is the declared name, or nothing (`Resolution.published`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .._dates import today as _today
from ..errors import ParameterError
from .amounts import _check_name
from .fingerprint import Fingerprint, similarity

__all__ = ["NEAR_COPY_SIMILARITY", "Resolution", "content_key"]

#: Estimated share of content in common above which an input is called a near-copy of a declared file.
NEAR_COPY_SIMILARITY = 0.5


def content_key(digest: str) -> str:
    """The ledger key of an undeclared input run without a name: its content, so every copy shares it."""
    return f"unnamed file {digest.removeprefix('set:')[:16]}"


@dataclass(frozen=True)
class Resolution:
    """Which dataset a run is charged to, and what to tell the owner about it.

    Attributes
    ----------
    key : str
        The ledger's dataset key.
    published : str or None
        What the release's metadata may carry: the name the owner gave or
        declared; None for a key made from the content (published as nothing).
    notes : tuple of str
        For the owner: how the dataset was found, near-copies, no total.
    content_notes : tuple of bool
        For each note, whether it depends on the input's content (not only on the ledger and the command
        line): in unattended mode those go to the owner's log, never to stderr.
    """

    key: str
    published: str | None
    notes: tuple = ()
    content_notes: tuple = field(default=(), repr=False)


# -- inside a ledger transaction ----------------------------------------------------------------------------------

def target(conn, name) -> str:
    """The dataset whose budget ``name``'s releases count towards (itself unless merged into another)."""
    row = conn.execute("SELECT dataset FROM dataset_aliases WHERE alias = ?", (name,)).fetchone()
    return row[0] if row else name


def keys(conn, name) -> list:
    """``name`` and every key merged into it."""
    return [name] + [r[0] for r in conn.execute("SELECT alias FROM dataset_aliases WHERE dataset = ? ORDER BY alias",
                                                (name,))]


def files(conn, name) -> list:
    """``(path, declared, size)`` of every file recorded for ``name`` (declared first)."""
    return [(r[0], bool(r[1]), r[2]) for r in conn.execute(
        "SELECT path, declared, size FROM dataset_files WHERE dataset IN (SELECT ? UNION SELECT alias FROM "
        "dataset_aliases WHERE dataset = ?) ORDER BY declared DESC, path", (name, name))]


def _merge(conn, alias, into, today):
    """Count ``alias``'s releases towards ``into`` from now on (its own aliases too)."""
    if alias == into:
        return
    conn.execute("UPDATE dataset_aliases SET dataset = ? WHERE dataset = ?", (into, alias))
    conn.execute("INSERT OR REPLACE INTO dataset_aliases (alias, dataset, date) VALUES (?, ?, ?)", (alias, into, today))


def _ensure(conn, name, today):
    conn.execute("INSERT OR IGNORE INTO datasets (name, created_date) VALUES (?, ?)", (name, today))


def declare_files(conn, name, prints, today):
    """Record ``prints`` (``[(path, Fingerprint)]``) as ``name``'s files; take over what their keys spent.

    Returns notes for the owner. Refuses a file already declared for another dataset.
    """
    notes = []
    _ensure(conn, name, today)
    if target(conn, name) != name:
        raise ParameterError(f"{name!r} was merged into dataset {target(conn, name)!r}: declare files for that one")
    for path, fp in prints:
        others = conn.execute("SELECT dataset, path FROM dataset_files WHERE digest = ? AND declared = 1 "
                              "AND dataset <> ? ORDER BY dataset", (fp.digest, name)).fetchall()
        if others:  # allowed (the owner says so), never silent: the same people under two totals
            names = ", ".join(repr(o[0]) for o in others)
            notes.append(f"{path} holds the same data as {others[0][1]}, also declared as dataset {names}: a release "
                         f"of either spends the privacy of the same people, and neither total protects them from the "
                         f"other's releases. Keep one dataset per file unless that is what you mean; a run on this "
                         f"file must now name its dataset")
        # what the file spent without a name, under its content key or (ledgers of dpgeo <= 0.x) its path
        for old in {r[0] for r in conn.execute("SELECT dataset FROM dataset_files WHERE digest = ? AND declared = 0",
                                               (fp.digest,))} | {path}:
            old = target(conn, old)
            if old != name and conn.execute("SELECT 1 FROM datasets WHERE name = ?", (old,)).fetchone():
                if conn.execute("SELECT total_epsilon FROM datasets WHERE name = ?", (old,)).fetchone()[0] is not None \
                        and old != path:
                    continue  # a dataset of its own with a total: the owner's, not ours to merge
                _merge(conn, old, name, today)
                notes.append(f"the releases recorded under {old!r} (the same file, run without a name) now count "
                             f"towards {name!r}")
        conn.execute("DELETE FROM dataset_files WHERE digest = ? AND declared = 0", (fp.digest,))
        conn.execute("INSERT OR REPLACE INTO dataset_files (dataset, digest, sketch, size, path, declared, date) "
                     "VALUES (?, ?, ?, ?, ?, 1, ?)", (name, fp.digest, fp.sketch_bytes(), fp.size, path, today))
    return notes


def resolve(conn, path, fp: Fingerprint, name, today, record=True) -> Resolution:
    """Which dataset an input with fingerprint ``fp`` (at ``path``) is charged to; ``name`` as given, or None."""
    rows = conn.execute("SELECT dataset, path FROM dataset_files WHERE digest = ? AND declared = 1 ORDER BY dataset",
                        (fp.digest,)).fetchall()
    declared = rows[0] if rows else None
    notes, content = [], []

    def note(text, depends_on_content=True):
        notes.append(text)
        content.append(depends_on_content)

    if name is not None:
        _check_name(name, "the dataset name")
        key = target(conn, name)
        if rows and key not in {r[0] for r in rows}:
            one = declared[0]
            raise ParameterError(
                f"the input holds the data declared as dataset {' and '.join(repr(r[0]) for r in rows)} (the same "
                f"content as {declared[1]}), not {name!r}: run it as --dataset {one} (dataset={one!r})"
                + (", or without a name" if len(rows) == 1 else ""))
        own = conn.execute("SELECT count(*) FROM dataset_files WHERE dataset = ? AND declared = 1", (key,)).fetchone()[0]
        if declared is None and own:
            note(f"the input is not one of the files declared for dataset {key!r} (see dpgeo budget show {key}); "
                 "it is charged to it as you asked. If it holds other people, give it a dataset of its own")
        _near_copies(conn, fp, key, note)
        return Resolution(key, name if key == name else key, tuple(notes), tuple(content))
    if len(rows) > 1:
        raise ParameterError(f"the input is declared as datasets {' and '.join(repr(r[0]) for r in rows)} (the same "
                             f"content as {declared[1]}): name the one this release is charged to, e.g. --dataset "
                             f"{declared[0]} (dataset={declared[0]!r})")
    if declared is not None:
        note(f"charged to the declared dataset {declared[0]!r}: the input has the same content as {declared[1]}")
        return Resolution(declared[0], declared[0], tuple(notes), tuple(content))
    seen = conn.execute("SELECT dataset FROM dataset_files WHERE digest = ? AND declared = 0", (fp.digest,)).fetchone()
    key = target(conn, seen[0]) if seen else content_key(fp.digest)
    total = conn.execute("SELECT total_epsilon FROM datasets WHERE name = ?", (key,)).fetchone()
    if seen and total is not None and total[0] is not None:  # its records were found to be a declared dataset's
        note(f"charged to the declared dataset {key!r}: an earlier run of this file found its records to be that "
             "dataset's")
        return Resolution(key, key, tuple(notes), tuple(content))
    if not seen and record:
        _ensure(conn, key, today)
        conn.execute("INSERT OR IGNORE INTO dataset_files (dataset, digest, sketch, size, path, declared, date) "
                     "VALUES (?, ?, ?, ?, ?, 0, ?)", (key, fp.digest, fp.sketch_bytes(), fp.size, path, today))
        legacy = os.path.realpath(path)  # what a ledger of schema 1 keyed this file on
        if legacy != key and conn.execute("SELECT 1 FROM datasets WHERE name = ?", (legacy,)).fetchone():
            _merge(conn, legacy, key, today)
    note(f"no dataset name given and the input is not a declared dataset: this release is charged to {key!r} "
         f"(every copy of {path} shares it), and nothing limits what it spends. Declare the dataset once, with the "
         f"total its people may spend: dpgeo budget declare NAME --file {path} --total EPSILON")
    _near_copies(conn, fp, None, note)
    return Resolution(key, None, tuple(notes), tuple(content))


def _near_copies(conn, fp, key, note):
    for dataset, path, blob in conn.execute("SELECT dataset, path, sketch FROM dataset_files WHERE declared = 1 "
                                            "AND digest <> ?", (fp.digest,)).fetchall():
        if dataset == key:
            continue
        share = similarity(fp, Fingerprint("", 0, Fingerprint.sketch_from(blob)))
        if share >= NEAR_COPY_SIMILARITY:
            note(f"the input looks like a near-copy of {path}, declared as dataset {dataset!r} (about {share:.0%} of "
                 f"its content in common): if it holds the same people, run it as --dataset {dataset} "
                 f"(dataset={dataset!r}) so that they share one budget")


def cached_fingerprint(row, st):
    """The cached `Fingerprint` of a file whose ``os.stat`` is ``st``, or None when the file has changed."""
    if row is None or tuple(row[:4]) != (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev):
        return None
    return Fingerprint(row[4], st.st_size, Fingerprint.sketch_from(row[5]))


def cache_fingerprint(conn, path, st, fp):
    conn.execute("INSERT OR REPLACE INTO fingerprint_cache (path, size, mtime_ns, inode, device, digest, sketch) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?)",
                 (path, st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev, fp.digest, fp.sketch_bytes()))


def today():
    return _today()
