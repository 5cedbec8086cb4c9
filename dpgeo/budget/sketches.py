"""Which dataset an input's *records* belong to: the ledger's keyed record sketches, its key and its policy.

Before any record is read, a run is charged by what can be known then: the
name the owner gives, or the file's content fingerprint
(:mod:`dpgeo.budget.datasets`). While the input is counted, a keyed sketch
of its normalised records is filled in the same pass
(:class:`dpgeo.counting.sketch.RecordSketch`); after counting and **before
any noise is drawn**, :func:`check` compares it with the sketches the ledger
holds for datasets with a declared total:

* the records are those of the dataset charged, or of none: the sketch is
  kept with that dataset (so later copies are recognised);
* they are those of declared dataset ``B`` while the run was charged to the
  key of an unnamed, undeclared file: the key is merged into ``B`` (its
  releases, this one included, now count towards ``B``) and the run goes on
  only if ``B``'s total still holds them — else it stops, before any noise,
  and its charge is cancelled;
* they are ``B``'s while the run was charged to a name without a declared
  total, or to in-memory data without a name: refused before any noise (run
  it as ``B``);
* they are ``B``'s while the run was charged to another *declared* dataset:
  the owner's declaration stands and is said loudly (two totals over the same
  people).

"The records are ``B``'s" means: at least :data:`RECORDS_MATCH` of the
input's records are among ``B``'s (a copy, a subset) or at least that share
of ``B``'s records are in the input (a superset, a longer extract).

The key: 16 random bytes in a file beside the ledger (``<ledger>.key``,
owner-only permissions), created on first use. The ledger holds the
sketches, never the key; no output and no log holds either.
"""

from __future__ import annotations

import os
import secrets

from ..errors import LedgerError

__all__ = ["RECORDS_MATCH", "POLICIES", "key_path", "load_key"]

#: Share of records in common (either way) from which an input holds a declared dataset's records.
RECORDS_MATCH = 0.9
#: ``dpgeo budget policy``: whether a run must be charged to a dataset with a declared total.
POLICIES = ("require-declared", "allow-undeclared")
KEY_BYTES = 16


def key_path(ledger_file) -> str:
    """The file of the ledger's record-sketch key: ``<ledger>.key`` beside the ledger."""
    return os.fspath(ledger_file) + ".key"


def load_key(ledger_file, create=True) -> bytes | None:
    """The ledger's secret key (16 bytes), created with owner-only permissions on first use.

    Returns None when it does not exist and ``create`` is False.
    """
    path = key_path(ledger_file)
    try:
        with open(path, "rb") as f:
            key = f.read()
    except FileNotFoundError:
        if not create:
            return None
        key = secrets.token_bytes(KEY_BYTES)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another run created it first: use theirs
            return load_key(ledger_file, create=False)
        except OSError as exc:
            raise LedgerError(f"cannot create the ledger's record key {path}: {exc.strerror}") from None
        with os.fdopen(fd, "wb") as f:
            f.write(key)
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        raise LedgerError(f"cannot read the ledger's record key {path}: {exc.strerror}") from None
    if len(key) != KEY_BYTES:
        raise LedgerError(f"the ledger's record key {path} is damaged ({len(key)} bytes, not {KEY_BYTES}): restore "
                          "it from the backup kept with the ledger, or move it away to start a new key (the datasets' "
                          "record sketches are then learnt again)")
    return key


# -- inside a ledger transaction ----------------------------------------------------------------------------------

def store(conn, dataset, digest, sketch, today):
    """Keep ``sketch`` as the records of ``dataset`` read from the input ``digest`` (the latest run replaces)."""
    conn.execute("INSERT OR REPLACE INTO record_sketches (dataset, digest, key_id, n_records, sketch, date) "
                 "VALUES (?, ?, ?, ?, ?, ?)", (dataset, digest or "", sketch.key_id, sketch.n_records,
                                               sketch.to_bytes(), today))


def has_sketch(conn, dataset, digest, key_id) -> bool:
    return conn.execute("SELECT 1 FROM record_sketches WHERE dataset = ? AND digest = ? AND key_id = ?",
                        (dataset, digest, key_id)).fetchone() is not None


def matches(conn, sketch, target) -> dict:
    """``{dataset: (share of the input in it, share of it in the input)}`` for every dataset with a declared
    total whose records the input holds (either share at least :data:`RECORDS_MATCH`); ``target(name)``
    resolves merged keys."""
    from ..counting.sketch import RecordSketch, containment

    out = {}
    rows = conn.execute("SELECT s.dataset, s.sketch FROM record_sketches s WHERE s.key_id = ?",
                        (sketch.key_id,)).fetchall()
    for name, blob in rows:
        ds = target(name)
        total = conn.execute("SELECT total_epsilon FROM datasets WHERE name = ?", (ds,)).fetchone()
        if total is None or total[0] is None:
            continue
        other = RecordSketch.from_bytes(blob)
        c_in, c_of = containment(sketch, other), containment(other, sketch)
        if max(c_in, c_of) >= RECORDS_MATCH:
            best = out.get(ds, (0.0, 0.0))
            out[ds] = (max(best[0], c_in), max(best[1], c_of))
    return out


def describe(name, shares, figures=True) -> str:
    """What the input holds of dataset ``name``; ``figures=False``: without the shares (a refusal's message,
    which an unattended run prints: no figure computed from the records)."""
    c_in, c_of = shares
    if not figures:
        return f"records of dataset {name!r} (recognised from its records)"
    if min(c_in, c_of) >= RECORDS_MATCH:
        return f"the records of dataset {name!r} (about {c_in:.0%} of the input's records are among its records)"
    if c_in >= RECORDS_MATCH:
        return f"part of the records of dataset {name!r} (about {c_in:.0%} of them are among its records)"
    return f"the records of dataset {name!r} and more (about {c_of:.0%} of its records are in the input)"


def get_policy(conn):
    """The persisted policy (one of :data:`POLICIES`), or None when the owner has chosen none."""
    row = conn.execute("SELECT value FROM ledger_settings WHERE name = 'policy'").fetchone()
    return None if row is None else row[0]


def any_declared(conn) -> bool:
    return conn.execute("SELECT 1 FROM datasets WHERE total_epsilon IS NOT NULL LIMIT 1").fetchone() is not None


def policy_refusal(conn, key, target, unattended, *, path=None, name=None) -> str | None:
    """The message of the strict policy's refusal of a run charged to ``key`` (before any record is read), or
    None. ``path``: the input file, when the run names no dataset; ``name``: the name it gives.

    Strict: the owner chose ``require-declared``, or chose nothing and the
    run is unattended (``--unattended``, the service). It refuses a run whose
    dataset has no declared total once any dataset has one.
    """
    policy = get_policy(conn)
    strict = policy == "require-declared" or (policy is None and unattended)
    if not strict or not any_declared(conn):
        return None
    row = conn.execute("SELECT total_epsilon FROM datasets WHERE name = ?", (target(key),)).fetchone()
    if row is not None and row[0] is not None:
        return None
    why = ("the ledger's policy requires a declared dataset (dpgeo budget policy --require-declared)"
           if policy == "require-declared" else
           "an unattended run must be charged to a declared dataset (the default; dpgeo budget policy)")
    what = f"the input {path} is not a declared dataset and names none" if path is not None else \
        f"dataset {name!r} has no declared total"
    return (f"refused before any record was read: {what}, and {why}. Name a declared dataset (--dataset NAME), "
            "or declare this one: dpgeo budget declare NAME --file FILE --total EPSILON")


def check_records(conn, reservation, sketch, digest, today, *, budget_of, target, merge):
    """The records read, checked against the declared datasets: after counting, before any noise.

    Returns ``(dataset, notes, refusal)``: the dataset the run is charged to
    now (the reservation's own, or the declared dataset an unnamed file's key
    was merged into), notes for the owner, and the error to raise once this
    transaction is committed (None: go on): `BudgetExceededError` when the
    dataset the records belong to cannot hold this release (the merge stands:
    it is a fact about the file). Raises `ParameterError` at once when the
    records are a declared dataset's but the run was charged elsewhere without
    a declared total. The caller cancels the charge on either: no noise yet.
    """
    from ..errors import BudgetExceededError, ParameterError
    from .datasets import content_key
    from .records import check_fits

    key = target(reservation.dataset)
    if not sketch.n_records:  # nothing was read (an unreadable input in an unattended run): nothing to learn
        return key, [], None
    found = matches(conn, sketch, target)
    others = {d: v for d, v in found.items() if d != key}
    if key in found or not others:
        store(conn, key, digest, sketch, today)
        return key, [], None
    names = sorted(others)
    own_total = conn.execute("SELECT total_epsilon FROM datasets WHERE name = ?", (key,)).fetchone()
    declared_here = own_total is not None and own_total[0] is not None
    if declared_here:  # the owner's declaration stands; said loudly
        store(conn, key, digest, sketch, today)
        return key, [f"the input holds {describe(n, others[n])}, but it is charged to dataset {key!r} as declared: "
                     f"the same people are under two totals, and neither protects them from the other's releases"
                     for n in names], None
    if len(names) > 1:
        raise ParameterError(f"the input holds the records of several declared datasets ({', '.join(map(repr, names))}"
                             f"): name the one it is charged to (--dataset NAME); nothing was released and nothing "
                             "is charged")
    b = names[0]
    if not key.startswith(content_key("")):  # a name (or in-memory data): the owner must name the dataset
        raise ParameterError(f"the input holds {describe(b, others[b], False)}, not {key!r}'s: run it as "
                             f"--dataset {b} (dataset={b!r}); nothing was released and nothing is charged")
    merge(key, b)  # this file's key, its earlier releases and this one now count towards b
    store(conn, b, digest, sketch, today)
    after = budget_of(b)
    if after.total_epsilon is not None and (after.spent_epsilon > after.total_epsilon
                                            or after.spent_delta > after.total_delta):
        before = type(after)(b, after.total_epsilon, after.total_delta,
                             after.spent_epsilon - reservation.cost_epsilon, after.spent_delta - reservation.delta)
        try:
            check_fits(before, reservation.cost_epsilon, reservation.delta)
        except BudgetExceededError as exc:
            return b, [], BudgetExceededError(
                f"the input holds {describe(b, others[b], False)} after they were read, before any noise: {exc}", **{k: v for k, v in vars(exc).items()})
    reservation.dataset = b
    reservation.total_epsilon, reservation.total_delta = after.total_epsilon, after.total_delta
    reservation.spent_epsilon, reservation.spent_delta = after.spent_epsilon, after.spent_delta
    return b, [f"charged to the declared dataset {b!r}: the input holds {describe(b, others[b])} (recognised from "
               f"its records; run it as --dataset {b} next time)"], None


def learn_declared(ledger, dataset, files, prints) -> list:
    """The record sketch of each declared file not known yet, read with the default options; notes for the owner.

    Declaring is the owner's own act and releases nothing: the records are read
    once here, so that a copy in another format or order is recognised even
    before the declared file itself is run. A file dpgeo cannot read without
    options (a CSV whose coordinate columns have unusual names, say) is learnt
    at its first run instead.
    """
    from ..counting.inputs import PointFile, open_points
    from ..counting.sketch import RecordSketch
    from ..errors import DpgeoError

    from .._dates import today

    notes = []
    key = ledger.record_key()
    for f, (_, fp) in zip(files, prints):
        sketch = RecordSketch(key)
        with ledger._operation(write=False) as conn:
            if conn is not None and has_sketch(conn, dataset, fp.digest, sketch.key_id):
                continue
        try:
            src = f.open() if isinstance(f, PointFile) else open_points(os.fspath(f))
            for b in src.batches():
                sketch.add_points(b.x, b.y, src.crs)
        except Exception as exc:  # noqa: BLE001 - best effort: the first run learns them instead
            why = str(exc) if isinstance(exc, DpgeoError) else type(exc).__name__
            notes.append(f"the records of {os.fspath(f)} will be known after its first run (it cannot be read "
                         f"with the default options: {why})")
            continue
        with ledger._operation(write=True, consequence="the records of the file were not recorded") as conn:
            store(conn, dataset, fp.digest, sketch, today())
    return notes
