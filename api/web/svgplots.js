// Inline-SVG drawing for the Consortia explorer: elements, axes with ticks and titles, legends, line plots.
// No external resources; everything is exported on window.SvgPlots.
"use strict";
(function () {
  const SVGNS = "http://www.w3.org/2000/svg";
  const COLORS = ["#2f6fa3", "#d9822b", "#3a8f5c", "#8e44ad", "#c0392b", "#16a085", "#7f8c8d", "#b7950b"];

  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // "nice" tick values covering [lo, hi] (1, 2, 5 × 10^k steps)
  function ticks(lo, hi, count) {
    if (!(hi > lo)) return [lo];
    const raw = (hi - lo) / Math.max(1, count), mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
    return out;
  }

  // round ticks: integers only, at most ~max labels
  function roundTicks(r0, r1, max) {
    const step = Math.max(1, Math.ceil((r1 - r0 + 1) / (max || 12)));
    const out = [];
    for (let r = r0; r <= r1; r += step) out.push(r);
    if (out[out.length - 1] !== r1) out.push(r1);
    return out;
  }

  function fmt(v) {
    const a = Math.abs(v);
    return a !== 0 && (a >= 1e5 || a < 1e-3) ? v.toExponential(1) : String(+v.toPrecision(4));
  }

  // a legend as an HTML list: [{label, color, kind: "line"|"dash"|"box"|"dot", cls}]
  function legend(id, items) {
    const ul = document.createElement("ul");
    ul.className = "legend";
    if (id) ul.id = id;
    for (const it of items) {
      const li = document.createElement("li");
      const s = svg("svg", { width: 22, height: 12, "aria-hidden": "true" });
      const look = {};
      if (it.cls) look.class = it.cls;
      if (it.color) { look.fill = it.color; look.stroke = it.color; }
      if (it.kind === "box") s.append(svg("rect", Object.assign({ x: 3, y: 1, width: 16, height: 10 }, look)));
      else if (it.kind === "dot") s.append(svg("circle", Object.assign({ cx: 11, cy: 6, r: 5 }, look)));
      else {
        const line = svg("line", Object.assign({ x1: 1, y1: 6, x2: 21, y2: 6, "stroke-width": 2 }, look));
        if (it.kind === "dash") line.setAttribute("stroke-dasharray", "4 3");
        s.append(line);
      }
      li.append(s, document.createTextNode(" " + it.label));
      ul.append(li);
    }
    return ul;
  }

  // axes of a plot area [L, W-R] x [T, H-B]: ticks, tick labels and axis titles
  function axes(s, geo, xs, ys, X, Y, xTitle, yTitle) {
    const { W, H, L, R, T, B } = geo;
    s.append(svg("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis" }),
      svg("line", { x1: L, y1: T, x2: L, y2: H - B, class: "axis" }));
    for (const x of xs) {
      s.append(svg("line", { x1: X(x), x2: X(x), y1: H - B, y2: H - B + 4, class: "axis" }),
        svg("text", { x: X(x), y: H - B + 15, "text-anchor": "middle", class: "tick x-tick" }, x));
    }
    for (const y of ys) {
      s.append(svg("line", { x1: L - 4, x2: L, y1: Y(y), y2: Y(y), class: "axis" }),
        svg("line", { x1: L, x2: W - R, y1: Y(y), y2: Y(y), class: "grid" }),
        svg("text", { x: L - 6, y: Y(y) + 4, "text-anchor": "end", class: "tick y-tick" }, fmt(y)));
    }
    s.append(svg("text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle", class: "axis-title x-title" }, xTitle));
    s.append(svg("text", { x: 12, y: (T + H - B) / 2, "text-anchor": "middle", class: "axis-title y-title",
      transform: "rotate(-90 12 " + (T + H - B) / 2 + ")" }, yTitle));
  }

  // series: [{name, points: [[round, value], ...]}]; opts: {yTitle, budget, extraY}
  function linePlot(series, opts) {
    const geo = { W: 620, H: 250, L: 70, R: 20, T: 12, B: 44 };
    const all = series.flatMap((s) => s.points);
    if (!all.length) return null;
    const xsAll = all.map((p) => p[0]), ysAll = all.map((p) => p[1]).concat(opts.extraY || []);
    const x0 = Math.min(...xsAll), x1 = Math.max(...xsAll, x0 + 1);
    let y0 = Math.min(...ysAll), y1 = Math.max(...ysAll);
    if (y0 > 0 && y0 < y1 * 0.5) y0 = 0;
    if (y1 === y0) { y1 = y0 + (Math.abs(y0) || 1) * 0.5; y0 -= (y1 - y0); }
    const pad = (y1 - y0) * 0.05; y0 -= y0 === 0 ? 0 : pad; y1 += pad;
    const { W, H, L, R, T, B } = geo;
    const X = (x) => L + (x - x0) / (x1 - x0) * (W - L - R), Y = (y) => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
    const s = svg("svg", { width: W, height: H, role: "img", "aria-label": opts.yTitle + " per round" });
    axes(s, geo, roundTicks(x0, x1, 12), ticks(y0, y1, 4), X, Y, "round", opts.yTitle);
    const items = [];
    if (opts.budget !== undefined) {
      s.append(svg("line", { x1: L, x2: W - R, y1: Y(opts.budget), y2: Y(opts.budget), class: "budget" }));
      items.push({ label: "budget ε = " + opts.budget, kind: "dash", cls: "budget" });
    }
    series.forEach((ser, i) => {
      const color = COLORS[i % COLORS.length];
      const d = ser.points.map((p, j) => (j ? "L" : "M") + X(p[0]).toFixed(1) + " " + Y(p[1]).toFixed(1)).join(" ");
      // earlier series drawn wider, so that organisations with identical values stay visible underneath
      const width = 2 + 2 * (series.length - 1 - i);
      s.append(svg("path", { d: d, class: "series", stroke: color, fill: "none", "stroke-width": width, "stroke-opacity": 0.85, "data-org": ser.name }));
      for (const p of ser.points) {
        const dot = svg("circle", { cx: X(p[0]), cy: Y(p[1]), r: 2.5, fill: color });
        dot.append(svg("title", {}, ser.name + " · round " + p[0] + " · " + fmt(p[1])));
        s.append(dot);
      }
      items.push({ label: ser.name, color: color, kind: "line" });
    });
    return { svg: s, legend: legend(null, items) };
  }

  window.SvgPlots = { svg, ticks, roundTicks, fmt, legend, linePlot, COLORS };
})();
