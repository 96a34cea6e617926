"""Drives Debian's headless Chromium through botgate's dashboard for the Rust browser
tests (host/tests/dashboard): each command opens a page, acts as a website owner
would (keyboard first), and prints what it saw as one JSON object on stdout. The
Rust test starts the gateway and the partner's panel, and judges what is printed.

    dashboard.py edit PANEL_URL SCREENSHOT
    dashboard.py refused PANEL_URL
    dashboard.py problem PAGE_URL
    dashboard.py statistics PANEL_URL SCREENSHOT
    dashboard.py events PANEL_URL SCREENSHOT
    dashboard.py drawn PANEL_URL SCREENSHOT
    dashboard.py reused PANEL_URL OTHER_PANEL_URL
    dashboard.py screenshot PAGE_URL SCREENSHOT
"""

import json
import sys

from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags Chromium keeps calling Google's hosts.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
CONTROLS = "input, select, textarea, button, a[href]"


def by_id(frame, ident):
    return frame.locator(f'[id="{ident}"]')


def dashboard_frame(page):
    """The panel's dashboard frame, once its script has drawn a page."""
    page.wait_for_selector("iframe")
    frame = page.frame_locator("iframe")
    frame.locator("#app section, #app .summary, #app table").first.wait_for(timeout=30000)
    return next(f for f in page.frames if f != page.main_frame)


def accessibility(frame):
    """Controls without a label, and controls the Tab key never reaches."""
    unlabelled = frame.evaluate(
        """(selector) => [...document.querySelectorAll(selector)]
            .filter((el) => !el.hidden && el.offsetParent !== null)
            .filter((el) => {
                if (el.labels && el.labels.length) return false;
                if (el.getAttribute('aria-label') || el.getAttribute('aria-labelledby')) return false;
                if ((el.tagName === 'BUTTON' || el.tagName === 'A') && el.textContent.trim()) return false;
                return true;
            })
            .map((el) => el.outerHTML.slice(0, 120))""",
        CONTROLS,
    )
    controls = frame.evaluate(
        """(selector) => [...document.querySelectorAll(selector)]
            .filter((el) => !el.hidden && !el.disabled && el.offsetParent !== null)
            .map((el, i) => { el.dataset.probe = String(i); return String(i); })""",
        CONTROLS,
    )
    frame.evaluate("() => document.querySelector('nav.pages a').focus()")
    reached = set()
    page = frame.page
    for _ in range(len(controls) * 2 + 10):
        probe = frame.evaluate("() => document.activeElement && document.activeElement.dataset.probe")
        if probe is not None:
            reached.add(probe)
        page.keyboard.press("Tab")
    return unlabelled, sorted(set(controls) - reached, key=int)


def saved_text(frame):
    frame.locator(".saved").filter(has_text=frame.evaluate(
        "() => JSON.parse(document.getElementById('strings').textContent).saved"
    )).wait_for(timeout=10000)
    return frame.locator(".saved").inner_text()


def edit(page, panel, screenshot):
    page.goto(panel)
    frame = dashboard_frame(page)
    seen = {"frame_url": frame.url}
    seen["title"] = frame.title()
    seen["unlabelled"], seen["unreachable"] = accessibility(frame)
    # A category's action, chosen from the keyboard.
    humans = by_id(frame, "field-settings.rules.humans")
    humans.focus()
    humans.select_option("deny")
    seen["after_rule"] = saved_text(frame)
    frame.evaluate("() => { document.querySelector('.saved').textContent = ''; }")
    # A rule set switched on with the space bar.
    wordpress = by_id(frame, "field-settings.rulesets.wordpress")
    wordpress.focus()
    page.keyboard.press("Space")
    seen["after_switch"] = saved_text(frame)
    seen["wordpress_checked"] = wordpress.is_checked()
    # An operator's own rule set, on for the website: its name and a general help.
    own = by_id(frame, "field-settings.rulesets.template")
    seen["own_ruleset_checked"] = own.is_checked()
    seen["own_ruleset_label"] = frame.locator('label[for="field-settings.rulesets.template"]').inner_text()
    seen["own_ruleset_help"] = by_id(frame, "field-settings.rulesets.template-help").inner_text()
    # A refused change: the custom certificate without one; the reason beside it.
    mode = by_id(frame, "field-settings.loadbalancer.certs_issuer")
    mode.select_option("custom")
    error = by_id(frame, "field-settings.loadbalancer.certs_issuer-error")
    error.wait_for(state="visible", timeout=10000)
    seen["refusal"] = error.inner_text()
    seen["refused_value"] = mode.input_value()
    seen["described_by"] = mode.get_attribute("aria-describedby")
    page.screenshot(path=screenshot, full_page=True)
    return seen


def refused(page, panel):
    messages = []
    page.on("console", lambda message: messages.append(message.text))
    with page.expect_console_message(lambda message: "frame-ancestors" in message.text, timeout=15000):
        page.goto(panel)
    page.wait_for_selector("iframe")
    child = [f for f in page.frames if f != page.main_frame]
    drawn = False
    if child:
        try:
            drawn = child[0].locator("#app").count() > 0
        except Exception:  # The error page of a blocked frame has no document to ask.
            drawn = False
    return {
        "frame_url": child[0].url if child else None,
        "drawn": drawn,
        "console": messages,
    }


def problem(page, url):
    page.goto(url)
    heading = page.locator(".problem h2")
    heading.wait_for(timeout=30000)
    return {"url": page.url, "heading": heading.inner_text(), "role": page.locator(".problem").get_attribute("role")}


def statistics(page, panel, screenshot):
    page.goto(panel)
    frame = dashboard_frame(page)
    frame.locator("canvas").first.wait_for(timeout=30000)
    seen = {
        "summary": frame.locator(".summary dd").all_inner_texts(),
        "tables": frame.locator("table.toplist").all_inner_texts(),
        "charts": frame.locator("canvas").count(),
    }
    seen["unlabelled"], seen["unreachable"] = accessibility(frame)
    page.screenshot(path=screenshot, full_page=True)
    return seen


def events(page, panel, screenshot):
    page.goto(panel)
    frame = dashboard_frame(page)
    rows = frame.locator("table.events tbody tr")
    seen = {"rows": rows.all_inner_texts()}
    seen["unlabelled"], seen["unreachable"] = accessibility(frame)
    page.screenshot(path=screenshot, full_page=True)
    by_id(frame, "filter-action").select_option("deny")
    frame.wait_for_function(
        """() => {
            const cells = [...document.querySelectorAll('table.events td.outcome')];
            return cells.length > 0 && cells.every((td) => td.classList.contains('outcome-deny'));
        }"""
    )
    frame.wait_for_timeout(300)
    seen["denied"] = rows.all_inner_texts()
    seen["denied_outcomes"] = frame.locator("table.events tbody td.outcome").all_inner_texts()
    return seen


def drawn(page, panel, screenshot):
    page.goto(panel)
    frame = dashboard_frame(page)
    page.screenshot(path=screenshot, full_page=True)
    return {"frame_url": frame.url, "text": frame.locator("#app").inner_text()}


def reused(page, panel, other):
    """The dashboard framed by `panel` (with the key), then in the same tab by a page of
    another origin of the same site, without the key: what that second frame shows."""
    page.goto(panel)
    dashboard_frame(page)
    page.goto(other)
    page.wait_for_selector("iframe")
    page.frame_locator("iframe").locator("#app section, #app .summary, #app table").first.wait_for(timeout=30000)
    frame = next(f for f in page.frames if f != page.main_frame)
    problem = frame.locator(".problem h2")
    return {
        "problem": problem.inner_text() if problem.count() else None,
        "rules_shown": frame.locator("#app form, #app .summary").count() > 0,
    }


def screenshot(page, url, path):
    page.goto(url)
    page.locator("#app section, #app .summary, #app table").first.wait_for(timeout=30000)
    page.wait_for_timeout(300)
    page.screenshot(path=path, full_page=True)
    return {"url": page.url, "title": page.title()}


def main():
    command, *arguments = sys.argv[1:]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        try:
            seen = {
                "edit": edit,
                "refused": refused,
                "problem": problem,
                "statistics": statistics,
                "events": events,
                "drawn": drawn,
                "reused": reused,
                "screenshot": screenshot,
            }[command](page, *arguments)
        finally:
            browser.close()
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
