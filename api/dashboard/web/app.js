// botgate's dashboard: trades the key in the address for a session token, removes the
// key from the address, and shows one website's rules, statistics and recent requests
// through the /v1.0 API. No framework; every text comes from the page's catalogue and
// every value from the API is set as text, never as markup.

const strings = JSON.parse(document.getElementById("strings").textContent);
const main = document.getElementById("app");
const { domain, lang } = main.dataset;
const SESSION = "botgate-session";
const websitePath = `/v1.0/website/${encodeURIComponent(domain)}`;
let token = null;

const CATEGORIES = [
  "humans", "search_engines", "social_networks", "services_and_payments",
  "content_scrapers", "emulated_humans", "suspicious_behaviour", "security_issues",
];
const ACTIONS = ["grant", "deny", "captcha"];
const COLOURS = [
  "#2f6fba", "#2e8540", "#8a5cb8", "#c28a00", "#b4542e", "#d0457a", "#6b7a8f", "#b3261e",
];

function t(key, values = {}) {
  let text = strings[key] ?? key;
  for (const [name, value] of Object.entries(values)) {
    text = text.replaceAll(`{${name}}`, String(value));
  }
  return text;
}

// An element: `attributes` are set as attributes (`text` as its text), children
// appended (strings as text).
function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

// A failure that ends the page: shown instead of it.
class Problem extends Error {
  constructor(kind) {
    super(kind);
    this.kind = kind;
  }
}

// A change the API refused, with the field it names.
class Refusal extends Error {
  constructor(message, field) {
    super(message);
    this.field = field;
  }
}

function showProblem(kind) {
  main.replaceChildren(
    el("section", { class: "problem", role: "alert" },
      el("h2", { text: t(`problem.${kind}.title`) }),
      el("p", { text: t(`problem.${kind}.text`) })),
  );
}

// Where this page runs: the origin of the document framing it (another page of the
// same site may share this storage). A session is taken up again only there.
function placeOfSession() {
  let framer = "";
  if (window !== window.top) {
    try {
      framer = location.ancestorOrigins && location.ancestorOrigins.length
        ? location.ancestorOrigins[0]
        : new URL(document.referrer).origin;
    } catch {
      framer = "?";
    }
  }
  return framer;
}

async function openSession() {
  const address = new URL(location.href);
  const key = address.searchParams.get("api-key");
  if (key !== null) {
    // The key leaves the address (and the history entry) before anything else.
    address.searchParams.delete("api-key");
    history.replaceState(history.state, "", address.pathname + address.search + address.hash);
    let answer;
    try {
      answer = await fetch("/v1.0/session", {
        method: "POST",
        headers: { Authorization: `Bearer ${key}` },
        cache: "no-store",
        referrerPolicy: "no-referrer",
      });
    } catch {
      throw new Problem("network");
    }
    if (answer.status === 429) throw new Problem("busy");
    if (!answer.ok) throw new Problem("key");
    token = (await answer.json()).token;
    try {
      sessionStorage.setItem(SESSION, JSON.stringify({ token, place: placeOfSession() }));
    } catch {
      // Storage may be off; the token stays in memory for this page.
    }
    return;
  }
  try {
    const stored = JSON.parse(sessionStorage.getItem(SESSION) || "null");
    // A place that cannot be told ("?") is no place to take a session up again.
    const place = placeOfSession();
    token = stored && place !== "?" && stored.place === place ? stored.token : null;
  } catch {
    token = null;
  }
  if (!token) throw new Problem("nokey");
}

async function api(method, path, body) {
  const request = {
    method,
    headers: { Authorization: `Bearer ${token}` },
    cache: "no-store",
    referrerPolicy: "no-referrer",
  };
  if (body !== undefined) {
    request.headers["Content-Type"] = "application/json";
    request.body = JSON.stringify(body);
  }
  let answer;
  try {
    answer = await fetch(path, request);
  } catch {
    throw new Problem("network");
  }
  const data = await answer.json().catch(() => ({}));
  if (answer.status === 401) {
    try {
      sessionStorage.removeItem(SESSION);
    } catch {
      // Nothing stored.
    }
    throw new Problem("session");
  }
  if (answer.status === 404 && method === "GET") throw new Problem("notfound");
  if (!answer.ok) throw new Refusal(data.message || answer.statusText, data.field || "");
  return data;
}

// ---- The rules editor ----

// The live region that says whether a change was saved.
let announcer = null;

function say(text) {
  if (announcer) announcer.textContent = text;
}

function fieldId(field) {
  return `field-${field.replace(/[^a-z0-9_.-]/gi, "_")}`;
}

// The error line under a control, referred to by its aria-describedby.
function errorLine(field) {
  return el("p", { class: "error", id: `${fieldId(field)}-error`, hidden: true });
}

function clearErrors() {
  for (const line of main.querySelectorAll(".error")) {
    line.hidden = true;
    line.textContent = "";
  }
  for (const control of main.querySelectorAll("[aria-invalid]")) {
    control.removeAttribute("aria-invalid");
  }
}

// Shows `message` beside the control of `field` (or of the nearest field it names),
// else beside `fallback`.
function showError(field, message, fallback) {
  let name = field;
  let line = null;
  while (name && !(line = document.getElementById(`${fieldId(name)}-error`))) {
    name = name.includes(".") ? name.slice(0, name.lastIndexOf(".")) : "";
  }
  line = line || document.getElementById(`${fieldId(fallback)}-error`);
  if (!line) return;
  line.textContent = message;
  line.hidden = false;
  const control = document.getElementById(fieldId(name || fallback));
  if (control) control.setAttribute("aria-invalid", "true");
}

// Sends `body` as a change of the website; the website as stored, or null when the
// API refused it (the reason shown beside `field`).
async function save(body, field) {
  clearErrors();
  say(t("saving"));
  try {
    const website = await api("PUT", websitePath, body);
    say(t("saved"));
    return website;
  } catch (error) {
    if (error instanceof Refusal) {
      showError(error.field, error.message, field);
      say(t("notsaved", { message: error.message }));
      return null;
    }
    throw error;
  }
}

function describedBy(field, help) {
  return help ? `${fieldId(field)}-help ${fieldId(field)}-error` : `${fieldId(field)}-error`;
}

// A switch for the boolean `field`; `patch(on)` is the change to send.
function toggle(field, label, help, on, patch) {
  const input = el("input", {
    type: "checkbox",
    role: "switch",
    id: fieldId(field),
    "aria-describedby": describedBy(field, help),
  });
  input.checked = on;
  input.addEventListener("change", async () => {
    const wanted = input.checked;
    const saved = await save(patch(wanted), field).catch(fail);
    if (!saved) input.checked = !wanted;
  });
  return el("div", { class: "switch" },
    input,
    el("label", { for: fieldId(field), text: label }),
    help ? el("p", { class: "help", id: `${fieldId(field)}-help`, text: help }) : null,
    errorLine(field));
}

function section(id, title, help, ...content) {
  return el("section", { class: "card", "aria-labelledby": `${id}-title` },
    el("h2", { id: `${id}-title`, text: title }),
    help ? el("p", { class: "help", text: help }) : null,
    ...content);
}

function statusSection(website) {
  return section("status", t("status.title"), null,
    el("p", { class: `status status-${website.status}`, text: t(`status.${website.status}`) }),
    website.status_reason
      ? el("p", { class: "help", text: t("status.reason", { reason: website.status_reason }) })
      : null);
}

function rulesetsSection(website) {
  const names = Object.keys(website.settings.rulesets);
  return section("rulesets", t("rulesets.title"), t("rulesets.help"),
    el("div", { class: "switches" }, names.map((name) =>
      // An operator's own rule set has no strings of ours: its name stands for it.
      toggle(`settings.rulesets.${name}`,
        `ruleset.${name}` in strings ? t(`ruleset.${name}`) : name,
        t(`ruleset.${name}.help` in strings ? `ruleset.${name}.help` : "ruleset.other.help"),
        website.settings.rulesets[name],
        (on) => ({ settings: { rulesets: { [name]: on } } })))));
}

function rulesSection(website) {
  const rows = CATEGORIES.filter((category) => category in website.settings.rules).map((category) => {
    const field = `settings.rules.${category}`;
    const select = el("select", { id: fieldId(field), "aria-describedby": describedBy(field, true) },
      ACTIONS.map((action) => el("option", { value: action, text: t(`action.${action}`) })));
    select.value = website.settings.rules[category];
    let previous = select.value;
    select.addEventListener("change", async () => {
      const saved = await save({ settings: { rules: { [category]: select.value } } }, field).catch(fail);
      if (saved) previous = select.value;
      else select.value = previous;
    });
    return el("div", { class: "rule" },
      el("label", { for: fieldId(field), text: t(`category.${category}`) }),
      select,
      el("p", { class: "help", id: `${fieldId(field)}-help`, text: t(`category.${category}.help`) }),
      errorLine(field));
  });
  return section("rules", t("rules.title"), t("rules.help"), el("div", { class: "rules" }, rows));
}

function loadbalancerSection(website) {
  const switches = Object.entries(website.settings.loadbalancer)
    .filter(([, value]) => typeof value === "boolean")
    .map(([name, value]) => toggle(`settings.loadbalancer.${name}`, t(`lb.${name}`),
      t(`lb.${name}.help`), value, (on) => ({ settings: { loadbalancer: { [name]: on } } })));
  return section("loadbalancer", t("lb.title"), null, el("div", { class: "switches" }, switches));
}

function certificateState(website) {
  const certificate = website.certificate;
  if (!certificate || !certificate.not_after) {
    const issuing = website.settings.loadbalancer.certs_issuer === "acme" && website.status === "setup";
    return issuing ? "issuing" : "none";
  }
  const left = certificate.not_after * 1000 - Date.now();
  if (left <= 0) return "expired";
  return left < 14 * 24 * 3600 * 1000 ? "expiring" : "valid";
}

function certificateSection(website) {
  const issuerField = "settings.loadbalancer.certs_issuer";
  const mode = el("select", { id: fieldId(issuerField), "aria-describedby": describedBy(issuerField, false) },
    ["acme", "custom"].map((issuer) => el("option", { value: issuer, text: t(`certificate.${issuer}`) })));
  mode.value = website.settings.loadbalancer.certs_issuer;
  let previous = mode.value;
  mode.addEventListener("change", async () => {
    const saved = await save({ settings: { loadbalancer: { certs_issuer: mode.value } } }, issuerField)
      .catch(fail);
    if (saved) {
      previous = mode.value;
      render("edit", saved);
    } else {
      mode.value = previous;
    }
  });
  const certificate = website.certificate;
  const state = certificateState(website);
  const facts = el("dl", { class: "facts" },
    el("dt", { text: t("certificate.state") }),
    el("dd", { class: `certificate-${state}`, text: t(`certificate.state.${state}`) }));
  if (certificate && certificate.not_after) {
    const expires = new Intl.DateTimeFormat(lang, { dateStyle: "long" })
      .format(new Date(certificate.not_after * 1000));
    facts.append(
      el("dt", { text: t("certificate.issuer") }), el("dd", { text: certificate.issuer || "" }),
      el("dt", { text: t("certificate.names") }), el("dd", { text: (certificate.names || []).join(", ") }),
      el("dt", { text: t("certificate.expires") }), el("dd", { text: expires }));
  }
  const pem = (part) => {
    const field = `certificate.${part}`;
    const area = el("textarea", {
      id: fieldId(field), rows: 6, spellcheck: "false", autocomplete: "off",
      "aria-describedby": describedBy(field, false),
    });
    const file = el("input", { type: "file", id: `${fieldId(field)}-file`, accept: ".pem,.crt,.key,.txt" });
    file.addEventListener("change", async () => {
      if (file.files.length) area.value = await file.files[0].text();
    });
    return el("div", { class: "pem" },
      el("label", { for: fieldId(field), text: t(field) }), area,
      el("label", { class: "file", for: `${fieldId(field)}-file`, text: t("certificate.file") }), file,
      errorLine(field));
  };
  const form = el("form", { class: "upload", "aria-labelledby": "upload-title" },
    el("h3", { id: "upload-title", text: t("certificate.upload") }),
    pem("public"), pem("private"),
    el("button", { type: "submit", text: t("certificate.send") }));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const saved = await save({
      certificate: {
        public: form.querySelector(`#${CSS.escape(fieldId("certificate.public"))}`).value,
        private: form.querySelector(`#${CSS.escape(fieldId("certificate.private"))}`).value,
      },
      settings: { loadbalancer: { certs_issuer: "custom" } },
    }, "certificate.public").catch(fail);
    if (saved) render("edit", saved);
  });
  return section("certificate", t("certificate.title"), null,
    el("div", { class: "rule" },
      el("label", { for: fieldId(issuerField), text: t("certificate.issuer_mode") }), mode,
      errorLine(issuerField)),
    facts, form);
}

async function editPage(website) {
  const shown = website || await api("GET", websitePath);
  announcer = el("p", { class: "saved", role: "status", "aria-live": "polite" });
  return [announcer, statusSection(shown), rulesSection(shown), rulesetsSection(shown),
    loadbalancerSection(shown), certificateSection(shown)];
}

// ---- Statistics ----

let range = "hour";

function numberText(value) {
  return new Intl.NumberFormat(lang).format(value);
}

// The time axis in the page's language: hours and minutes, with the day over a week.
let timeText = new Intl.DateTimeFormat(lang, { hour: "2-digit", minute: "2-digit" });

function chart(title, times, series, labels) {
  const figure = el("figure", { class: "chart" }, el("figcaption", { text: title }));
  const width = Math.max(280, Math.min(main.clientWidth - 48, 960));
  const data = [times, ...series.map(([, values]) => values)];
  const options = {
    width,
    height: 220,
    series: [
      {},
      ...series.map(([name], index) => ({
        label: labels(name),
        stroke: COLOURS[index % COLOURS.length],
        width: 2,
        points: { show: false },
      })),
    ],
    axes: [
      { values: (_, ticks) => ticks.map((tick) => timeText.format(new Date(tick * 1000))) },
      { values: (_, ticks) => ticks.map(numberText) },
    ],
    legend: { live: false },
  };
  if (window.uPlot) {
    // uPlot draws on a canvas; the table below says the same for screen readers.
    new window.uPlot(options, data, figure);
  }
  const totals = el("table", { class: "totals" },
    el("caption", { class: "visually-hidden", text: title }),
    el("tbody", {}, series.map(([name, values]) =>
      el("tr", {}, el("th", { scope: "row", text: labels(name) }),
        el("td", { text: numberText(values.reduce((a, b) => a + b, 0)) })))));
  figure.append(totals);
  return figure;
}

function topTable(title, rows) {
  const most = rows.reduce((max, row) => Math.max(max, row.count), 1);
  return el("table", { class: "toplist" },
    el("caption", { text: title }),
    el("thead", {}, el("tr", {},
      el("th", { scope: "col", text: t("statistics.value") }),
      el("th", { scope: "col", text: t("statistics.count") }))),
    el("tbody", {}, rows.length
      ? rows.map((row) => {
        const bar = el("span", { class: "bar" });
        bar.style.width = `${Math.round((row.count / most) * 100)}%`;
        return el("tr", {}, el("td", {}, el("span", { class: "value", text: row.value }), bar),
          el("td", { text: numberText(row.count) }));
      })
      : el("tr", {}, el("td", { colspan: 2, text: t("statistics.empty") }))));
}

async function statisticsPage() {
  const stats = await api("GET", `${websitePath}/statistics?range=${range}`);
  timeText = new Intl.DateTimeFormat(lang, range === "week"
    ? { day: "numeric", month: "short", hour: "2-digit" }
    : { hour: "2-digit", minute: "2-digit" });
  const picker = el("div", { class: "range", role: "group", "aria-label": t("statistics.range") },
    ["hour", "week"].map((each) => el("button", {
      type: "button",
      "aria-pressed": each === range ? "true" : "false",
      text: t(`statistics.${each}`),
      onclick: () => {
        range = each;
        render("statistics");
      },
    })),
    el("button", { type: "button", class: "refresh", text: t("statistics.refresh"), onclick: () => render("statistics") }));
  const sum = (values) => values.reduce((a, b) => a + b, 0);
  const byAction = stats.by_action || {};
  const total = sum(Object.values(byAction).map(sum));
  const solved = stats.challenges.solved;
  const shown = stats.challenges.shown;
  const summary = el("dl", { class: "summary" },
    el("div", {}, el("dt", { text: t("statistics.total") }), el("dd", { text: numberText(total) })),
    el("div", {}, el("dt", { text: t("statistics.blocked") }),
      el("dd", { text: numberText(sum(byAction.deny || [])) })),
    el("div", {}, el("dt", { text: t("statistics.challenged") }), el("dd", { text: numberText(shown) })),
    el("div", {}, el("dt", { text: t("statistics.solve_rate") }),
      el("dd", { text: shown ? `${Math.round((solved / shown) * 100)}%` : t("statistics.solve_rate.none") })));
  const categories = CATEGORIES.map((name) => [name, stats.by_category[name] || stats.times.map(() => 0)]);
  const actions = Object.entries(byAction);
  return [
    picker,
    summary,
    chart(t("statistics.by_category"), stats.times, categories, (name) => t(`category.${name}`)),
    chart(t("statistics.by_action"), stats.times, actions, (name) => t(`outcome.${name}`)),
    el("div", { class: "tops" },
      topTable(t("statistics.top_paths"), stats.top.paths),
      topTable(t("statistics.top_user_agents"), stats.top.user_agents),
      topTable(t("statistics.top_networks"), stats.top.networks),
      topTable(t("statistics.top_deciders"), stats.top.deciders)),
  ];
}

// ---- Recent requests ----

const filters = { action: "", category: "" };

async function eventsPage() {
  const query = new URLSearchParams();
  if (filters.action) query.set("action", filters.action);
  if (filters.category) query.set("category", filters.category);
  const events = await api("GET", `${websitePath}/events?${query}`);
  const select = (name, values, label) => {
    const control = el("select", { id: `filter-${name}` },
      el("option", { value: "", text: t("events.all") }),
      values.map((value) => el("option", { value, text: label(value) })));
    control.value = filters[name];
    control.addEventListener("change", () => {
      filters[name] = control.value;
      render("events");
    });
    return el("div", { class: "filter" }, el("label", { for: `filter-${name}`, text: t(`events.${name}`) }), control);
  };
  const outcomes = ["grant", "deny", "captcha", "captcha_passed", "challenge_solved", "challenge_failed", "limited", "pass", "redirect"];
  const time = new Intl.DateTimeFormat(lang, { dateStyle: "short", timeStyle: "medium" });
  const rows = events.items.map((event) => el("tr", {},
    el("td", { text: time.format(new Date(event.time)) }),
    el("td", { text: event.client }),
    el("td", { text: event.method }),
    el("td", { class: "path", text: event.path }),
    el("td", { text: event.category ? t(`category.${event.category}`) : "–" }),
    el("td", { class: `outcome outcome-${event.action}`, text: t(`outcome.${event.action}`) }),
    el("td", { text: [event.decider, event.reason].filter(Boolean).join(": ") || "–" }),
    el("td", { text: String(event.status) })));
  return [
    el("form", { class: "filters", role: "search", "aria-label": t("events.filter") },
      select("action", outcomes, (name) => t(`outcome.${name}`)),
      select("category", CATEGORIES, (name) => t(`category.${name}`)),
      el("button", { type: "button", text: t("events.refresh"), onclick: () => render("events") })),
    el("table", { class: "events" },
      el("caption", { text: t("events.caption", { domain }) }),
      el("thead", {}, el("tr", {}, ["time", "client", "method", "path", "category", "action", "decider", "status"]
        .map((column) => el("th", { scope: "col", text: t(`events.${column}`) })))),
      el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: 8, text: t("events.empty") })))),
  ];
}

// ---- Pages ----

const PAGES = { edit: editPage, statistics: statisticsPage, events: eventsPage };

function fail(error) {
  if (error instanceof Problem) showProblem(error.kind);
  else {
    console.error(error);
    showProblem("network");
  }
  return null;
}

async function render(page, website) {
  try {
    const content = await PAGES[page](website);
    main.replaceChildren(...content);
    main.dataset.page = page;
    document.title = `${t(`page.${page}`)} · ${domain}`;
    for (const link of document.querySelectorAll("nav.pages a")) {
      if (link.dataset.page === page) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
    for (const link of document.querySelectorAll("nav.languages a")) {
      link.setAttribute("href", `/${link.dataset.lang}/website/${encodeURIComponent(domain)}/${page}`);
    }
  } catch (error) {
    fail(error);
  }
}

// The pages switch in place, so the session stays in memory even without storage.
for (const link of document.querySelectorAll("nav.pages a")) {
  link.addEventListener("click", (event) => {
    event.preventDefault();
    history.pushState({ page: link.dataset.page }, "", link.getAttribute("href"));
    render(link.dataset.page).then(() => main.focus());
  });
}
window.addEventListener("popstate", () => {
  render(location.pathname.split("/").pop() in PAGES ? location.pathname.split("/").pop() : "edit");
});

openSession().then(() => render(main.dataset.page), fail);
