// Consortia provenance explorer: vanilla JS + inline SVG, served by the gateway, no external resources.
"use strict";
(function () {
  const API = "/api/v1";
  const SVGNS = "http://www.w3.org/2000/svg";
  const COLORS = ["#2f6fa3", "#d9822b", "#3a8f5c", "#8e44ad", "#c0392b", "#16a085", "#7f8c8d", "#b7950b"];
  let token = sessionStorage.getItem("consortia-token") || "";

  const $ = (sel) => document.querySelector(sel);
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "onclick") e.addEventListener("click", v); else e.setAttribute(k, v);
    }
    for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return e;
  }
  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  async function api(path, options) {
    const resp = await fetch(API + path, Object.assign({ headers: { Authorization: "Bearer " + token } }, options || {}));
    const body = await resp.json().catch(() => ({}));
    if (!resp.ok) throw new Error((body.code || resp.status) + ": " + (body.message || resp.statusText));
    return body;
  }
  function card(title, id) {
    const c = el("section", { class: "card", id: id });
    c.append(el("h3", {}, title));
    return c;
  }
  function facts(obj) {
    const dl = el("dl", { class: "facts" });
    for (const [k, v] of Object.entries(obj)) dl.append(el("dt", {}, k), el("dd", {}, typeof v === "object" ? JSON.stringify(v) : v));
    return dl;
  }

  // ------------------------------------------------------------------ sign in and navigation
  async function signIn() {
    try {
      const me = await api("/whoami");
      $("#whoami").textContent = me.user + " @ " + me.organisation;
      $("#login-panel").hidden = true;
      $("#app").hidden = false;
      await loadLists();
      route();
    } catch (err) {
      $("#login-error").textContent = "Sign-in failed: " + err.message;
    }
  }
  $("#login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    token = $("#token").value.trim();
    sessionStorage.setItem("consortia-token", token);
    signIn();
  });
  window.addEventListener("hashchange", route);

  async function loadLists() {
    const procs = await api("/processes?limit=1000");
    const ul = $("#processes"); ul.replaceChildren();
    for (const p of procs.items) ul.append(el("li", {}, el("a", { href: "#process/" + encodeURIComponent(p.id), "data-id": p.id }, p.id + " (" + p.status + ")")));
    const models = await api("/models?limit=1000");
    const ml = $("#models"); ml.replaceChildren();
    for (const m of models.items) ml.append(el("li", {}, el("a", { href: "#model/" + encodeURIComponent(m.id), "data-id": m.id }, m.id)));
  }

  function route() {
    const [kind, id] = location.hash.replace(/^#/, "").split("/");
    const view = $("#view");
    if (kind === "process" && id) showProcess(decodeURIComponent(id)).catch((e) => view.replaceChildren(el("p", { class: "error" }, e.message)));
    else if (kind === "model" && id) showModel(decodeURIComponent(id)).catch((e) => view.replaceChildren(el("p", { class: "error" }, e.message)));
  }

  // ------------------------------------------------------------------ process view
  async function showProcess(pid) {
    const [tl, models] = await Promise.all([api("/processes/" + encodeURIComponent(pid) + "/timeline"),
                                           api("/processes/" + encodeURIComponent(pid) + "/models")]);
    const p = tl.process;
    const view = $("#view");
    view.replaceChildren();
    const head = card("Learning process " + p.id, "process-facts");
    head.append(facts({ status: p.status, creator: p.creator, image: p.image_id + " @ " + p.image_digest,
      consortium: p.consortium.join(", "), topology: p.topology, rounds: p.rounds,
      privacy_budget: p.privacy_budget ? p.privacy_budget.mechanism + " ε=" + p.privacy_budget.epsilon : "none" }));
    view.append(head);
    view.append(timelineCard(p, tl.executions));
    view.append(convergenceCard(p, tl.executions));
    if (p.privacy_budget) view.append(privacyCard(p, tl.executions));
    view.append(matrixCard(p, models));
    const ev = card("Ledger events", "events");
    const list = el("ol", {});
    for (const e of tl.events) list.append(el("li", {}, "block " + e.block + " · " + e.name + " · " + e.subject));
    ev.append(list);
    view.append(ev);
  }

  function timelineCard(p, executions) {
    const c = card("Timeline (rounds × organisations)", "timeline");
    const orgs = p.consortium, cw = Math.max(14, Math.min(40, 640 / p.rounds)), ch = 22, left = 90, top = 20;
    const s = svg("svg", { width: left + cw * p.rounds + 10, height: top + ch * orgs.length + 10, role: "img" });
    const byKey = {};
    for (const e of executions) byKey[e.round + "/" + e.organisation] = e;
    orgs.forEach((o, i) => s.append(svg("text", { x: 4, y: top + i * ch + 15 }, o)));
    for (let r = 1; r <= p.rounds; r++) {
      if (p.rounds <= 30 || r % Math.ceil(p.rounds / 30) === 0) s.append(svg("text", { x: left + (r - 1) * cw + 2, y: 12 }, r));
      orgs.forEach((o, i) => {
        const e = byKey[r + "/" + o];
        const rect = svg("rect", { x: left + (r - 1) * cw + 1, y: top + i * ch + 1, width: cw - 2, height: ch - 2,
          class: "cell status-" + (e ? e.status : "missing"), "data-round": r, "data-org": o });
        rect.append(svg("title", {}, "round " + r + " · " + o + " · " + (e ? e.status + " · tx " + (e.completed_tx_id || e.tx_id) : "no record")));
        if (e) rect.addEventListener("click", () => showExecution(e));
        s.append(rect);
      });
    }
    c.append(s, el("div", { id: "execution-detail" }));
    return c;
  }

  function showExecution(e) {
    const d = $("#execution-detail");
    d.replaceChildren(el("h3", {}, "Execution " + e.process_id + " / round " + e.round + " / " + e.organisation),
      facts({ status: e.status, runtime: e.runtime, image_digest: e.image_digest, tx: e.tx_id, completed_tx: e.completed_tx_id }),
      el("pre", {}, JSON.stringify(e.result, null, 2)));
  }

  function linePlot(id, title, series, opts) {
    const c = card(title, id);
    const W = 560, H = 220, L = 50, B = 30, T = 10, R = 120;
    const all = series.flatMap((s) => s.points);
    if (!all.length) { c.append(el("p", { class: "hint" }, "no data yet")); return c; }
    const xs = all.map((p) => p[0]), ys = all.map((p) => p[1]).concat(opts.extraY || []);
    const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1), y0 = Math.min(0, ...ys), y1 = Math.max(...ys) * 1.05 || 1;
    const X = (x) => L + (x - x0) / (x1 - x0) * (W - L - R), Y = (y) => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
    const s = svg("svg", { width: W, height: H, role: "img" });
    s.append(svg("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis" }), svg("line", { x1: L, y1: T, x2: L, y2: H - B, class: "axis" }));
    s.append(svg("text", { x: L, y: H - 8 }, "round " + x0), svg("text", { x: W - R - 40, y: H - 8 }, "round " + x1));
    s.append(svg("text", { x: 2, y: T + 10 }, y1.toPrecision(3)), svg("text", { x: 2, y: H - B }, y0.toPrecision(3)));
    if (opts.budget !== undefined) s.append(svg("line", { x1: L, x2: W - R, y1: Y(opts.budget), y2: Y(opts.budget), class: "budget" }),
      svg("text", { x: W - R + 4, y: Y(opts.budget) + 4 }, "budget ε=" + opts.budget));
    series.forEach((ser, i) => {
      const d = ser.points.map((p, j) => (j ? "L" : "M") + X(p[0]).toFixed(1) + " " + Y(p[1]).toFixed(1)).join(" ");
      s.append(svg("path", { d: d, class: "series", stroke: COLORS[i % COLORS.length], fill: "none", "stroke-width": 2, "data-org": ser.name }));
      s.append(svg("text", { x: W - R + 4, y: T + 14 * (i + 1) + (opts.budget !== undefined ? 20 : 0), fill: COLORS[i % COLORS.length] }, ser.name));
    });
    c.append(s);
    return c;
  }

  function perOrg(p, executions, value) {
    return p.consortium.map((o) => ({ name: o, points: executions.filter((e) => e.organisation === o && e.status === "completed")
      .sort((a, b) => a.round - b.round).map((e) => [e.round, value(e)]).filter((pt) => typeof pt[1] === "number" && isFinite(pt[1])) }));
  }

  const PREFERRED = ["loss", "objective", "log_likelihood", "elbo", "accuracy", "f1", "auc", "norm", "n_estimators"];
  const IGNORED = new Set(["epsilon_spent", "action"]);

  function convergenceCard(p, executions, chosen) {
    const names = new Set();
    for (const e of executions) if (e.result) Object.keys(e.result.metrics).forEach((k) => names.add(k));
    const options = [...names].sort();
    const metric = chosen || PREFERRED.find((m) => names.has(m)) || options.find((m) => !IGNORED.has(m)) || options[0];
    if (!metric) return card("Convergence", "convergence");
    const c = linePlot("convergence", "Convergence: " + metric + " per round", perOrg(p, executions, (e) => e.result.metrics[metric]), {});
    const select = el("select", { id: "metric", "aria-label": "metric" }, ...options.map((m) => el("option", { value: m }, m)));
    select.value = metric;
    select.addEventListener("change", () => c.replaceWith(convergenceCard(p, executions, select.value)));
    c.querySelector("h3").append(" ", select);
    return c;
  }

  function privacyCard(p, executions) {
    const b = p.privacy_budget, scope = b.scope ? " (" + b.scope + " ε, " + b.accounting + " accounting)" : "";
    return linePlot("privacy", "Privacy budget: cumulative ε per organisation" + scope, perOrg(p, executions, (e) => e.epsilon_total),
      { budget: p.privacy_budget.epsilon, extraY: [p.privacy_budget.epsilon] });
  }

  function matrixCard(p, models) {
    const c = card("Estimator origins (rows: model owner, columns: organisation that trained the estimators)", "matrix");
    if (!models.length) { c.append(el("p", { class: "hint" }, "no models published")); return c; }
    const origins = p.consortium;
    const table = el("table", { class: "matrix" });
    table.append(el("tr", {}, el("th", {}, "model \\ origin"), ...origins.map((o) => el("th", {}, o))));
    for (const m of models) {
      const counts = {};
      for (const est of m.estimators || []) {
        // estimator ids as the executor publishes them: [creator, counter, digest]; also {origin, trees} or "origin"
        const origin = Array.isArray(est) ? est[0] : typeof est === "string" ? est : (est.origin || est.organisation || "?");
        const n = !Array.isArray(est) && typeof est === "object" && typeof est.trees === "number" ? est.trees : 1;
        counts[origin] = (counts[origin] || 0) + n;
      }
      table.append(el("tr", {}, el("th", {}, m.owner), ...origins.map((o) => el("td", {}, counts[o] || 0))));
    }
    c.append(table);
    return c;
  }

  // ------------------------------------------------------------------ model view
  async function showModel(mid) {
    const [m, lin] = await Promise.all([api("/models/" + encodeURIComponent(mid)), api("/models/" + encodeURIComponent(mid) + "/lineage")]);
    const view = $("#view");
    view.replaceChildren();
    const head = card("Model " + m.id, "model-facts");
    head.append(facts({ owner: m.owner, process: m.process_id, digest: m.digest, image_digest: m.image_digest,
      size: m.size, access: m.access.join(", "), metrics: m.metrics }));
    const verify = el("button", { id: "verify", type: "button" }, "Verify lineage against the ledger");
    const result = el("div", { id: "verify-result" });
    verify.addEventListener("click", async () => {
      result.textContent = "verifying…";
      try {
        const rep = await api("/models/" + encodeURIComponent(mid) + "/verify", { method: "POST" });
        result.replaceChildren(el("p", { class: rep.ok ? "ok" : "error" }, rep.ok ? "verified: " + rep.checks.length + " checks passed"
          : rep.failures + " checks failed"), el("ul", {}, ...rep.checks.filter((c) => !c.ok).map((c) => el("li", { class: "error" }, c.check + ": " + c.detail))));
      } catch (err) { result.replaceChildren(el("p", { class: "error" }, err.message)); }
    });
    head.append(verify, result);
    view.append(head, lineageCard(lin));
  }

  function lineageCard(lin) {
    const c = card("Lineage: " + lin.nodes.length + " executions, " + lin.edges.length + " artifacts", "lineage");
    const orgs = [...new Set(lin.nodes.map((n) => n.organisation))].sort();
    const rounds = lin.nodes.map((n) => n.round);
    const r0 = Math.min(...rounds), r1 = Math.max(...rounds);
    const dx = Math.max(24, Math.min(90, 640 / Math.max(1, r1 - r0))), dy = 44, L = 100, T = 24;
    const pos = {};
    for (const n of lin.nodes) pos[n.id] = [L + (n.round - r0) * dx, T + orgs.indexOf(n.organisation) * dy];
    const s = svg("svg", { width: L + (r1 - r0) * dx + 40, height: T + orgs.length * dy, role: "img" });
    const defs = svg("defs", {});
    const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 16, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto" });
    marker.append(svg("path", { d: "M0 0 L10 5 L0 10 z", fill: "#7d8b99" }));
    defs.append(marker);
    s.append(defs);
    orgs.forEach((o, i) => s.append(svg("text", { x: 4, y: T + i * dy + 4 }, o)));
    for (const e of lin.edges) {
      const a = pos[e.from], b = pos[e.to];
      if (!a || !b) continue;
      const line = svg("line", { x1: a[0], y1: a[1], x2: b[0], y2: b[1], class: "edge " + e.kind, "marker-end": "url(#arrow)" });
      line.append(svg("title", {}, e.kind + " " + e.digest));
      s.append(line);
    }
    for (const n of lin.nodes) {
      const circle = svg("circle", { cx: pos[n.id][0], cy: pos[n.id][1], r: 7, class: "node" + (n.id === lin.root ? " root" : ""), "data-id": n.id });
      circle.append(svg("title", {}, n.id + " · block " + n.block + " · tx " + n.completed_tx_id));
      s.append(circle);
    }
    c.append(s);
    return c;
  }

  if (token) { $("#token").value = token; signIn(); }
})();
