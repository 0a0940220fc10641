// Consortia provenance explorer: vanilla JS + inline SVG (svgplots.js), served by the gateway, no external resources.
"use strict";
(function () {
  const API = "/api/v1";
  const { svg, legend, linePlot, roundTicks } = window.SvgPlots;
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
  async function api(path, options) {
    const resp = await fetch(API + path, Object.assign({ headers: { Authorization: "Bearer " + token } }, options || {}));
    const body = await resp.json().catch(() => ({}));
    if (!resp.ok) throw new Error((body.code || resp.status) + ": " + (body.message || resp.statusText));
    return body;
  }
  const enc = encodeURIComponent;
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
  function table(cls, head, rows) {
    const t = el("table", { class: cls });
    t.append(el("tr", {}, ...head.map((h) => el("th", {}, h))));
    for (const r of rows) t.append(el("tr", {}, ...r.map((c) => el("td", {}, c))));
    return t;
  }
  // "2026-11-23T13:29:11.413929Z" -> "2026-11-23 13:29:11 UTC"
  const when = (iso) => (iso ? iso.replace("T", " ").replace(/\.\d+/, "").replace("Z", " UTC") : "—");
  const badge = (cls, text, title) => el("span", { class: "badge " + cls, title: title || "" }, text);
  function signatureBadge(sig) {
    if (!sig) return badge("unknown", "signature not checked");
    if (sig.valid === true) return badge("valid", "signature valid", sig.detail);
    if (sig.valid === false) return badge("invalid", "signature INVALID", sig.detail);
    return badge("unknown", "no signed result", sig.detail);
  }
  const txBadge = (sig) => (sig && sig.tx_valid === true ? badge("valid", "transaction valid")
    : sig && sig.tx_valid === false ? badge("invalid", "transaction INVALID") : badge("unknown", "transaction not checked"));

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
    for (const p of procs.items) ul.append(el("li", {}, el("a", { href: "#process/" + enc(p.id), "data-id": p.id }, p.id + " (" + p.status + ")")));
    const models = await api("/models?limit=1000");
    const ml = $("#models"); ml.replaceChildren();
    for (const m of models.items) ml.append(el("li", {}, el("a", { href: "#model/" + enc(m.id), "data-id": m.id }, m.id)));
  }

  function route() {
    const [kind, id] = location.hash.replace(/^#/, "").split("/");
    const view = $("#view");
    const fail = (e) => view.replaceChildren(el("p", { class: "error" }, e.message));
    if (kind === "process" && id) showProcess(decodeURIComponent(id)).catch(fail);
    else if (kind === "model" && id) showModel(decodeURIComponent(id)).catch(fail);
    else if (kind === "replays") showReplays().catch(fail);
    else if (kind === "membership") showMembership().catch(fail);
  }

  // ------------------------------------------------------------------ replay verdicts (docs/audit-replay.md)
  async function showReplays() {
    const reps = await api("/replays");
    const view = $("#view");
    view.replaceChildren();
    const c = card("Replays of disclosed tasks run by this gateway's organisation", "replays");
    if (!reps.length) c.append(el("p", { class: "hint" }, "No replay yet: upload a disclosure (POST /api/v1/replays)."));
    for (const r of reps) {
      c.append(el("h4", {}, r.organisation + "'s disclosure of " + r.process_id + " — " + r.matched + "/" + r.replayed_tasks + " matched"),
        facts({ bundle: r.bundle_digest, disclosed: when(r.disclosed), image: r.image_digest, seconds: r.seconds }),
        table("replay-verdicts", ["task", "verdict", "digests compared", "what differs (recorded → found)"], r.tasks.map((t) => [
          t.task,
          t.verdict === "matched" ? badge("valid", "matched") : badge("invalid", "MISMATCH"),
          t.digests_compared,
          t.mismatches.map((m) => m.what + ": " + m.recorded + " → " + m.found).join("; ") || "—"])));
    }
    view.append(c);
  }

  // ------------------------------------------------------------------ membership history (docs/governance.md "History")
  async function showMembership() {
    const view = $("#view");
    const c = card("Membership history: the channel's configuration blocks", "membership");
    let blocks;
    try {
      blocks = await api("/membership/history");
    } catch (err) {  // e.g. an embedded ledger: it has no configuration blocks
      c.append(el("p", { class: "hint" }, "No membership history: " + err.message));
      view.replaceChildren(c);
      return;
    }
    const list = (xs) => (xs.length ? xs.join(", ") : "—");
    const change = (plus, minus) => [...plus.map((x) => "+ " + x), ...minus.map((x) => "− " + x)].join(", ") || "—";
    const revoked = (r) => Object.entries(r).map(([msp, serials]) => msp + ": " + serials.length + " serial" + (serials.length === 1 ? "" : "s")).join("; ") || "—";
    c.append(el("p", { class: "hint" }, blocks.length + " configuration block" + (blocks.length === 1 ? "" : "s") +
      ", oldest first; members now: " + list(blocks.length ? blocks[blocks.length - 1].members : [])));
    c.append(table("membership", ["block", "time", "members", "members changed", "orderers (consenters) changed", "revoked"],
      blocks.map((b) => [b.block, when(new Date(b.time * 1000).toISOString()), list(b.members),
        change(b.added, b.removed), change(b.consenters_added, b.consenters_removed), revoked(b.revoked)])));
    view.replaceChildren(c);
  }

  // ------------------------------------------------------------------ process view
  async function showProcess(pid) {
    const base = "/processes/" + enc(pid);
    const [tl, models, audit, changes] = await Promise.all([api(base + "/timeline"), api(base + "/models"),
      api(base + "/signatures"), api(base + "/changes")]);
    const p = tl.process, sigs = {};
    for (const s of audit.executions) sigs[s.round + "/" + s.organisation] = s;
    const view = $("#view");
    view.replaceChildren();
    const head = card("Learning process " + p.id, "process-facts");
    head.append(facts({ privacy: privacyText(p.privacy), status: p.status, creator: p.creator, algorithm: p.algorithm,
      image: p.image_id + " @ " + p.image_digest, consortium: p.consortium.join(", "), topology: p.topology, rounds: p.rounds }));
    view.append(head);
    if (p.validation_fraction) view.append(gainCard(p));
    view.append(timelineCard(p, tl.executions, sigs), convergenceCard(p, tl.executions));
    if (p.privacy_budget) view.append(privacyCard(p, tl.executions));
    view.append(signaturesCard(audit.executions), matrixCard(p, models), eventsCard(audit.events),
      changesCard("Process record history", "process-history", changes));
  }

  // what collaboration bought each member: its signed last-round figures on its own validation slice
  function gainCard(p) {
    const c = card("What collaboration bought each member (its own validation slice, " + p.validation_fraction +
      " of its rows; the model trained alone → its collaborative model)", "gains");
    const gains = p.gains || [];
    if (!gains.length) {
      c.append(el("p", {}, "each member's figures arrive with its signed result of round " + p.rounds));
      return c;
    }
    c.append(table("gains", ["organisation", "metric", "alone", "together", "gain", "slice rows"], gains.map((g) => [
      g.organisation, g.metric, g.isolated.toFixed(4), g.collaborative.toFixed(4),
      el("span", { class: g.negative ? "error" : "ok" }, (g.gain >= 0 ? "+" : "") + g.gain.toFixed(4) +
        (g.negative ? " (worse than training alone)" : "")),
      String(g.rows)])));
    return c;
  }

  function timelineCard(p, executions, sigs) {
    const c = card("Timeline: one cell per organisation and round, coloured by the execution's status", "timeline");
    const orgs = p.consortium, cw = Math.max(14, Math.min(40, 640 / p.rounds)), ch = 22, left = 90, top = 8;
    const bottom = top + ch * orgs.length;
    const s = svg("svg", { width: left + cw * p.rounds + 10, height: bottom + 38, role: "img", "aria-label": "timeline" });
    const byKey = {};
    for (const e of executions) byKey[e.round + "/" + e.organisation] = e;
    orgs.forEach((o, i) => s.append(svg("text", { x: 4, y: top + i * ch + 15, class: "org-label" }, o)));
    for (let r = 1; r <= p.rounds; r++) {
      orgs.forEach((o, i) => {
        const e = byKey[r + "/" + o], sig = sigs[r + "/" + o];
        const rect = svg("rect", { x: left + (r - 1) * cw + 1, y: top + i * ch + 1, width: cw - 2, height: ch - 2,
          class: "cell status-" + (e ? e.status : "missing") + (sig && sig.valid === false ? " sig-invalid" : ""),
          "data-round": r, "data-org": o });
        rect.append(svg("title", {}, "round " + r + " · " + o + " · " + (e ? e.status + " · " + (sig ? (sig.valid ? "signature valid" : sig.detail) : "") : "no record")));
        if (e) rect.addEventListener("click", () => showExecution(e, sig));
        s.append(rect);
      });
    }
    s.append(svg("line", { x1: left, x2: left + cw * p.rounds, y1: bottom + 2, y2: bottom + 2, class: "axis" }));
    for (const r of roundTicks(1, p.rounds, 30)) {
      const x = left + (r - 0.5) * cw;
      s.append(svg("line", { x1: x, x2: x, y1: bottom + 2, y2: bottom + 6, class: "axis" }),
        svg("text", { x: x, y: bottom + 17, "text-anchor": "middle", class: "tick x-tick" }, r));
    }
    s.append(svg("text", { x: left + cw * p.rounds / 2, y: bottom + 33, "text-anchor": "middle", class: "axis-title x-title" }, "round"));
    c.append(s, legend("timeline-legend", [
      { label: "completed (result signed and accepted)", kind: "box", cls: "status-completed" },
      { label: "running", kind: "box", cls: "status-running" },
      { label: "failed", kind: "box", cls: "status-failed" },
      { label: "no record yet", kind: "box", cls: "status-missing" },
      { label: "signature does not verify", kind: "box", cls: "status-completed sig-invalid" }]),
    el("p", { class: "hint" }, "Click a cell for the execution record, its signer and its history."), el("div", { id: "execution-detail" }));
    return c;
  }

  async function showExecution(e, sig) {
    const d = $("#execution-detail");
    const r = e.result || {}, ins = r.inputs || {}, outs = r.outputs || {};
    const digests = [["image", r.image_digest || e.image_digest], ["data commitment", ins.data_commitment],
      ["input state", ins.state], ...(ins.messages || []).map((m) => ["message from " + m.sender, m.digest]),
      ["output state", outs.state], ...(outs.messages || []).map((m) => ["message to " + m.recipient, m.digest]),
      ["model", outs.model && outs.model.digest]].filter((x) => x[1]);
    d.replaceChildren(el("h3", {}, "Execution " + e.process_id + " / round " + e.round + " / " + e.organisation),
      el("p", { class: "badges" }, signatureBadge(sig), " ", txBadge(sig), " ", el("span", { class: "signer" }, "signed by " + (sig ? sig.signer : e.organisation))),
      facts({ status: e.status, runtime: e.runtime, registered: when(e.created), completed: when(e.completed),
        transaction: e.completed_tx_id || e.tx_id, failure: e.failure_reason || "—" }),
      table("digests", ["artifact", "digest"], digests),
      table("metrics", ["metric", "value"], Object.entries(r.metrics || {}).map(([k, v]) => [k, typeof v === "number" ? +v.toPrecision(6) : JSON.stringify(v)])),
      el("details", {}, el("summary", {}, "raw record (JSON)"), el("pre", {}, JSON.stringify(e, null, 2))));
    try {
      const ch = await api("/processes/" + enc(e.process_id) + "/executions/" + e.round + "/" + enc(e.organisation) + "/changes");
      d.append(changesCard("History of this execution record", "execution-history", ch));
    } catch (err) { d.append(el("p", { class: "error" }, err.message)); }
  }

  function signaturesCard(executions) {
    const c = card("Execution signatures, checked by the gateway against the ledger's records", "signatures");
    const ok = executions.filter((s) => s.valid === true).length;
    c.append(el("p", { class: "hint" }, ok + " of " + executions.length + " execution records carry a valid task signature. " +
      "The signer registered the task key that signed the result."),
    table("signatures", ["round", "organisation", "status", "signed by", "signature", "transaction"],
      executions.map((s) => [s.round, s.organisation, s.status, s.signer, signatureBadge(s), txBadge(s)])));
    return c;
  }

  function eventsCard(events) {
    const c = card("Ledger events (time of the transaction, who acted)", "events");
    c.append(table("events", ["time", "block", "event", "subject", "actor"],
      events.map((e) => [when(e.time), e.block, e.name, e.subject.replace(/^[a-z]+:/, ""), e.actor || "—"])));
    return c;
  }

  function changesCard(title, id, versions) {
    const c = card(title, id);
    c.append(table("changes", ["#", "time", "by", "what changed"], versions.map((v, i) => [i + 1, when(v.time), v.actor || "—",
      el("ul", {}, ...v.changes.map((ch) => el("li", {}, ch.text)))])));
    return c;
  }

  function perOrg(p, executions, value) {
    return p.consortium.map((o) => ({ name: o, points: executions.filter((e) => e.organisation === o && e.status === "completed")
      .sort((a, b) => a.round - b.round).map((e) => [e.round, value(e)]).filter((pt) => typeof pt[1] === "number" && isFinite(pt[1])) }));
  }

  function plotCard(id, title, series, opts) {
    const c = card(title, id);
    const plot = linePlot(series, opts);
    if (!plot) c.append(el("p", { class: "hint" }, "no data yet"));
    else c.append(plot.svg, plot.legend);
    return c;
  }

  // metrics the algorithms report that do measure convergence, with what they mean (first present wins)
  const CONVERGENCE = {
    estimate_loss: "Convergence: estimate_loss per round (loss of each organisation's estimate, DPSDA; lower is better)",
    loss: "Convergence: loss per round (lower is better)",
    objective: "Convergence: objective per round (CollabDict mixture objective; it levels off at convergence)",
    elbo_per_sample: "Convergence: elbo_per_sample per round (CollabDict VAE evidence lower bound; higher is better)",
    elbo: "Convergence: elbo per round (evidence lower bound; higher is better)",
    log_likelihood: "Convergence: log_likelihood per round (higher is better)",
    norm: "Convergence: norm per round (norm of each organisation's state; in average consensus the lines meet)",
  };
  const NOT_CONVERGENCE = {
    n_estimators: "Ensemble size: n_estimators per round (collaborative RF reports no loss; this shows the ensemble growing, not convergence)",
  };
  const IGNORED = new Set(["epsilon_spent", "action", "privacy_rigorous"]);

  function convergenceCard(p, executions, chosen) {
    const names = new Set();
    for (const e of executions) if (e.result) Object.keys(e.result.metrics).forEach((k) => names.add(k));
    const options = [...names].sort();
    const metric = chosen || Object.keys(CONVERGENCE).find((m) => names.has(m)) || Object.keys(NOT_CONVERGENCE).find((m) => names.has(m))
      || options.find((m) => !IGNORED.has(m)) || options[0];
    if (!metric) return card("Convergence: the executions report no metric", "convergence");
    const nominal = executions.some((e) => e.result && e.result.metrics.privacy_rigorous !== 1);
    const title = CONVERGENCE[metric] || NOT_CONVERGENCE[metric] || (/^(epsilon|rho)_/.test(metric)
      ? "Reported by the image: " + metric + " per round (" + (nominal ? "NOMINAL ε, not rigorous: not a guarantee"
        : "the image's own figure, not charged; the ledger's rigorous ε is the privacy card") + ")"
      : "Reported metric: " + metric + " per round (not a convergence measure)");
    const c = plotCard("convergence", title, perOrg(p, executions, (e) => e.result.metrics[metric]), { yTitle: metric });
    const select = el("select", { id: "metric", "aria-label": "metric" }, ...options.map((m) => el("option", { value: m }, m)));
    select.value = metric;
    select.addEventListener("change", () => c.replaceWith(convergenceCard(p, executions, select.value)));
    c.querySelector("h3").append(" ", select);
    return c;
  }

  // the ledger's rigorous ε first (spent / budget, δ); an ε only an image reports is labelled as such
  function privacyText(pr) {
    if (!pr) return "unknown";
    const num = (x) => Number(x).toPrecision(4).replace(/\.?0+$/, "");
    let text = pr.rigorous
      ? "rigorous ε " + num(pr.epsilon_spent) + " of " + pr.epsilon_budget + " spent (δ = " + (pr.delta ?? 0) + ", " + pr.scope +
        " scope, " + pr.accounting + " accounting; consortium cap ε ≤ " + pr.cap_epsilon + " at δ ≤ " + pr.cap_delta + ")"
      : "none: no privacy budget, no ε is guaranteed";
    if (pr.reported_epsilon !== null && pr.reported_epsilon !== undefined)
      text += "; the image reports ε = " + num(pr.reported_epsilon) +
        (pr.reported_rigorous ? " (not charged by the ledger)" : " (NOMINAL, not rigorous)");
    return text;
  }

  function privacyCard(p, executions) {
    const b = p.privacy_budget, pr = p.privacy || {};
    const how = " (" + b.scope + " scope, " + (pr.accounting || b.accounting) + " accounting, δ = " + (b.delta ?? 0) + ")";
    return plotCard("privacy", "Privacy: rigorous ε charged by the ledger, cumulative per organisation" + how,
      perOrg(p, executions, (e) => e.epsilon_total), { yTitle: "rigorous ε", budget: b.epsilon, extraY: [b.epsilon] });
  }

  function matrixCard(p, models) {
    const c = card("Estimator origins (rows: model owner, columns: organisation that trained the estimators)", "matrix");
    if (!models.length) { c.append(el("p", { class: "hint" }, "no models published")); return c; }
    const origins = p.consortium;
    const t = el("table", { class: "matrix" });
    t.append(el("tr", {}, el("th", {}, "model \\ origin"), ...origins.map((o) => el("th", {}, o))));
    for (const m of models) {
      const counts = {};
      for (const est of m.estimators || []) {
        // estimator ids as the executor publishes them: [creator, counter, digest]; also {origin, trees} or "origin"
        const origin = Array.isArray(est) ? est[0] : typeof est === "string" ? est : (est.origin || est.organisation || "?");
        const n = !Array.isArray(est) && typeof est === "object" && typeof est.trees === "number" ? est.trees : 1;
        counts[origin] = (counts[origin] || 0) + n;
      }
      t.append(el("tr", {}, el("th", {}, m.owner), ...origins.map((o) => el("td", {}, counts[o] || 0))));
    }
    c.append(t);
    return c;
  }

  // ------------------------------------------------------------------ model view
  async function showModel(mid) {
    const base = "/models/" + enc(mid);
    const [m, lin, changes] = await Promise.all([api(base), api(base + "/lineage"), api(base + "/changes")]);
    const view = $("#view");
    view.replaceChildren();
    const head = card("Model " + m.id, "model-facts");
    if (m.gain && m.gain.negative) {
      head.append(el("p", { class: "error", id: "gain-warning" }, "Warning: this model is worse than training alone on " +
        m.gain.organisation + "'s own validation slice (" + m.gain.metric + " " + m.gain.isolated.toFixed(4) + " alone → " +
        m.gain.collaborative.toFixed(4) + " together). Check it before you use it."));
    }
    head.append(facts({ owner: m.owner, process: m.process_id, round: m.round, digest: m.digest, image_digest: m.image_digest,
      size: m.size, access: m.access.join(", "), published: when(m.created), metrics: m.metrics,
      "gain over training alone": m.gain ? m.gain.metric + " " + m.gain.isolated.toFixed(4) + " → " +
        m.gain.collaborative.toFixed(4) + " (" + (m.gain.gain >= 0 ? "+" : "") + m.gain.gain.toFixed(4) + ")" : "—" }));
    const verify = el("button", { id: "verify", type: "button" }, "Verify lineage against the ledger");
    const result = el("div", { id: "verify-result" });
    verify.addEventListener("click", async () => {
      result.textContent = "verifying…";
      try {
        const rep = await api(base + "/verify", { method: "POST" });
        result.replaceChildren(el("p", { class: rep.ok ? "ok" : "error" }, rep.ok ? "verified: " + rep.checks.length + " checks passed"
          : rep.failures + " checks failed"), el("ul", {}, ...rep.checks.filter((c) => !c.ok).map((c) => el("li", { class: "error" }, c.check + ": " + c.detail))));
      } catch (err) { result.replaceChildren(el("p", { class: "error" }, err.message)); }
    });
    head.append(verify, result);
    view.append(head, lineageCard(lin), changesCard("Model record history", "model-history", changes));
  }

  function lineageCard(lin) {
    const c = card("Lineage: " + lin.nodes.length + " executions, " + lin.edges.length + " artifacts", "lineage");
    const orgs = [...new Set(lin.nodes.map((n) => n.organisation))].sort();
    const rounds = lin.nodes.map((n) => n.round);
    const r0 = Math.min(...rounds), r1 = Math.max(...rounds);
    const dx = Math.max(24, Math.min(90, 640 / Math.max(1, r1 - r0))), dy = 44, L = 100, T = 40;
    const pos = {};
    for (const n of lin.nodes) pos[n.id] = [L + (n.round - r0) * dx, T + orgs.indexOf(n.organisation) * dy];
    const s = svg("svg", { width: L + (r1 - r0) * dx + 40, height: T + orgs.length * dy, role: "img", "aria-label": "lineage" });
    const defs = svg("defs", {});
    for (const kind of ["message", "state"]) {
      const marker = svg("marker", { id: "arrow-" + kind, viewBox: "0 0 10 10", refX: 16, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto" });
      marker.append(svg("path", { d: "M0 0 L10 5 L0 10 z", class: "arrow " + kind }));
      defs.append(marker);
    }
    s.append(defs);
    s.append(svg("text", { x: 4, y: 12, class: "axis-title x-title" }, "round"));
    for (const r of roundTicks(r0, r1, 16)) {
      const x = L + (r - r0) * dx;
      s.append(svg("text", { x: x, y: 14, "text-anchor": "middle", class: "round-label", "data-round": r }, r),
        svg("line", { x1: x, x2: x, y1: 20, y2: T + (orgs.length - 1) * dy + 10, class: "grid" }));
    }
    orgs.forEach((o, i) => s.append(svg("text", { x: 4, y: T + i * dy + 4, class: "org-label" }, o)));
    for (const e of lin.edges) {
      const a = pos[e.from], b = pos[e.to];
      if (!a || !b) continue;
      const line = svg("line", { x1: a[0], y1: a[1], x2: b[0], y2: b[1], class: "edge " + e.kind, "marker-end": "url(#arrow-" + e.kind + ")" });
      line.append(svg("title", {}, e.kind + " " + e.digest + " · " + e.from + " → " + e.to));
      s.append(line);
    }
    for (const n of lin.nodes) {
      const circle = svg("circle", { cx: pos[n.id][0], cy: pos[n.id][1], r: 7, class: "node" + (n.id === lin.root ? " root" : ""), "data-id": n.id });
      circle.append(svg("title", {}, n.id + " · round " + n.round + " · block " + n.block + " · tx " + n.completed_tx_id));
      s.append(circle);
    }
    c.append(s, legend("lineage-legend", [
      { label: "message: an output sent to another organisation, read in a later round", kind: "line", color: "#2f6fa3" },
      { label: "state: an organisation's own state carried to its next round", kind: "dash", color: "#9aa5b1" },
      { label: "execution (one organisation, one round)", kind: "dot", color: "#3a8f5c" },
      { label: "the execution that produced this model", kind: "dot", color: "#1f3b57" }]));
    return c;
  }

  if (token) { $("#token").value = token; signIn(); }
})();
