"""The console clicked through in headless Chromium (Debian's, tests/browser.py) against
`sparkqueue serve --console`, a process of its own with access keys: sign in, create a queue
with a dead-letter queue, send, receive past the max receive count, run the redrive pass, find
the message in the dead letters with its history, move it back, delete it. A hostile body stays
text, a change without the page's CSRF token is refused. Every page also fits a phone's width.

With SPARKQUEUE_SCREENSHOTS=docs/console set, it also refreshes docs/console.md's pictures; with
SPARKQUEUE_PHONE_SCREENSHOTS=DIR, it saves each page as a phone shows it to DIR."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from sparkqueue import Broker
from tests.browser import ARGS
from tests.processes import REPO, stop
from tests.raw_http import ACCESS_KEY, SECRET_KEY

COMMAND = str(Path(sys.executable).with_name("sparkqueue"))
HOSTILE = '<script>window.owned = 1</script><img src=x onerror="window.owned = 2">'
PHONE = {"width": 375, "height": 740}
# The page at a phone's width: [its width, its body's, the window's], and what sticks out.
LAYOUT = """() => {
  const width = window.innerWidth + 1;
  const out = [...document.querySelectorAll("header > *, main > *, .note")]
    .filter((element) => element.getBoundingClientRect().right > width)
    .map((element) => element.outerHTML.slice(0, 80));
  const tables = [...document.querySelectorAll("table")].filter((table) => {
    const box = table.parentElement;
    return getComputedStyle(box).overflowX !== "auto" || box.getBoundingClientRect().right > width;
  });
  return {
    widths: [document.documentElement.scrollWidth, document.body.scrollWidth, window.innerWidth],
    out: out,
    unboxed: tables.map((table) => table.outerHTML.slice(0, 80)),
  };
}"""


@pytest.fixture
def console(tmp_path) -> Iterator[tuple[str, str]]:
    """(root, base URL) of a console served with one access key."""
    root = str(tmp_path / "root")
    process = subprocess.Popen(
        [COMMAND, "serve", "--console", "--root", root, "--port", "0", "--redrive-every", "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "SPARKQUEUE_ACCESS_KEYS": f"{ACCESS_KEY}:{SECRET_KEY}"},
    )
    try:
        line = process.stdout.readline()
        yield root, re.search(r"(http://127\.0\.0\.1:\d+/console/)", line)[1]
    finally:
        stop(process)


@pytest.fixture
def page(chromium: str) -> Iterator[Page]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 860})
        dialogs: list[str] = []
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        yield page
        assert dialogs == [], "a message body ran as script"
        browser.close()


def shot(page: Page, name: str, folder_variable: str = "SPARKQUEUE_SCREENSHOTS") -> None:
    folder = os.environ.get(folder_variable)
    if folder:
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def sign_in(page: Page, base: str) -> None:
    page.goto(base)
    page.fill("input[name=key]", ACCESS_KEY)
    page.fill("input[name=secret]", SECRET_KEY)
    page.click("#sign-in")
    expect(page.locator("h1")).to_have_text("Queues")


def fits_a_phone(page: Page, name: str) -> None:
    """No sideways scroll of the page itself: its header wraps, a wide table scrolls in its own
    box, nothing else reaches past the screen's right edge."""
    layout = page.evaluate(LAYOUT)
    document, body, window = layout["widths"]
    assert document <= window + 1 and body <= window + 1, (name, layout)
    assert layout["out"] == [] and layout["unboxed"] == [], (name, layout)
    shot(page, name, "SPARKQUEUE_PHONE_SCREENSHOTS")


def test_a_poison_message_to_the_dead_letters_and_back(console, page):
    root, base = console
    page.goto(base)
    expect(page).to_have_url(re.compile(r"/console/signin$"))
    shot(page, "signin")
    page.fill("input[name=key]", ACCESS_KEY)
    page.fill("input[name=secret]", "not the secret")
    page.click("#sign-in")
    expect(page.locator(".note")).to_have_text("wrong key or secret")
    page.fill("input[name=key]", ACCESS_KEY)
    page.fill("input[name=secret]", SECRET_KEY)
    page.click("#sign-in")
    expect(page.locator("h1")).to_have_text("Queues")

    for name, options in (("orders-dlq", {}), ("orders", {"dead_letter_queue": "orders-dlq"})):
        page.goto(base)
        page.fill("input[name=name]", name)
        for field, value in options.items():
            page.fill(f"input[name={field}]", value)
        if options:
            page.fill("input[name=max_receive_count]", "2")
        page.click("#create-queue")
        expect(page.locator(".note")).to_have_text(f"created {name}")

    page.fill("textarea[name=body]", HOSTILE)
    page.fill("textarea[name=attributes]", "customer=<b>ada</b>")
    page.click("#send")
    expect(page.locator(".note")).to_contain_text("sent ")
    message_id = page.locator(".note").inner_text().split()[-1]
    body = page.locator("pre.body").first
    expect(body).to_have_text(HOSTILE)  # shown as the text it is
    expect(page.locator(".attr").first).to_contain_text("<b>ada</b>")
    assert page.evaluate("window.owned") is None

    for receives in (1, 2):  # visibility 0: visible again at once, its receives used up
        page.fill("form[action$='/receive'] input[name=visibility_timeout]", "0")
        page.click("#receive")
        expect(page.locator("table.messages td.n")).to_have_text(str(receives))
        page.goto(f"{base}queues/orders")
    expect(page.locator(".stats")).to_contain_text("1 awaiting the dead-letter queue")

    page.goto(base)
    page.click("#run-redrive")
    expect(page.locator(".note")).to_contain_text("1 moved to dead-letter queues")
    expect(page.locator("#queue-rows")).to_contain_text("orders-dlq")
    shot(page, "queues")

    page.click("#queue-rows a[href$='/orders-dlq/dead-letters']")
    expect(page.locator("h1")).to_have_text("Dead letters in orders-dlq")
    row = page.locator("table.messages tbody tr").first
    expect(row).to_contain_text(message_id)
    expect(row).to_contain_text("ran out of receives in orders (max 2)")  # why it is here
    expect(row.locator("td.n")).to_have_text("0")
    shot(page, "dead-letters")

    row.locator("a.mono").click()
    timeline = page.locator("ol.timeline li .kind")
    expect(timeline).to_have_text(["sent", "received", "received", "moved out", "moved in"])
    expect(page.locator("ol.timeline")).to_contain_text("max_receive_count reached")
    shot(page, "history")

    page.go_back()
    page.click(f"button[name=one][value='{message_id}']")
    expect(page.locator(".note")).to_have_text("moved 1 message(s) back")
    page.goto(base)
    page.click("#run-redrive")  # a second point on the depth chart

    page.goto(f"{base}queues/orders")
    expect(page.locator("pre.body").first).to_have_text(HOSTILE)
    shot(page, "queue")
    page.fill("form[action$='/receive'] input[name=visibility_timeout]", "600")
    page.click("#receive")
    expect(page.locator("table.messages")).to_contain_text(message_id)
    page.click("table.messages button:has-text('Delete')")
    expect(page.locator(".note")).to_have_text("deleted the message")

    page.goto(f"{base}queues/orders/messages/{message_id}")
    expect(timeline.last).to_have_text("deleted")
    assert Broker(None, root).get_queue("orders").stats().visible == 0


def test_the_overview_refreshes_itself_and_a_change_without_the_token_is_refused(console, page):
    root, base = console
    sign_in(page, base)
    queue = Broker(None, root).create_queue("live")
    expect(page.locator("#queue-rows")).to_contain_text("live", timeout=10_000)
    queue.send_batch(["a", "b", "c"])
    expect(page.locator("#queue-rows tr", has_text="live").locator("td.n").first).to_have_text(
        "3", timeout=10_000
    )  # no reload: the page's script fetched the rows again

    forged = page.request.post(
        f"{base}queues/live/purge", form={"confirm": "live"}, headers={"Origin": base[:-9]}
    )  # the session's cookie goes along, the page's token does not
    assert forged.status == 403 and "CSRF" in forged.text()
    assert queue.stats().visible == 3
    page.goto(f"{base}queues/live/purge")
    page.click("#confirm-purge")
    expect(page.locator(".note")).to_have_text("purged 3 message(s) from live")


def test_every_page_fits_a_phone(console, page):
    """Each page the console has, at 375 px wide: the sign-in, the queues, a queue with its
    messages and chart, what a receive took, a message's history, the dead letters, their move
    tasks, the purge confirmation and an error."""
    root, base = console
    broker = Broker(None, root)
    broker.create_queue("orders-with-a-rather-long-name-dlq")
    orders = broker.create_queue(
        "orders-with-a-rather-long-name",
        dead_letter_queue="orders-with-a-rather-long-name-dlq",
        max_receive_count=1,
    )
    long_line = "a-body-of-one-very-long-line-" * 12
    poison = orders.send(long_line, attributes={"customer": "x" * 120})
    orders.receive(1, visibility_timeout=0)
    broker.redrive()
    orders.send_batch([f"{long_line}{i}" for i in range(3)])
    broker.redrive()  # a second point on the depth chart
    name = orders.name
    page.set_viewport_size(PHONE)

    page.goto(base)
    fits_a_phone(page, "signin")
    sign_in(page, base)
    fits_a_phone(page, "queues")
    page.goto(f"{base}queues/{name}")
    expect(page.locator("table.messages tbody tr")).to_have_count(3)
    fits_a_phone(page, "queue")
    messages = page.locator("table.messages").locator("xpath=..")
    assert messages.evaluate("box => box.scrollWidth > box.clientWidth")  # it scrolls, in its box
    page.fill("form[action$='/receive'] input[name=max_messages]", "2")
    page.click("#receive")
    expect(page.locator("table.messages tbody tr")).to_have_count(2)
    fits_a_phone(page, "received")
    page.goto(f"{base}queues/{name}/messages/{poison}")
    expect(page.locator("ol.timeline li")).to_have_count(4)
    fits_a_phone(page, "message")
    page.goto(f"{base}queues/{name}-dlq/dead-letters")
    expect(page.locator("table.messages")).to_contain_text(poison)
    fits_a_phone(page, "dead-letters")
    page.click("#move-all")
    expect(page.locator("#move-tasks .task")).to_contain_text("back to their sources")
    fits_a_phone(page, "tasks")
    page.goto(f"{base}queues/{name}/purge")
    fits_a_phone(page, "purge")
    page.goto(f"{base}queues/nowhere")
    expect(page.locator(".error")).to_contain_text("does not exist")
    fits_a_phone(page, "error")
