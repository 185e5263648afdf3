"""Who may use the console, and proof that a change came from its own page.

With access keys configured, a person signs in with one key and its secret (as they would sign an
SQS request) and gets a session: a random token in a cookie that scripts cannot read (HttpOnly)
and no other site's page sends along (SameSite=Strict). Without keys the console, like the
endpoint, answers on loopback only, and every visitor gets a session on first sight.

Every change is a POST carrying the session's CSRF token in its form, compared in constant time;
a page of another origin can neither read the token nor, without it, make a change.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from ..endpoint.auth import AccessKeys

COOKIE = "sparkqueue_console"
SESSION_SECONDS = 12 * 3600
MAX_SESSIONS = 1000  # the oldest goes first: sign-ins cannot fill the server's memory
MAX_NOTES = 5
_NOBODY = secrets.token_urlsafe(32)


@dataclass
class Session:
    """One signed-in browser: its CSRF token, who it is, and a note for its next page."""

    token: str
    csrf: str
    key_id: str | None
    expires: float
    _notes: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, text: str) -> None:
        with self._lock:
            self._notes = [*self._notes, text][-MAX_NOTES:]

    def take_notes(self) -> list[str]:
        with self._lock:
            notes, self._notes = self._notes, []
        return notes


class Sessions:
    """The console's sessions, in this process (a restarted server signs everyone out)."""

    def __init__(self, keys: AccessKeys) -> None:
        self.keys = keys
        self._lock = threading.Lock()
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    @property
    def sign_in_needed(self) -> bool:
        return bool(self.keys)

    def find(self, cookie_header: str | None) -> Session | None:
        """The live session the request's cookie names, if any."""
        token = _cookie(cookie_header, COOKIE)
        if token is None:
            return None
        with self._lock:
            session = self._sessions.get(token)
            if session is None or session.expires < time.time():
                self._sessions.pop(token, None)
                return None
            return session

    def sign_in(self, key_id: str, secret: str) -> Session | None:
        """A new session if `secret` is `key_id`'s (compared in constant time), else None."""
        expected = self.keys.secrets.get(key_id)
        # compared either way, so the time taken says nothing of whether the key exists
        matches = hmac.compare_digest((expected or _NOBODY).encode(), secret.encode())
        return self.open(key_id) if matches and expected is not None else None

    def open(self, key_id: str | None = None) -> Session:
        session = Session(
            token=secrets.token_urlsafe(32),
            csrf=secrets.token_urlsafe(32),
            key_id=key_id,
            expires=time.time() + SESSION_SECONDS,
        )
        with self._lock:
            self._sessions[session.token] = session
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        return session

    def close(self, session: Session) -> None:
        with self._lock:
            self._sessions.pop(session.token, None)


def csrf_ok(session: Session, given: str | None) -> bool:
    return given is not None and hmac.compare_digest(session.csrf.encode(), given.encode())


def set_cookie(session: Session | None, secure: bool) -> str:
    """The Set-Cookie value that keeps (or, for None, ends) a session."""
    value, age = (session.token, SESSION_SECONDS) if session is not None else ("", 0)
    flags = "; Secure" if secure else ""
    return f"{COOKIE}={value}; Path=/console; Max-Age={age}; HttpOnly; SameSite=Strict{flags}"


def _cookie(header: str | None, name: str) -> str | None:
    for part in (header or "").split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key == name:
            return value
    return None
