#!/usr/bin/env python3
"""dlock_client: a small Python client for the dlock HTTP API (`dlock serve`).

Standard library only (Python 3.8 or later). Copy this file into your
project, or import it from here.

    from dlock_client import Client, FencedTable

    client = Client("http://127.0.0.1:7070", token=os.environ["DLOCK_SERVE_TOKEN"])
    table = FencedTable("app.db", table="resources", key="name")
    table.create(value="TEXT")
    with client.acquire("reports", ttl_ms=30000, wait_ms=10000) as lease:
        table.upsert("reports", lease.fence, value="monthly totals")
        if lease.lost.is_set():
            ...  # stop: another holder may be writing now

What it gives you:

- Client.acquire takes a lock and returns a Lease: its fence (the number
  that grows with every grant), TTL and expiry. While the lease is open, a
  background thread reads its server-sent events stream
  (GET /v1/leases/{id}/events); the open stream is also what tells the
  server this client is alive, and the server keeps the lease refreshed.
  When the server pushes `lost` (expired, taken over, force-released by an
  administrator), Lease.lost (a threading.Event) is set and
  Lease.lost_reason says why. If the stream breaks without a `released`
  event the lease counts as lost too: nothing then confirms it is held.
- Lease.renew and Lease.release; a Lease is a context manager that
  releases on exit and raises LostError if the lease had been lost.
- Client.force_release (needs an admin token): evicts the holder of a name.
- FencedTable: the fence guard. A lock alone cannot stop a paused or
  partitioned holder from writing after its lease ended; the resource
  must check the fence. FencedTable uses the table shape and rule of the
  Go guard (package github.com/dlockdev/dlock/fence/sqlitefence): one row
  per resource key with an INTEGER fence column, and a write is accepted
  only if its fence is not lower than the stored one, in ONE conditional
  statement (INSERT ... ON CONFLICT DO UPDATE ... WHERE t.fence <=
  EXCLUDED.fence). Equal fences are accepted, so one grant may write
  many times. A rejected write raises StaleFenceError. Go and Python
  writers can share the database file.

Errors from the server are application/problem+json; they raise DlockError
(HeldError for 409 held, LostError for 410 lost) carrying the problem.

The demo (main) takes a lease as client A, writes through the guard,
has an administrator force-release the lock (when DLOCK_SERVE_ADMIN_TOKEN
is set; otherwise A releases it and keeps its old fence), lets client B
take the lock and write, then shows A's late write with the older fence
being rejected. Each step prints one machine-readable line, e.g.
`lost client=A reason=force-released`.

Environment: DLOCK_SERVE (server URL, default http://127.0.0.1:7070),
DLOCK_SERVE_TOKEN (client bearer token), DLOCK_SERVE_ADMIN_TOKEN (admin
token, optional), DLOCK_DB (SQLite file, default dlock-demo.db), DLOCK_NAME
(lock name, default py-demo).

    python3 dlock_client.py            # the demo (exit 0 when the guard held)
    python3 dlock_client.py hold ...   # hold a lease, obey stdin commands
    python3 dlock_client.py write ...  # one guarded write, no lease
"""

import argparse
import http.client
import json
import os
import socket
import sqlite3
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request

DEFAULT_URL = "http://127.0.0.1:7070"
PROBLEM_PREFIX = "https://dlock.dev/problems/"
MAX_SQL_FENCE = 2**63 - 1


class DlockError(Exception):
    """An error answer from the server (a problem+json document)."""

    def __init__(self, status, problem):
        self.status = status
        self.problem = problem
        typ = str(problem.get("type", ""))
        self.slug = typ[len(PROBLEM_PREFIX):] if typ.startswith(PROBLEM_PREFIX) else typ
        self.title = problem.get("title", "")
        self.detail = problem.get("detail", "")
        super().__init__("dlock: %d %s: %s" % (status, self.title or self.slug, self.detail))


class HeldError(DlockError):
    """409 held: someone else holds the lock; .holder describes them."""

    @property
    def holder(self):
        return self.problem.get("holder")


class LostError(DlockError):
    """410 lost: the lease was lost before this call; .reason says why."""

    @property
    def reason(self):
        return self.problem.get("reason", "")


class StaleFenceError(Exception):
    """A guarded write was rejected: a higher fence has written since."""

    def __init__(self, key, offered, current):
        self.key = key
        self.offered = offered
        self.current = current
        super().__init__("fence: write to %r with fence %d rejected: fence %d has written since"
                         % (key, offered, current))


def _error_for(status, body):
    try:
        problem = json.loads(body.decode("utf-8", "replace") or "{}")
    except ValueError:
        problem = {}
    if not isinstance(problem, dict):
        problem = {}
    problem.setdefault("detail", body[:200].decode("utf-8", "replace"))
    slug = str(problem.get("type", "")).rsplit("/", 1)[-1]
    if status == 409 and slug == "held":
        return HeldError(status, problem)
    if status == 410:
        return LostError(status, problem)
    return DlockError(status, problem)


class Client:
    """A connection to one dlock server, authenticated by a bearer token."""

    def __init__(self, url=None, token=None, owner=None, timeout=10.0):
        self.url = (url or os.environ.get("DLOCK_SERVE") or DEFAULT_URL).rstrip("/")
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("dlock: server URL %r is not http(s)://host[:port]" % self.url)
        self.token = token if token is not None else os.environ.get("DLOCK_SERVE_TOKEN", "")
        self.owner = owner or "py/%d" % os.getpid()
        self.timeout = timeout

    def _request(self, method, path, body=None, token=None, timeout=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        tok = token if token is not None else self.token
        if tok:
            req.add_header("Authorization", "Bearer " + tok)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raise _error_for(e.code, e.read()) from None
        return json.loads(raw) if raw else None

    @staticmethod
    def _path(fmt, *names):
        return fmt % tuple(urllib.parse.quote(n, safe="") for n in names)

    def acquire(self, name, ttl_ms=None, wait_ms=None, owner=None, watch=True, on_lost=None):
        """Take the lock on name and return its Lease.

        wait_ms: None waits the server's default (30 s), 0 makes one
        attempt, -1 waits without bound. A lock still held when the wait
        ends raises HeldError. watch=True starts the events thread;
        on_lost(lease) is called from it when the lease is lost.
        """
        body = {"owner": owner or self.owner}
        if ttl_ms is not None:
            body["ttl_ms"] = int(ttl_ms)
        if wait_ms is not None:
            body["wait_ms"] = int(wait_ms)
        wait_s = 30.0 if wait_ms is None else (max(wait_ms, 0) / 1000.0)
        if wait_ms is not None and wait_ms < 0:
            wait_s = None  # no bound: no socket timeout either
        timeout = None if wait_s is None else wait_s + self.timeout
        doc = self._request("POST", self._path("/v1/locks/%s/acquire", name), body, timeout=timeout)
        lease = Lease(self, doc, on_lost=on_lost)
        if watch:
            lease.watch()
        return lease

    def force_release(self, name, admin_token=None):
        """Evict the holder of name (admin token); returns {"evicted", "new_fence"}."""
        tok = admin_token if admin_token is not None else os.environ.get("DLOCK_SERVE_ADMIN_TOKEN", "")
        return self._request("POST", self._path("/v1/locks/%s/force-release", name), {}, token=tok)

    def holders(self, prefix=""):
        """The holders of every lock whose name starts with prefix."""
        q = "?prefix=" + urllib.parse.quote(prefix, safe="") if prefix else ""
        return self._request("GET", "/v1/locks" + q)["holders"]

    def lease_state(self, lease_id):
        """The server's view of a lease: its fields plus "state"."""
        return self._request("GET", self._path("/v1/leases/%s", lease_id))


class Lease:
    """A granted lock. Check .lost before acting on the resource."""

    def __init__(self, client, doc, on_lost=None):
        self.client = client
        self.lease_id = doc["lease_id"]
        self.name = doc["name"]
        self.kind = doc.get("kind", "mutex")
        self.fence = int(doc["fence"])
        self.ttl_ms = doc.get("ttl_ms")
        self.expires_at = doc.get("expires_at")
        self.owner = doc.get("owner")
        self.lost = threading.Event()
        self.lost_reason = ""
        self.watching = threading.Event()  # set once the stream said "held"
        self.ended = threading.Event()     # set when the stream is over
        self._on_lost = on_lost
        self._released = False
        self._thread = None
        self._conn = None
        self._mu = threading.Lock()

    def __repr__(self):
        return "<Lease %s fence=%d>" % (self.name, self.fence)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            self.release()
        except LostError:
            if exc_type is None:
                raise
        return False

    def renew(self, ttl_ms=None):
        """Refresh the lease now (a heartbeat); LostError if it is gone."""
        body = {} if ttl_ms is None else {"ttl_ms": int(ttl_ms)}
        doc = self.client._request("POST", self._path("/renew"), body)
        self.ttl_ms, self.expires_at = doc.get("ttl_ms"), doc.get("expires_at")
        return doc

    def release(self):
        """Give the lock back. LostError (410) if it was lost meanwhile."""
        with self._mu:
            self._released = True
        try:
            self.client._request("DELETE", self._path(""))
        except LostError as e:
            self._mark_lost(e.reason or "lost")
            raise
        finally:
            self.stop_watch(timeout=2.0)

    def check(self):
        """Raise LostError if the server said the lease is lost."""
        if self.lost.is_set():
            raise LostError(410, {"title": "lease lost", "reason": self.lost_reason,
                                  "detail": "lease on %r (fence %d) lost: %s"
                                  % (self.name, self.fence, self.lost_reason)})

    def _path(self, suffix):
        return Client._path("/v1/leases/%s", self.lease_id) + suffix

    # --- the events stream -------------------------------------------------

    def watch(self):
        """Start the thread that reads the lease's events stream."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="dlock-events-" + self.name, daemon=True)
            self._thread.start()

    def stop_watch(self, timeout=2.0):
        """Wait for the stream to end (the server ends it after released or
        lost), then close its connection if it is still open."""
        if self._thread is None:
            return
        self._thread.join(timeout)
        conn = self._conn
        if self._thread.is_alive() and conn is not None and conn.sock is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._thread.join(timeout)

    def _connect(self):
        parts = urllib.parse.urlsplit(self.client.url)
        cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = cls(parts.hostname, parts.port, timeout=None)  # pings every 15 s; no read timeout
        headers = {"Accept": "text/event-stream"}
        if self.client.token:
            headers["Authorization"] = "Bearer " + self.client.token
        conn.request("GET", parts.path + self._path("/events"), headers=headers)
        return conn

    def _watch(self):
        reason = None
        try:
            self._conn = self._connect()
            resp = self._conn.getresponse()
            if resp.status != 200:
                raise _error_for(resp.status, resp.read())
            reason = self._read_events(resp)
        except LostError as e:
            reason = e.reason or "lost"
        except (OSError, http.client.HTTPException, DlockError) as e:
            reason = "events stream failed: %s" % e
        finally:
            if self._conn is not None:
                self._conn.close()
            with self._mu:
                released = self._released
            if reason is not None and not released:
                self._mark_lost(reason)
            self.ended.set()

    def _read_events(self, resp):
        """Dispatch events until the stream ends; return a loss reason, or
        None when the stream ended with released."""
        event, data = "message", []
        while True:
            line = resp.readline()
            if not line:
                return "events stream closed"
            line = line.decode("utf-8", "replace").rstrip("\r\n")
            if line.startswith(":"):
                continue
            if line:
                field, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if field == "event":
                    event = value
                elif field == "data":
                    data.append(value)
                continue
            done, reason = self._dispatch(event, "\n".join(data))
            if done:
                return reason
            event, data = "message", []

    def _dispatch(self, event, data):
        if event == "held":
            self.watching.set()
        elif event == "released":
            return True, None
        elif event == "lost":
            try:
                reason = json.loads(data).get("reason") or "lost"
            except (ValueError, AttributeError):
                reason = "lost"
            return True, reason
        return False, None

    def _mark_lost(self, reason):
        with self._mu:
            if self.lost.is_set():
                return
            self.lost_reason = reason
            self.lost.set()
        if self._on_lost is not None:
            self._on_lost(self)


class FencedTable:
    """The fence guard on one SQLite table (rule and shape of sqlitefence.Table).

    One row per resource key; the fence column holds the highest fence
    accepted. upsert/update are one statement each whose WHERE clause
    carries the rule, so check and write are atomic even across processes
    sharing the file.
    """

    def __init__(self, db, table="resources", key="name", fence="fence"):
        if isinstance(db, sqlite3.Connection):
            self.db = db
        else:
            # Autocommit: every guarded statement commits at once. The busy
            # timeout makes concurrent writers wait for the file lock.
            self.db = sqlite3.connect(db, timeout=5.0, isolation_level=None, check_same_thread=False)
        self.table, self.key, self.fence_col = table, key, fence
        self._t, self._k, self._f = _ident(table), _ident(key), _ident(fence)

    def create(self, **columns):
        """CREATE TABLE IF NOT EXISTS with the key, the fence and columns
        (name=SQL type)."""
        cols = ["%s TEXT PRIMARY KEY" % self._k, "%s INTEGER NOT NULL" % self._f]
        cols += ["%s %s" % (_ident(c), t) for c, t in sorted(columns.items())]
        self.db.execute("CREATE TABLE IF NOT EXISTS %s (%s)" % (self._t, ", ".join(cols)))

    def upsert(self, key, fence, /, **values):
        """Insert key's row, or overwrite it if its fence is not higher."""
        cols, args = self._prepare(key, fence, values)
        allc = [self._k, self._f] + cols
        params = ", ".join("?%d" % (i + 1) for i in range(len(allc)))
        assign = ", ".join("%s = EXCLUDED.%s" % (c, c) for c in allc[1:])
        sql = ("INSERT INTO %s AS t (%s) VALUES (%s) ON CONFLICT (%s) DO UPDATE SET %s WHERE t.%s <= EXCLUDED.%s"
               % (self._t, ", ".join(allc), params, self._k, assign, self._f, self._f))
        self._write(sql, key, fence, args)

    def update(self, key, fence, /, **values):
        """Update key's row if its fence is not higher; KeyError if no row."""
        cols, args = self._prepare(key, fence, values)
        assign = ", ".join(["%s = ?2" % self._f] + ["%s = ?%d" % (c, i + 3) for i, c in enumerate(cols)])
        sql = "UPDATE %s SET %s WHERE %s = ?1 AND %s <= ?2" % (self._t, assign, self._k, self._f)
        self._write(sql, key, fence, args)

    def current(self, key):
        """The fence stored on key's row; KeyError if there is none."""
        row = self.db.execute("SELECT %s FROM %s WHERE %s = ?1" % (self._f, self._t, self._k), (key,)).fetchone()
        if row is None:
            raise KeyError("%s: no row with %s = %r" % (self.table, self.key, key))
        return int(row[0])

    def _prepare(self, key, fence, values):
        if isinstance(fence, bool) or not isinstance(fence, int) or not 1 <= fence <= MAX_SQL_FENCE:
            raise ValueError("fence %r: want an integer from 1 to %d (was the lease's fence passed?)"
                             % (fence, MAX_SQL_FENCE))
        cols, args = [], [key, fence]
        for name in sorted(values):
            q = _ident(name)
            if q in (self._k, self._f):
                raise ValueError("column %r is the key or fence column; it cannot be set" % name)
            cols.append(q)
            args.append(values[name])
        return cols, args

    def _write(self, sql, key, fence, args):
        if self.db.execute(sql, args).rowcount > 0:
            return
        raise StaleFenceError("%s[%s]" % (self.table, key), fence, self.current(key))


def _ident(name):
    """Quote an SQL identifier as the Go guard does."""
    if not name or "\x00" in name:
        raise ValueError("SQL identifier %r" % name)
    return '"' + name.replace('"', '""') + '"'


# --- the demo ---------------------------------------------------------------

_out = threading.Lock()


def emit(what, /, **fields):
    """Print one machine-readable line: `what key=value ...`."""
    parts = [what]
    for k, v in fields.items():
        s = str(v)
        if not s or any(c in s for c in " =\"\n"):
            s = json.dumps(s)
        parts.append("%s=%s" % (k, s))
    with _out:
        print(" ".join(parts), flush=True)


def guarded_write(table, who, key, fence, value):
    """Write value under fence; print the outcome; True if accepted."""
    try:
        table.upsert(key, fence, value=value)
    except StaleFenceError as e:
        emit("write", result="rejected", client=who, fence=fence, current=e.current)
        return False
    emit("write", result="ok", client=who, fence=fence)
    return True


def open_table(path):
    table = FencedTable(path, table="resources", key="name")
    table.create(value="TEXT")
    return table


def demo(args):
    """A writes; A's lease ends; B writes; A's late write is rejected."""
    table = open_table(args.db)
    a = Client(args.url, owner="py-demo/A")
    b = Client(args.url, owner="py-demo/B")
    admin = os.environ.get("DLOCK_SERVE_ADMIN_TOKEN", "")

    la = a.acquire(args.name, ttl_ms=args.ttl_ms, wait_ms=args.wait_ms)
    emit("acquired", client="A", name=args.name, fence=la.fence, ttl_ms=la.ttl_ms)
    la.watching.wait(5)
    guarded_write(table, "A", args.name, la.fence, "written by A")

    if admin:
        r = a.force_release(args.name, admin)
        emit("force-released", name=args.name, new_fence=r.get("new_fence"))
        if not la.lost.wait(args.lost_timeout):
            emit("check", result="failed", why="no lost event within %ss" % args.lost_timeout)
            return 1
        emit("lost", client="A", reason=la.lost_reason)
    else:
        emit("note", why="no DLOCK_SERVE_ADMIN_TOKEN: A releases and keeps its old fence")
        la.release()

    with b.acquire(args.name, ttl_ms=args.ttl_ms, wait_ms=args.wait_ms) as lb:
        emit("acquired", client="B", name=args.name, fence=lb.fence, ttl_ms=lb.ttl_ms)
        guarded_write(table, "B", args.name, lb.fence, "written by B")
        stale_rejected = not guarded_write(table, "A", args.name, la.fence, "late write by A")
    emit("released", client="B")
    if not stale_rejected:
        emit("check", result="failed", why="the guard accepted a stale fence")
        return 1
    emit("check", result="ok")
    return 0


def hold(args):
    """Acquire, write, then obey stdin: write | renew | release | quit."""
    table = open_table(args.db)
    c = Client(args.url, owner="py/%s" % args.client)
    lease = c.acquire(args.name, ttl_ms=args.ttl_ms, wait_ms=args.wait_ms,
                      on_lost=lambda ls: emit("lost", client=args.client, reason=ls.lost_reason))
    lease.watching.wait(5)
    emit("acquired", client=args.client, name=args.name, fence=lease.fence, ttl_ms=lease.ttl_ms)
    guarded_write(table, args.client, args.name, lease.fence, args.value)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "write":
            guarded_write(table, args.client, args.name, lease.fence, args.value + " (again)")
        elif cmd == "renew":
            try:
                lease.renew()
                emit("renewed", client=args.client)
            except DlockError as e:
                emit("renew", result="failed", client=args.client, status=e.status, slug=e.slug)
        elif cmd in ("release", "quit"):
            break
    try:
        lease.release()
        emit("released", client=args.client)
    except LostError as e:
        emit("release", result="lost", client=args.client, reason=e.reason)
    return 0


def write(args):
    """One guarded write with a given fence, no lease: exit 3 if rejected."""
    table = open_table(args.db)
    return 0 if guarded_write(table, args.client, args.name, args.fence, args.value) else 3


def main(argv=None):
    p = argparse.ArgumentParser(description="dlock HTTP client demo: a fenced lease guarding SQLite writes")
    p.add_argument("--url", default=os.environ.get("DLOCK_SERVE", DEFAULT_URL))
    p.add_argument("--db", default=os.environ.get("DLOCK_DB", "dlock-demo.db"))
    p.add_argument("--name", default=os.environ.get("DLOCK_NAME", "py-demo"))
    p.add_argument("--ttl-ms", type=int, default=10000)
    p.add_argument("--wait-ms", type=int, default=10000)
    p.add_argument("--lost-timeout", type=float, default=10.0)
    sub = p.add_subparsers(dest="cmd")
    h = sub.add_parser("hold", help="acquire, write, then obey stdin (write, renew, release)")
    h.add_argument("--client", default="A")
    h.add_argument("--value", default="hello")
    w = sub.add_parser("write", help="one guarded write with --fence, no lease")
    w.add_argument("--client", default="W")
    w.add_argument("--fence", type=int, required=True)
    w.add_argument("--value", default="hello")
    args = p.parse_args(argv)
    run = {"hold": hold, "write": write}.get(args.cmd, demo)
    try:
        return run(args)
    except (DlockError, StaleFenceError, ValueError, OSError) as e:
        emit("error", what=type(e).__name__, detail=str(e))
        return 1


if __name__ == "__main__":
    sys.exit(main())
