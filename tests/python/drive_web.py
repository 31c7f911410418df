"""Drives the tau web client in a real Chromium (the distribution's, through Playwright) and
checks what a person would see, and the browser's side of the advisories (no secret in the page,
its storage or any URL it requests; no address taken from its own URL). Arguments: the web origin, the laptop's and the phone's pairing
links, the Chromium executable, the `tau` binary (run with this process's environment, the test's
sandbox). Prints one JSON report on success; any failed check exits non-zero with its reason.
"""
import http.server
import json
import os
import re
import subprocess
import sys
import threading
from urllib.parse import urlsplit

from playwright.sync_api import expect, sync_playwright

ORIGIN, LAPTOP_URL, PHONE_URL, CHROMIUM, TAU = sys.argv[1:6]
TIMEOUT = 20000
report = {}
# Every URL the tau pages ask for (navigations, scripts, fetches, streams).
requested = []
with open(os.path.join(os.environ["TAU_DATA_DIR"], "hub", "token")) as token_file:
    HUB_TOKEN = token_file.read().strip()


def check(condition, what):
    if not condition:
        raise SystemExit("FAILED: " + what)


def other_origin_server():
    """A page on another loopback port: same site, other origin."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"<!doctype html><title>elsewhere</title>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# Notes (in page time) when the first approval card appears and when the first click and key after
# it arrive.
EARLY_INPUT_WATCH = """() => {
    const early = window.tauEarly = {};
    new MutationObserver(() => {
        if (early.shown_at === undefined && document.querySelector('.card')) early.shown_at = performance.now();
    }).observe(document.getElementById('log'), {childList: true});
    document.addEventListener('click', (e) => {
        if (early.shown_at !== undefined && early.click_at === undefined) { early.click_at = e.timeStamp; early.click_on = e.target.className; }
    }, true);
    document.addEventListener('keydown', (e) => {
        if (early.shown_at !== undefined && early.key_at === undefined) { early.key_at = e.timeStamp; early.key = e.key; }
    }, true);
}"""


def open_card(page):
    return page.wait_for_selector(".card:not(.decided)", timeout=TIMEOUT)


def send(page, text):
    page.fill("#input", text)
    page.press("#input", "Enter")


def tool_lines(page):
    return page.eval_on_selector_all(
        ".line.tool", "els => els.map(e => e.textContent).filter(t => t.includes('approved)'))")


with sync_playwright() as p:
    port = ORIGIN.rsplit(":", 1)[1]
    browser = p.chromium.launch(
        executable_path=CHROMIUM,
        args=["--no-sandbox", "--host-resolver-rules=MAP evil.example 127.0.0.1"])

    # Pair: the link enrolls this browser and leaves the address bar.
    laptop_context = browser.new_context()
    laptop = laptop_context.new_page()
    laptop.on("request", lambda request: requested.append(request.url))
    laptop.goto(LAPTOP_URL)
    laptop.wait_for_selector("#input", timeout=TIMEOUT)
    check("pair=" not in laptop.url, "the code left the address bar: " + laptop.url)
    report["paired"] = True

    # Advisory CVE-2026-25253 (a token sent where a URL parameter said): no secret in the page,
    # its storage or any URL it asks for, and no address taken from the page's own URL.
    cookies = [c for c in laptop_context.cookies() if c["name"] == "tau_web"]
    check(len(cookies) == 1 and cookies[0]["httpOnly"], "one HttpOnly session cookie: %r" % cookies)
    secrets = {"cookie": cookies[0]["value"], "hub token": HUB_TOKEN,
               "pairing code": LAPTOP_URL.split("#pair=", 1)[1]}
    seen = laptop.evaluate("""() => ({
        cookie: document.cookie,
        local: localStorage.length,
        session: sessionStorage.length,
        html: document.documentElement.outerHTML,
    })""")
    check(seen["cookie"] == "", "the page reads a cookie: %r" % seen["cookie"])
    check(seen["local"] == 0 and seen["session"] == 0, "the page keeps something in web storage")
    for name, secret in secrets.items():
        check(secret not in seen["html"], "the page shows the " + name)
    lured = laptop_context.new_page()
    lured.on("request", lambda request: requested.append(request.url))
    lured.goto(ORIGIN + "/?gatewayUrl=http%3A%2F%2Fevil.example%3A" + ORIGIN.rsplit(":", 1)[1]
               + "&hub=evil.example&token=" + HUB_TOKEN[:8])
    lured.wait_for_selector("#input", timeout=TIMEOUT)
    lured.close()

    # The link works once: another browser profile cannot use it again.
    again = browser.new_context().new_page()
    again.goto(LAPTOP_URL)
    again.locator("#notice").filter(has_text=re.compile(r"\S")).wait_for(timeout=TIMEOUT)
    check(again.query_selector("#input") is None, "a used link enrolled a second browser")
    report["link_works_once"] = again.text_content("#notice")

    # Chat: a streamed reply.
    send(laptop, "hello")
    laptop.wait_for_selector(".line.assistant", timeout=TIMEOUT)
    report["reply"] = laptop.text_content(".line.assistant")

    # The routine the test fired, with its last firing (the list refreshes when a turn ends), and
    # the nodes (none paired).
    firing = laptop.wait_for_selector(
        "#routines li[data-routine='clock'] .firing[data-outcome='succeeded']", timeout=TIMEOUT)
    report["routine"] = laptop.text_content("#routines li[data-routine='clock']")
    report["routine_firing"] = firing.text_content()
    report["nodes"] = laptop.text_content("#nodes")

    # An approval card: a click and a `y` within 0.5 s do nothing; Enter (focus on Reject) rejects.
    # The page notes when the card appeared and when each input arrived, so the check proves the
    # inputs came inside the arming window. The click is forced: Playwright would otherwise wait
    # for the button to lose aria-disabled (that is, for the arming to end) before clicking.
    laptop.evaluate(EARLY_INPUT_WATCH)
    send(laptop, "turn on the lamp")
    card = open_card(laptop)
    laptop.click(".card:not(.decided) .approve", force=True)
    laptop.keyboard.press("y")
    early = laptop.evaluate("window.tauEarly")
    check(early.get("click_on") == "approve", "the early click reached the Approve button: %r" % early)
    check(early.get("key") == "y", "the early key reached the page: %r" % early)
    late = max(early["click_at"], early["key_at"]) - early["shown_at"]
    check(late < 500, "the early click and key came within 0.5 s of the card (%d ms)" % late)
    seen = laptop.evaluate("""(card) => ({
        resolution: card.getAttribute('data-resolution'),
        armed: card.classList.contains('armed'),
        arming_label: card.querySelector('.approve').textContent,
        focus_on_reject: document.activeElement.classList.contains('reject'),
        since_shown: performance.now() - window.tauEarly.shown_at,
    })""", card)
    check(seen["resolution"] is None, "an early click or key decided the card: %r" % seen)
    check(seen["focus_on_reject"], "focus stayed on Reject after the early click: %r" % seen)
    if seen["since_shown"] < 450:
        check(not seen["armed"], "the card armed within 0.5 s: %r" % seen)
        check("(" in seen["arming_label"], "the Approve button says it is arming: %r" % seen)
    report["early_input_ms"] = round(late)
    laptop.wait_for_selector(".card.armed:not(.decided)", timeout=TIMEOUT)
    laptop.keyboard.press("Enter")
    laptop.wait_for_selector(".card[data-resolution='rejected']", timeout=TIMEOUT)
    check(not tool_lines(laptop), "a rejected tool ran")
    report["enter_rejects"] = True

    # The phone, on the same session (the most recent of channel web), at a phone's size.
    phone_context = browser.new_context(
        viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    phone = phone_context.new_page()
    phone.on("request", lambda request: requested.append(request.url))
    phone.goto(PHONE_URL)
    phone.wait_for_selector("#input", timeout=TIMEOUT)
    phone.wait_for_selector(".line.assistant", timeout=TIMEOUT)
    width = phone.evaluate("document.documentElement.scrollWidth")
    check(width <= 390, "the page fits a phone's width (scrollWidth %s)" % width)
    report["phone_width"] = width

    # Approve after arming runs the tool once; the phone sees it decided elsewhere.
    send(laptop, "turn on the lamp")
    open_card(laptop)
    phone_card = open_card(phone)
    laptop.wait_for_selector(".card.armed:not(.decided)", timeout=TIMEOUT)
    laptop.click(".card.armed:not(.decided) .approve")
    laptop.wait_for_selector(".card[data-resolution='approved']", timeout=TIMEOUT)
    phone.wait_for_selector(".card[data-decided='elsewhere']", timeout=TIMEOUT)
    report["decided_elsewhere"] = phone.text_content(".card[data-decided='elsewhere'] .verdict")
    laptop.locator(".line.tool", has_text="success (approved)").first.wait_for(timeout=TIMEOUT)
    ran = [t for t in tool_lines(laptop) if "success (approved)" in t]
    check(len(ran) == 1, "the tool ran once: %r" % ran)

    # On the phone: chat and approve a tier-2 call with a tap once the card is armed.
    send(phone, "turn on the lamp")
    open_card(phone)
    phone.wait_for_selector(".card.armed:not(.decided)", timeout=TIMEOUT)
    phone.tap(".card.armed:not(.decided) .approve")
    phone.wait_for_selector(".card[data-resolution='approved'][data-decided='here']", timeout=TIMEOUT)
    expect(phone.locator(".line.tool", has_text="success (approved)")).to_have_count(2, timeout=TIMEOUT)
    width = phone.evaluate("document.documentElement.scrollWidth")
    check(width <= 390, "the page with cards fits a phone's width (scrollWidth %s)" % width)
    report["phone_approved"] = True

    # A page on another origin can neither read nor act, even from the same site.
    other = other_origin_server()
    # Same browser profile as the laptop, so its cookie would be sent if anything allowed it.
    evil = laptop.context.new_page()
    evil.goto("http://127.0.0.1:%d/" % other.server_address[1])
    session = laptop.evaluate("document.querySelector('#sessions li.current').dataset.session")
    users_before = laptop.eval_on_selector_all(".line.user", "els => els.length")
    outcome = evil.evaluate("""async ([origin, session]) => {
        const out = {};
        try { await fetch(origin + '/api/sessions', {credentials: 'include'}); out.read = 'succeeded'; }
        catch (e) { out.read = 'failed'; }
        const body = JSON.stringify({session_id: session, text: 'hello from elsewhere'});
        const sent = await fetch(origin + '/api/turn', {method: 'POST', mode: 'no-cors', credentials: 'include',
            headers: {'Content-Type': 'text/plain'}, body}).then(() => 'sent', () => 'failed');
        out.post = sent;
        out.stream = await new Promise((resolve) => {
            const source = new EventSource(origin + '/api/events?session=' + session, {withCredentials: true});
            source.onopen = () => { source.close(); resolve('opened'); };
            source.onerror = () => { source.close(); resolve('refused'); };
        });
        return out;
    }""", [ORIGIN, session])
    check(outcome["read"] == "failed", "another origin read the API: %r" % outcome)
    check(outcome["stream"] == "refused", "another origin opened the stream: %r" % outcome)
    laptop.wait_for_timeout(500)
    users_after = laptop.eval_on_selector_all(".line.user", "els => els.length")
    check(users_after == users_before, "another origin started a turn")
    report["other_origin"] = outcome
    other.shutdown()

    # DNS rebinding: a foreign name that resolves to the hub gets 403.
    rebound = browser.new_context().new_page()
    answer = rebound.goto("http://evil.example:%s/" % port)
    check(answer.status == 403, "a foreign Host got %s" % answer.status)
    report["foreign_host"] = answer.status

    # Revoke ends the phone's stream at once.
    subprocess.run([TAU, "web", "revoke", "phone"], check=True, capture_output=True)
    phone.locator("#notice").filter(has_text=re.compile(r"\S")).wait_for(timeout=TIMEOUT)
    phone.locator("#input").wait_for(state="detached", timeout=TIMEOUT)
    report["revoked"] = phone.text_content("#notice")

    browser.close()

# Every URL the enrolled pages asked for was the hub's own origin, and none carried a secret (the
# pairing link's code rides in the fragment, which never leaves the browser).
own = urlsplit(ORIGIN)
for url in requested:
    parts = urlsplit(url)
    check((parts.scheme, parts.netloc) == (own.scheme, own.netloc), "a request elsewhere: " + url)
    for name, secret in secrets.items():
        check(secret not in parts.path + "?" + parts.query, "the %s in a URL: %s" % (name, url))
report["requests"] = len(requested)
report["secrets_in_urls"] = 0

print(json.dumps(report))
