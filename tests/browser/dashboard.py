#!/usr/bin/env python3
"""The dashboard in a real headless Chromium (Playwright driving Debian's
chromium), run by tests/it/dashboard.rs against `stormwatch serve`.

    dashboard.py demo    --base http://127.0.0.1:PORT --shots DIR
    dashboard.py hostile --base http://127.0.0.1:PORT --shots DIR --tool NAME...
    dashboard.py login   --base http://127.0.0.1:PORT --shots DIR --token TOKEN

`demo` walks the seeds' story on the demo data: the overview's volume per
tool, with its legend, shows search_flights' July 29 failures; the tool page
marks the three days the spike rule flagged; the search_flights retry-storm
signal leads to an evidence trace with 15 attempts and no backoff; muting
from the page changes the state; the overview's incidents list leads to the
search_flights incident (cause, impact, remedy, timeline, members and why
each joined, evidence traces), whose members link back to it; the overview
links to the coverage page, which has a row per service and scope. `hostile`
opens every page of tools with hostile names (and every incident of them)
and checks nothing ran: no dialog, no injected element, the name shown as text.
`login` (a server with --api-token) is sent to sign in, signs in, and checks
the session cookie's attributes. Every mode fails on any console error, page
error or Content-Security-Policy violation (a `securitypolicyviolation`
event or a console line naming the policy), after checking that the policy
is in force (an inline script and an inline style are refused, and the
violations seen) and that a page of another origin cannot frame the
dashboard (a page on another port with an iframe of it: the frame is
blocked, while an iframe of that page's own origin loads). Exit status 0
means all held; failures are printed one per line.
"""

import argparse
import http.server
import os
import sys
import threading
import time
import urllib.parse

from playwright.sync_api import sync_playwright

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def browser(p):
    return p.chromium.launch(
        executable_path=os.environ.get("STORMWATCH_CHROMIUM", "/usr/bin/chromium"),
        headless=True,
        args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    )


# Reports every CSP violation of a document to the test (init scripts and
# bindings are the browser's own, outside the page's policy).
LISTEN = """document.addEventListener('securitypolicyviolation', e =>
  window.__stormwatchCsp(`${e.violatedDirective} refused ${e.blockedURI || 'inline'} in ${document.URL}`));"""


def csp_listener(page, into, prefix=""):
    page.expose_function("__stormwatchCsp", lambda v: into.append(prefix + v))
    page.add_init_script(LISTEN)


def console_error(m):
    return m.type == "error" or "Content Security Policy" in m.text


def watch(page):
    errors = []
    csp_listener(page, errors, "CSP violation: ")
    page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if console_error(m) else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("response", lambda r: errors.append(f"HTTP {r.status} for {r.url}") if r.status >= 400 else None)
    page.on("dialog", lambda d: (errors.append(f"a dialog opened: {d.message}"), d.dismiss()))
    return errors


def demo(page, base, shots):
    page.goto(base + "/")
    page.wait_for_load_state("networkidle")
    peak = page.locator("#peak .err").inner_text()
    check(peak == "2026-07-29", f"the overview names the worst day: got {peak!r}")
    # The volume per tool: a legend naming the demo's tools, busiest first,
    # and search_flights' failed calls (the first band's darker shade), with
    # July 29's standing out.
    legend = page.locator("#volume .legend.tools")
    check(legend.is_visible(), "the volume chart has a visible legend")
    names = legend.locator("span.tool b").all_inner_texts()
    check(names[:1] == ["search_flights"] and {"quote_price", "book_flight"} <= set(names),
          f"the legend names each tool, busiest first: {names!r}")
    dark = '#volume svg rect[fill="#003355"]'
    bars = page.eval_on_selector_all(
        dark, "els => els.map(e => [parseFloat(e.getAttribute('x')), parseFloat(e.getAttribute('height'))])")
    check(len(bars) >= 3, f"search_flights' failed calls are drawn in its darker shade: {len(bars)}")
    heights = sorted((h for _, h in bars), reverse=True)
    check(len(heights) >= 2 and heights[0] >= 5 * heights[1],
          f"one day's failures (July 29's 53) stand out at a glance: {heights[:3]}")
    check(page.locator("#tools a", has_text="search_flights").count() == 1, "search_flights is in the tools table")
    page.screenshot(path=os.path.join(shots, "overview.png"), full_page=True)

    page.goto(base + "/tools/search_flights")
    names = page.locator("#classes").inner_text()
    check("unavailable" in names and "503" in names, f"the tool page lists each class with its raw names: {names!r}")
    check(page.locator("#tool-rate svg").count() == 1, "the error-rate chart against the rule's threshold")
    # The days the rule flagged: marked on the chart, visible, and in text.
    flags = page.locator("#tool-rate svg path.flag")
    days = flags.evaluate_all("els => els.map(e => e.dataset.day)")
    check(days == ["2026-07-29", "2026-08-04", "2026-08-05"], f"the flagged days are marked: {days!r}")
    check(all(flags.nth(i).is_visible() for i in range(flags.count())), "the flag markers are visible")
    said = page.locator("#flagged-days").inner_text()
    check(all(d in said for d in ["2026-07-29", "2026-08-04", "2026-08-05"]), f"the flagged days in text: {said!r}")
    label = page.locator("#tool-rate svg").get_attribute("aria-label") or ""
    check("2026-08-04" in label, f"the chart's accessible label names the flagged days: {label!r}")
    outcomes = page.locator("#outcomes").inner_text()
    check("2026-07-29" in outcomes, f"the retry outcomes by day, with July 29's wasted retries: {outcomes[:200]!r}")
    page.screenshot(path=os.path.join(shots, "tool.png"), full_page=True)

    page.goto(base + "/signals?kind=retry_storm")
    row = page.locator("tr", has_text="search_flights").first
    row.locator("a").first.click()
    page.wait_for_load_state("networkidle")
    title = page.locator("h1").inner_text()
    check("Retry storm: search_flights" in title, f"the signal page: {title!r}")
    evidence = page.locator("#evidence a.trace")
    check(evidence.count() >= 4, f"the storms' evidence traces: {evidence.count()}")
    page.screenshot(path=os.path.join(shots, "signal.png"), full_page=True)
    signal_url = page.url

    evidence.first.click()
    page.wait_for_load_state("networkidle")
    attempts = page.locator('tr.span[data-verdict="failed"], tr.span[data-verdict="wasted"], tr.span[data-verdict="rescued"]').count()
    check(attempts == 15, f"the evidence trace shows 15 attempts: {attempts}")
    gaps = page.locator("tr.gap", has_text="no_backoff").count()
    check(gaps == 14, f"14 gaps labelled no_backoff: {gaps}")
    wasted = page.locator('tr.span[data-verdict="wasted"] .bar.wasted').count()
    check(wasted == 14, f"14 retries drawn red as wasted: {wasted}")
    # Attributes on click.
    page.locator("tr.span summary").nth(1).click()
    check(page.locator("tr.span details[open] pre").count() == 1, "a span's attributes open on click")
    page.screenshot(path=os.path.join(shots, "trace.png"), full_page=True)

    page.goto(signal_url)
    page.locator("#mute").click()
    page.wait_for_load_state("networkidle")
    state = page.locator("#state").inner_text()
    check(state == "muted", f"muting from the page: state {state!r}")
    page.goto(base + "/")
    page.wait_for_load_state("networkidle")
    open_now = page.locator("#open-signals").inner_text()
    check("Retry storm: search_flights" not in open_now, "the overview no longer lists the muted signal as open")
    page.goto(signal_url)
    page.locator("#unmute").click()
    page.wait_for_load_state("networkidle")
    state = page.locator("#state").inner_text()
    check(state != "muted", f"unmuting from the page: state {state!r}")
    page.screenshot(path=os.path.join(shots, "signal-after-mute.png"), full_page=True)

    incidents(page, base, shots)

    # What stormwatch can see: linked from the overview, a row per service
    # and scope, each gap with its fix.
    page.goto(base + "/")
    page.locator("#coverage-link a").click()
    page.wait_for_load_state("networkidle")
    check(page.url.endswith("/coverage"), f"the overview links to the coverage page: {page.url}")
    rows = page.locator("#coverage tr").count() - 1
    check(rows >= 1, f"the coverage page has a row per service and scope: {rows}")
    check(page.locator("header a[href='/coverage']").count() == 1, "every page's header links to the coverage page")
    page.screenshot(path=os.path.join(shots, "coverage.png"), full_page=True)


def incidents(page, base, shots):
    """What is broken, from the overview: its incidents list, open ones
    first; the search_flights incident's page (cause, impact, the remedy's
    three answers, the timeline, its two members with why each joined, its
    evidence traces), a member's page naming the incident, an evidence trace
    opening the trace view; /incidents and its filters."""
    page.goto(base + "/")
    page.wait_for_load_state("networkidle")
    section = page.locator("#incidents")
    check(section.is_visible(), "the overview has an incidents section")
    rows = section.locator("table.incidents tr").count() - 1
    check(rows >= 2, f"the overview lists the demo's open incidents: {rows}")
    states = section.locator("table.incidents td:nth-child(2)").all_inner_texts()
    check(states and all(s == "open" for s in states), f"open incidents, open first: {states!r}")
    check(page.locator("header a[href='/incidents']").count() == 1, "every page's header links to the incidents")
    check(section.locator("a[href='/incidents?state=all']").count() == 1, "the resolved ones are behind a link")
    row = section.locator("tr", has_text="search_flights failing since").first
    check(row.locator("td").nth(4).inner_text() == "2", "the search_flights incident has two signals")
    page.screenshot(path=os.path.join(shots, "incidents-overview.png"), full_page=True)
    row.locator("a").first.click()
    page.wait_for_load_state("networkidle")
    check(urllib.parse.urlparse(page.url).path.startswith("/incidents/INC-"), f"the incident's page: {page.url}")
    incident_url = page.url
    title = page.locator("h1").inner_text()
    check(title.startswith("search_flights failing since 2026-07-29"), f"the incident's title: {title!r}")
    check(page.locator("#state").inner_text() == "open", "its state")
    check("one tool, search_flights" in page.locator("#cause").inner_text(), "its cause in words")
    check(page.locator("#impact .counter").count() == 6, "its impact: turns, sessions, calls, failed, wasted")
    check(page.locator("#remedy dd").count() == 3, "the lead member's remedy: three answers")
    check(page.locator("#timeline tr").count() >= 4, "a timeline: first finding, joined, peak, last finding")
    members = page.locator("#members tr")
    check(members.count() - 1 == 2, f"two members: {members.count() - 1}")
    reasons = page.locator("#members td:nth-child(6)").all_inner_texts()
    check(reasons[:1] == ["first finding"] and len(reasons) == 2 and reasons[1].startswith("same tool search_flights as SW-"),
          f"why each member joined: {reasons!r}")
    check(page.locator("#evidence a.trace").count() >= 4, "its evidence traces, linked")
    page.screenshot(path=os.path.join(shots, "incident.png"), full_page=True)
    # A member's page names the incident, linked back.
    page.locator("#members tr", has_text="retry_storm").locator("a").first.click()
    page.wait_for_load_state("networkidle")
    part = page.locator("#incident")
    check(part.count() == 1 and part.inner_text().startswith("Part of INC-"), "the member's page names its incident")
    part.locator("a").first.click()
    page.wait_for_load_state("networkidle")
    check(page.url == incident_url, f"and links back to it: {page.url}")
    # An evidence trace opens the trace view.
    page.locator("#evidence a.trace").first.click()
    page.wait_for_load_state("networkidle")
    check(page.locator("#waterfall tr.span").count() > 0, f"an evidence trace opens the trace view: {page.url}")
    # The list, and its filters.
    page.goto(base + "/incidents")
    listed = page.locator("#incident-list tr").count() - 1
    check(listed == rows, f"/incidents lists the same open incidents: {listed} vs {rows}")
    page.goto(base + "/incidents?state=resolved")
    check(page.locator("#no-incidents").count() == 1, "no resolved incidents in the demo")
    page.screenshot(path=os.path.join(shots, "incidents.png"), full_page=True)


def hostile(page, base, shots, tools):
    page.goto(base + "/")
    page.wait_for_load_state("networkidle")
    for t in tools:
        check(page.get_by_text(t, exact=True).count() >= 1, f"the overview shows {t!r} as text")
    page.screenshot(path=os.path.join(shots, "hostile-overview.png"), full_page=True)
    urls = ["/", "/signals", "/api/tools", "/coverage", "/api/coverage", "/incidents?state=all"]
    page.goto(base + "/incidents?state=all")
    links = page.locator("#incident-list a").evaluate_all("els => els.map(e => e.getAttribute('href'))")
    check(len(links) >= 1, f"the storms of the hostile tools are incidents: {links!r}")
    if links:
        page.goto(base + links[0])
        title = page.locator("h1").inner_text()
        check(any(t in title for t in tools), f"the incident's title names a tool as text: {title!r}")
        page.screenshot(path=os.path.join(shots, "hostile-incident.png"), full_page=True)
    urls += links
    for t in tools:
        q = urllib.parse.quote(t, safe="")
        urls += [f"/tools/{q}", f"/charts/tools/{q}/daily.svg"]
    for u in urls:
        page.goto(base + u)
        page.wait_for_load_state("networkidle")
        check(page.evaluate("document.querySelectorAll('img[onerror], script:not([src]), [style]').length")
              == 0, f"no injected element, inline script or inline style on {u}")
        check(page.evaluate("window.__pwned === undefined"), f"no injected script ran on {u}")
    page.goto(base + "/tools/" + urllib.parse.quote(tools[0], safe=""))
    check(page.locator("h1 code").inner_text() == tools[0], "the tool page names the tool as text")
    page.screenshot(path=os.path.join(shots, "hostile-tool.png"), full_page=True)


def login(page, base, shots, token):
    page.goto(base + "/signals?state=open")
    check(urllib.parse.urlparse(page.url).path == "/login", f"a page without a session goes to sign in: {page.url}")
    page.screenshot(path=os.path.join(shots, "login.png"), full_page=True)
    page.fill("input[name=token]", token)
    page.click("button[type=submit]")
    page.wait_for_load_state("networkidle")
    check(urllib.parse.urlparse(page.url).path == "/signals", f"signed in, back where it was going: {page.url}")
    check(page.locator("h1").inner_text() == "Signals", "the signals page, signed in")
    cookies = [c for c in page.context.cookies() if c["name"] == "stormwatch_session"]
    check(len(cookies) == 1, f"one session cookie: {cookies!r}")
    if cookies:
        c = cookies[0]
        check(token not in c["value"], "the cookie does not hold the token")
        check(c["httpOnly"] and c["sameSite"] == "Lax", f"HttpOnly, SameSite=Lax: {c!r}")
        left = c["expires"] - time.time()
        check(11.9 * 3600 < left <= 12 * 3600 + 5, f"the cookie expires in 12 h: {left:.0f} s")
    page.goto(base + "/")
    page.wait_for_load_state("networkidle")
    check(page.locator("#peak .err").count() == 1, "the overview, signed in")
    page.context.clear_cookies()
    page.goto(base + "/")
    check(urllib.parse.urlparse(page.url).path == "/login", "without the cookie, signed out again")


def csp_in_force(b, base):
    """An inline script and an inline style on a dashboard page are refused,
    and the listener every walk relies on sees both violations."""
    page = b.new_page()
    seen = []
    csp_listener(page, seen)
    page.goto(base + "/")
    page.wait_for_load_state("networkidle")
    page.evaluate("""() => {
        const s = document.createElement('script');
        s.textContent = 'window.__inline = 1';
        document.body.appendChild(s);
        document.body.setAttribute('style', 'outline: 3px solid red');
    }""")
    page.wait_for_timeout(300)
    check(page.evaluate("window.__inline === undefined"), "an inline script does not run")
    check(page.evaluate("getComputedStyle(document.body).outlineStyle") != "solid", "an inline style is not applied")
    check(any(v.startswith("script-src") for v in seen), f"the refused script is reported: {seen!r}")
    check(any(v.startswith("style-src") for v in seen), f"the refused style is reported: {seen!r}")
    page.close()


class Framing(http.server.BaseHTTPRequestHandler):
    """Another origin: a page that frames the dashboard, and a page of its
    own (no headers) that it frames as the control."""
    target = ""

    def do_GET(self):
        if self.path == "/own.html":
            body = b"<!doctype html><title>own</title><p id=own>framed fine</p>"
        else:
            body = (f'<!doctype html><title>framing</title>'
                    f'<iframe name="dash" src="{self.target}/signals" width=600 height=300></iframe>'
                    f'<iframe name="own" src="/own.html" width=300 height=100></iframe>').encode()
        self.send_response(200)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def not_framed(b, base, shots):
    Framing.target = base
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Framing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    page = b.new_page()
    said = []
    page.on("console", lambda m: said.append(m.text))
    try:
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/")
        page.wait_for_load_state("load")
        page.wait_for_timeout(500)
        own = page.frame(name="own")
        check(own is not None and own.locator("#own").count() == 1, "the control frame (the page's own origin) loads")
        dash = page.frame(name="dash")
        check(dash is not None, "the dashboard's frame exists")
        if dash is not None:
            framed = dash.url.startswith(base) and dash.locator("header, h1, form").count() > 0
            check(not framed, f"another origin cannot frame the dashboard (frame at {dash.url})")
        check(any("frame-ancestors" in t or "X-Frame-Options" in t for t in said),
              f"the browser says why the frame was refused: {said!r}")
        page.screenshot(path=os.path.join(shots, "framed.png"), full_page=True)
    finally:
        page.close()
        server.shutdown()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["demo", "hostile", "login"])
    ap.add_argument("--base", required=True)
    ap.add_argument("--shots", required=True)
    ap.add_argument("--tool", action="append", default=[])
    ap.add_argument("--token", default="")
    a = ap.parse_args()
    os.makedirs(a.shots, exist_ok=True)
    with sync_playwright() as p:
        b = browser(p)
        page = b.new_page(viewport={"width": 1280, "height": 900})
        errors = watch(page)
        try:
            if a.mode != "login":
                csp_in_force(b, a.base)
                not_framed(b, a.base, a.shots)
            if a.mode == "demo":
                demo(page, a.base, a.shots)
            elif a.mode == "login":
                login(page, a.base, a.shots, a.token)
            else:
                hostile(page, a.base, a.shots, a.tool)
        except Exception as e:  # a missing element is a failure, not a crash
            failures.append(f"{type(e).__name__}: {e}")
            print("FAIL:", failures[-1], flush=True)
            page.screenshot(path=os.path.join(a.shots, f"{a.mode}-failure.png"), full_page=True)
        finally:
            b.close()
        for e in errors:
            check(False, e)
    print(f"{a.mode}: {len(failures)} failure(s); screenshots in {a.shots}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
