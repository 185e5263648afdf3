"""The web console under /console/: pages for looking (GET, never a change) and forms for doing
(POST, each with the session's CSRF token), beside the SQS endpoint on its port.

Every request is checked before it is routed: without access keys its Host must be a loopback
name (a rebound DNS name cannot reach the console), with keys it must carry a signed-in session;
a POST must come from this origin (when the browser says), as a form, with the session's token.
Pages are Jinja2 templates with autoescaping on, served with a Content-Security-Policy that runs
only the console's own script and styles: a message body is shown as text, whatever it holds.
The templates write every value through the filters of formats.py.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from jinja2 import Environment, PackageLoader, select_autoescape

from ..endpoint.service import Service
from ..endpoint.transport import Headers, is_loopback
from ..errors import QueueDoesNotExist, QueueError
from ..rules.checks import check_message_id, check_queue_name
from . import actions, formats, pages
from .charts import depth_svg
from .sessions import Session, Sessions, csrf_ok, set_cookie

log = logging.getLogger(__name__)
PREFIX = "/console"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SVG_CSP = "default-src 'none'; style-src 'unsafe-inline'"  # pygal's styles; an <img> runs no script
STATIC = {"console.css": "text/css; charset=utf-8", "console.js": "text/javascript; charset=utf-8"}
FORM = "application/x-www-form-urlencoded"
MAX_FORM_FIELDS = 1000

Reply = tuple[int, dict[str, str], bytes]


@dataclass(frozen=True)
class Call:
    """One request as the console's handlers see it."""

    method: str
    parts: tuple[str, ...]  # the path after /console/, unquoted, split at "/"
    form: dict[str, list[str]]
    session: Session


class Console:
    """Answers the requests whose path starts with /console for one endpoint's `Service`."""

    def __init__(self, service: Service, sessions: Sessions, port: int, tls: bool) -> None:
        self.service = service
        self.sessions = sessions
        self.port = port
        self.tls = tls
        self.templates = Environment(
            loader=PackageLoader("sparkqueue.console", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            finalize=formats.finalize,  # no True, False or None on a page
        )
        formats.install(self.templates)
        self.routes = [  # built once: each request only matches
            (method, re.compile(pattern), handler) for method, pattern, handler in self._routes()
        ]

    @staticmethod
    def serves(target: str) -> bool:
        path = urlsplit(target).path
        return path == PREFIX or path.startswith(PREFIX + "/")

    def answer(self, method: str, target: str, headers: Headers, body: bytes) -> Reply:
        """Status, headers and body for one request (never raises)."""
        try:
            return self._answer(method, target, headers, body)
        except Exception:
            log.exception("console request failed")
            return _text(500, "the console failed on this request; see the server's log")

    def refusal(self, method: str, target: str, headers: Headers) -> Reply | None:
        """The answer to a request refused from its head alone, before its body is read (a
        client that may not use the console cannot make the server take one in); None: go on.
        Never raises."""
        try:
            return self._refusal(method, target, headers)
        except Exception:
            log.exception("console request failed")
            return _text(500, "the console failed on this request; see the server's log")

    def _refusal(self, method: str, target: str, headers: Headers) -> Reply | None:
        host = headers.get("host") or ""
        if not self.sessions.sign_in_needed and not is_loopback(
            host, self.port, 443 if self.tls else 80
        ):
            return _text(403, "without access keys the console answers on localhost only")
        if method not in ("GET", "POST"):
            return 405, {"Allow": "GET, POST", "Content-Type": "text/plain"}, b"GET or POST"
        if headers.get("sec-fetch-site") == "cross-site":  # another site's page, image, script
            return _text(403, "the console answers its own pages and direct visits only")
        if method == "POST" and not self._same_origin(headers, host):
            return _text(403, "changes are taken from the console's own pages only")
        path = urlsplit(target).path
        if path in (f"{PREFIX}/signin", PREFIX) or path.startswith(f"{PREFIX}/static/"):
            return None
        if self.sessions.sign_in_needed and self.sessions.find(headers.get("cookie")) is None:
            if method == "GET":
                return _redirect(f"{PREFIX}/signin")
            return _text(403, "sign in first")
        return None

    def _answer(self, method: str, target: str, headers: Headers, body: bytes) -> Reply:
        refused = self._refusal(method, target, headers)
        if refused is not None:
            return refused
        path = urlsplit(target).path
        if path == PREFIX:
            return _redirect(PREFIX + "/")
        parts = tuple(unquote(p) for p in path.removeprefix(PREFIX + "/").split("/"))
        if method == "GET" and len(parts) == 2 and parts[0] == "static" and parts[1] in STATIC:
            data = resources.files(__package__).joinpath("static", parts[1]).read_bytes()
            return 200, {"Content-Type": STATIC[parts[1]], "Cache-Control": "max-age=300"}, data
        session = self.sessions.find(headers.get("cookie"))
        if parts == ("signin",):
            return self._sign_in(method, headers, body, session)
        if session is None and self.sessions.sign_in_needed:  # it ended since `refusal`
            return _text(403, "sign in first")
        cookie = None
        if session is None:  # no keys: a session (and its CSRF token) on first sight
            session = self.sessions.open()
            cookie = set_cookie(session, self.tls)
        form: dict[str, list[str]] = {}
        if method == "POST":
            if (headers.get("content-type") or "").split(";")[0].strip().lower() != FORM:
                return _text(415, f"changes are forms ({FORM})")
            form = _form(body)
            if not csrf_ok(session, (form.get("csrf") or [None])[0]):
                return _text(403, "this change lacks the page's CSRF token: reload the page")
        status, answer, data = self._route(Call(method, parts, form, session))
        if cookie is not None:
            answer = {**answer, "Set-Cookie": cookie}
        return status, answer, data

    def _same_origin(self, headers: Headers, host: str) -> bool:
        """A browser names the page a POST came from (Origin, else Referer): it must be ours."""
        origin = headers.get("origin") or headers.get("referer")
        if origin is None:
            return True  # not a browser's form; the CSRF token still decides
        try:
            sent = urlsplit(origin)
        except ValueError:  # not a URL a browser sends
            return False
        return sent.scheme == ("https" if self.tls else "http") and sent.netloc == host

    def _sign_in(
        self, method: str, headers: Headers, body: bytes, session: Session | None
    ) -> Reply:
        if not self.sessions.sign_in_needed:
            return _redirect(PREFIX + "/")
        if method == "GET":
            return self._page("signin.html", None, title="Sign in")
        if not (self.tls or is_loopback(headers.get("host") or "", self.port, 80)):
            return _text(403, "sign in over HTTPS (serve with --tls-cert and --tls-key)")
        form = _form(body)
        key, secret = (form.get(name, [""])[0] for name in ("key", "secret"))
        opened = self.sessions.sign_in(key, secret)
        if opened is None:
            page = self._page("signin.html", None, title="Sign in", notes=["wrong key or secret"])
            return 403, page[1], page[2]
        if session is not None:
            self.sessions.close(session)
        return _redirect(PREFIX + "/", cookie=set_cookie(opened, self.tls))

    def _route(self, call: Call) -> Reply:
        path = "/".join(call.parts)
        for method, pattern, handler in self.routes:
            found = pattern.fullmatch(path)
            if method == call.method and found:
                try:
                    return handler(call, *found.groups())
                except QueueError as error:
                    status = 404 if isinstance(error, QueueDoesNotExist) else 400
                    page = self._page(
                        "error.html", call.session, title="Error", code=error.code,
                        message=self.service.redacted(error.message),
                    )  # fmt: skip
                    return status, page[1], page[2]
        return _text(404, "no such console page")

    def _routes(self) -> list[tuple[str, str, Callable[..., Reply]]]:
        q = r"queues/([^/]+)"
        return [
            ("GET", r"", self._queues),
            ("GET", r"fragments/queues", self._queue_rows),
            ("GET", q, self._queue),
            ("GET", q + r"/depth\.svg", self._depth),
            ("GET", q + r"/dead-letters", self._dead_letters),
            ("GET", r"fragments/tasks/([^/]+)", self._tasks),
            ("GET", q + r"/purge", self._purge_page),
            ("GET", q + r"/messages/([^/]+)", self._message),
            ("POST", r"signout", self._sign_out),
            ("POST", r"redrive", lambda call: self._act(call, actions.redrive)),
            ("POST", r"queues", lambda call: self._act(call, actions.create)),
            *[
                ("POST", f"{q}/{verb}", lambda call, name, run=run: self._act(call, run, name))
                for verb, run in actions.ON_QUEUE.items()
            ],
        ]

    # -- pages ------------------------------------------------------------------------------------

    def _queues(self, call: Call) -> Reply:
        rows = pages.queue_rows(self.service)
        return self._page("queues.html", call.session, title="Queues", rows=rows)

    def _queue_rows(self, call: Call) -> Reply:
        html = self.templates.get_template("queue_rows.html").render(
            rows=pages.queue_rows(self.service)
        )
        return _html(html)

    def _queue(self, call: Call, name: str) -> Reply:
        page = pages.queue_page(self.service, check_queue_name(name))
        return self._page("queue.html", call.session, title=name, editable=actions.EDITABLE, **page)

    def _depth(self, call: Call, name: str) -> Reply:
        svg = depth_svg(pages.depth_points(self.service, check_queue_name(name)))
        return 200, {"Content-Type": "image/svg+xml", "Content-Security-Policy": SVG_CSP}, svg

    def _dead_letters(self, call: Call, name: str) -> Reply:
        page = pages.dead_letters_page(self.service, check_queue_name(name))
        return self._page(
            "dead_letters.html", call.session, title=f"Dead letters in {name}", **page
        )

    def _tasks(self, call: Call, name: str) -> Reply:
        tasks = pages.move_tasks(self.service, check_queue_name(name))
        return _html(self.templates.get_template("tasks.html").render(tasks=tasks))

    def _purge_page(self, call: Call, name: str) -> Reply:
        page = pages.queue_page(self.service, check_queue_name(name))
        return self._page("purge.html", call.session, title=f"Purge {name}", **page)

    def _message(self, call: Call, name: str, message_id: str) -> Reply:
        page = pages.message_page(
            self.service, check_queue_name(name), check_message_id(message_id)
        )
        return self._page("message.html", call.session, title=f"Message {message_id}", **page)

    # -- changes ----------------------------------------------------------------------------------

    def _sign_out(self, call: Call) -> Reply:
        self.sessions.close(call.session)
        return _redirect(f"{PREFIX}/", cookie=set_cookie(None, self.tls))

    def _act(self, call: Call, run: Callable[..., actions.Done], *names: str) -> Reply:
        done = run(self.service, call.form, *(check_queue_name(n) for n in names))
        if done.page is not None:
            template, values = done.page
            return self._page(template, call.session, **values)
        call.session.note(done.note)
        return _redirect(PREFIX + "/" + "/".join(quote(p, safe="") for p in done.go_to))

    def _page(self, template: str, session: Session | None, **values: Any) -> Reply:
        html = self.templates.get_template(template).render(
            csrf=session.csrf if session is not None else "",
            signed_in=session.key_id if session is not None else None,
            where=self.service.broker.engine + " engine",
            notes=[
                *(session.take_notes() if session is not None else ()),
                *values.pop("notes", ()),
            ],
            **values,
        )
        return _html(html)


def _form(body: bytes) -> dict[str, list[str]]:
    """A posted form's fields; an emptied field stays, as "" (clearing an attribute)."""
    text = body.decode("utf-8", "replace")
    return parse_qs(text, keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS)


def _html(html: str) -> Reply:
    return (
        200,
        {
            "Content-Type": "text/html; charset=utf-8",
            "Content-Security-Policy": CSP,
            "X-Content-Type-Options": "nosniff",
            "X-Frame-Options": "DENY",
            "Referrer-Policy": "same-origin",
            "Cache-Control": "no-store",
        },
        html.encode("utf-8"),
    )


def _text(status: int, message: str) -> Reply:
    return status, {"Content-Type": "text/plain; charset=utf-8"}, message.encode("utf-8")


def _redirect(location: str, *, cookie: str | None = None) -> Reply:
    headers = {"Location": location, "Content-Type": "text/plain"}
    if cookie is not None:
        headers["Set-Cookie"] = cookie
    return 303, headers, b""
