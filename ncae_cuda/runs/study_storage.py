"""A tuning study's storage: a journal file in --out (Optuna's, checked for a line a crash cut
short or a damaged one), or a SQLite or PostgreSQL database shared by workers on many
machines (opened by many at once); and the error a study that cannot go on raises.
"""
from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

from ..errors import NcaeError

JOURNAL = "study.journal"
HEARTBEAT, GRACE = 60, 180       # seconds: a running trial's heartbeat in a database storage,
                                 # and how old it is when another machine marks it failed
POLL = 2.0                       # seconds between looks at a study whose last trials run elsewhere
OPEN_TRIES = 5                   # at opening a database storage that others are making too
CONNECT_TIMEOUT = 10             # seconds a PostgreSQL server has to answer at opening
# PostgreSQL's SQLSTATEs of a table (42P07) or a type (42710) made since the statement looked
MADE_MEANWHILE = ("42P07", "42710")
# what Optuna's replay of a journal raises at a record of its shape (a dict with an integer
# op_code, _check_journal's) that it cannot apply: an unknown op_code (its assert), a field
# missing or of another kind
REPLAY_ERRORS = (AssertionError, LookupError, TypeError, ValueError, AttributeError)


class TuneError(NcaeError):
    """A study that cannot go on: the message says why, in one line."""


def import_optuna():
    try:
        import optuna
    except ImportError:
        raise TuneError("tuning runs on Optuna: pip install -e '.[tune]'") from None
    optuna.logging.set_verbosity(optuna.logging.ERROR)     # the workers print their own lines
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    return optuna


def _shown(spec) -> str:
    """The storage of a study (tune_spec.TuneSpec) as messages and files name it: without its
    password."""
    if spec.storage is None:
        return str(spec.out / JOURNAL)
    import_optuna()
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError
    try:
        url = make_url(spec.storage)
    except ArgumentError:
        raise TuneError(f"--storage {spec.storage}: not a database URL (sqlite:///FILE, "
                        "postgresql://USER@HOST/DB)") from None
    shown = url.render_as_string(hide_password=True)
    if url.drivername == "postgres":      # libpq's name (psql, Heroku), no SQLAlchemy dialect
        fixed = url.set(drivername="postgresql").render_as_string(hide_password=True)
        raise TuneError(f"--storage {shown}: PostgreSQL is postgresql:// to SQLAlchemy: "
                        f"--storage {fixed}")
    return shown


def open_storage(spec):
    """The study's storage, opened: the journal file in --out (made, and checked: TuneError
    names a damaged line), or the database; TuneError says why it cannot be opened."""
    optuna = import_optuna()
    if spec.storage is None:
        from optuna.storages.journal import (
            JournalFileBackend,
            JournalFileSymlinkLock,
            JournalStorage,
        )
        make_out(spec)
        path = str(spec.out / JOURNAL)
        lock = JournalFileSymlinkLock(path)           # Optuna's own, that its writers hold
        _check_journal(Path(path), lock)
        try:                                          # (it replays every record at once)
            return JournalStorage(JournalFileBackend(path, lock_obj=lock))
        except REPLAY_ERRORS as e:
            reason = f"{type(e).__name__}: {e}"
            raise damaged(path, f"a record Optuna cannot replay ({reason})") from None
    import sqlalchemy.exc
    url, engine = spec.storage, {}
    if url.startswith("postgresql://"):          # the driver the [tune] extra installs, whatever
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")   # SQLAlchemy's own
    if url.startswith("postgresql"):
        # a server that takes the connection and never answers: refused after this, not hung
        engine = {"connect_args": {"connect_timeout": CONNECT_TIMEOUT}}
        if spec.worker is None:
            print(f"connecting to {_shown(spec)} (waiting up to {CONNECT_TIMEOUT} s for its "
                  "answer) ...", flush=True)
    try:
        for attempt in range(OPEN_TRIES):
            try:
                return optuna.storages.RDBStorage(url, heartbeat_interval=HEARTBEAT,
                                                  grace_period=GRACE, engine_kwargs=engine)
            except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError) as e:
                # PostgreSQL: another process made the tables at the same moment (a duplicate
                # in pg_type, or a table or type made since this one looked); they are there
                # now, and the next try finds them
                made_by_another = (isinstance(e, sqlalchemy.exc.IntegrityError)
                                   or getattr(e.orig, "sqlstate", None) in MADE_MEANWHILE)
                if not made_by_another or attempt == OPEN_TRIES - 1:
                    raise
                time.sleep(POLL / 4)
    except (ImportError, sqlalchemy.exc.SQLAlchemyError, ValueError) as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise TuneError(f"--storage {_shown(spec)}: cannot open it ({reason})") from None


def make_out(spec) -> None:
    try:
        spec.out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TuneError(f"--out {spec.out}: cannot write there ({e.strerror or e})",
                        errno=e.errno) from None


def _check_journal(path: Path, lock) -> None:
    """A journal whose last line a crash cut short loses that line (Optuna's reader skips it,
    but its next record would be written onto it); TuneError names a line that is not one of
    Optuna's records."""
    if not path.exists():
        return
    lock.acquire()                    # no writer is midway through a line while it is held
    try:
        text = path.read_bytes()
        if text and not text.endswith(b"\n"):
            kept = text[:text.rfind(b"\n") + 1]
            with open(path, "r+b") as f:
                f.truncate(len(kept))
            print(f"note: {path}: its last line was cut short (a write that never ended): "
                  "removed", file=sys.stderr, flush=True)
            text = kept
    finally:
        lock.release()
    for number, line in enumerate(text.splitlines(), start=1):
        record = parsed_json(line)
        if not (isinstance(record, dict) and isinstance(record.get("op_code"), int)):
            raise damaged(f"{path}:{number}", "not a record of Optuna's journal")


def damaged(where: str, what: str) -> TuneError:
    """The error of a journal damaged `where` (its path, and line where known): `what` it
    holds."""
    return TuneError(f"{where}: damaged, {what}: restore the file from a copy, or start over "
                     "with --overwrite (its trials are lost)")


def parsed_json(text: bytes):
    """The JSON value of `text`, None where it is not JSON in UTF-8 (a file a crash cut)."""
    try:
        return json.loads(text.decode())
    except ValueError:                         # UnicodeDecodeError and JSONDecodeError among them
        return None
