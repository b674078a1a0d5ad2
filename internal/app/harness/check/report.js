// The fencecheck report: draws REPORT (see check.WriteHTML) as SVG, with
// no library and no network fetch. When it is done, <pre id="drawn">
// holds what it drew, counted from the page itself, <pre id="colours">
// the colours it drew and those its legend keys, <pre id="zoomed"> what
// the zoom it opened (if any) framed, and <html> has data-rendered="ok";
// a script error sets data-errors instead.
"use strict";
(function () {
	var NS = "http://www.w3.org/2000/svg";
	// LEFT is the margin that names the axes and the rows; TOP, a plot's
	// title; AXIS_H, the time axis's labels under a plot or lane.
	var LEFT = 84, RIGHT = 8, TOP = 15, PLOT_H = 84, AXIS_H = 16, ROW_H = 13, FAULT_ROW_H = 12;
	// HOLDER_MIN_W is the narrowest a violation's holder is drawn in its
	// zoom, however short it held the lock.
	var HOLDER_MIN_W = 6;
	var FAULT_COLORS = { pause: "#e8a33d", kill: "#c0392b", member: "#b07aa1", partition: "#2980b9", request: "#16a085", replace: "#7f8c8d" };

	function el(tag, attrs, parent, text) {
		var e = document.createElement(tag);
		for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
		if (text !== undefined) e.textContent = text;
		if (parent) parent.appendChild(e);
		return e;
	}
	function sv(tag, attrs, parent, text) {
		var e = document.createElementNS(NS, tag);
		for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
		if (text !== undefined) e.textContent = text;
		if (parent) parent.appendChild(e);
		return e;
	}
	function secs(t) { return t < 0 ? "never answered" : (t / 10000).toFixed(3) + " s"; }
	function short(key) { var i = key.lastIndexOf("-"); return i >= 0 ? key.slice(i + 1) : key; }
	function faultColor(kind) { return FAULT_COLORS[kind] || "#999"; }

	// mark draws a write's mark, the shape of its outcome, at cx, cy.
	function mark(svg, o, cx, cy) {
		var m;
		switch (o) {
		case "ok": m = sv("circle", { cx: cx, cy: cy, r: 1.8 }, svg); break;
		case "stale": m = sv("path", { d: "M" + (cx - 3) + "," + (cy - 3) + "l6,6m-6,0l6,-6" }, svg); break;
		case "lost": m = sv("circle", { cx: cx, cy: cy, r: 3 }, svg); break;
		case "unknown": m = sv("path", { d: "M" + cx + "," + (cy - 3.5) + "l3.5,3.5l-3.5,3.5l-3.5,-3.5z" }, svg); break;
		default: m = sv("rect", { x: cx - 2, y: cy - 2, width: 4, height: 4 }, svg);
		}
		m.setAttribute("class", "mark o-" + o);
		return m;
	}
	var MARKS = { ok: 1, stale: 1, lost: 1, unknown: 1, error: 1 };
	function appliedMark(svg, receiver, cx, cy) {
		return sv("path", { "class": "applied r-" + receiver, d: "M" + cx + "," + (cy + 2) + "l-3,5h6z" }, svg);
	}

	var detail = document.getElementById("detail");
	function show(text) { detail.hidden = false; detail.textContent = text; }
	detail.addEventListener("click", function () { detail.hidden = true; });

	var runs = REPORT.runs;
	var main = document.getElementById("runs");
	main.style.gridTemplateColumns = "repeat(" + Math.max(runs.length, 1) + ", minmax(0, 1fr))";
	var colWidth = Math.max(420, Math.floor((document.documentElement.clientWidth - 32 - 24 * (runs.length - 1)) / Math.max(runs.length, 1)));
	var plotW = colWidth - LEFT - RIGHT;
	var drawn = {};
	var sections = {};

	legend(document.getElementById("legend"));

	runs.forEach(function (run) {
		var sec = el("section", { "class": "run " + (run.fenced ? "fenced" : "control"), "data-run": run.name }, main);
		sections[run.name] = sec;
		var x = scale(0, run.span);
		el("h2", {}, sec, run.name + " run: seed " + run.seed + ", " + run.duration);
		summary(run, sec);
		el("p", { "class": "stall-summary" }, sec, run.stallSummary);
		violations(run, sec);
		run.zoom = el("div", { "class": "zoom", hidden: "" }, sec);
		faultLane(run, sec, x);
		run.byRes = {};
		run.writes.forEach(function (w, i) {
			var id = w[0] + "/" + w[1];
			(run.byRes[id] = run.byRes[id] || []).push(i);
		});
		run.badRes = {};
		run.violations.forEach(function (v) { run.badRes[v.res] = true; });
		run.keys.forEach(function (key, ki) {
			var block = el("div", { "class": "key", id: anchor(run, key) }, sec);
			var h = el("h3", { title: key }, block, "key " + short(key));
			el("span", { "class": "sub" }, h, ": its lock holds, a row per worker slot; then each resource's writes");
			holdLane(run, block, ki, x, null);
			run.kinds.forEach(function (kind, kk) {
				plot(run, block, kk, ki, x);
			});
		});
		drawn[run.name] = count(run, sec);
	});

	// count counts what sec, a run's section, drew.
	function count(run, sec) {
		var counts = {};
		run.outcomes.forEach(function (o) { counts[o] = sec.querySelectorAll(".mark.o-" + o).length; });
		counts.violations = sec.querySelectorAll(".vio-item").length;
		counts.marked = sec.querySelectorAll(".vio-ring").length;
		counts.holds = sec.querySelectorAll(".hold").length;
		counts.faults = sec.querySelectorAll(".fault").length;
		counts.stalls = sec.querySelectorAll(".stall").length;
		counts["stalls-past"] = sec.querySelectorAll(".stall.past").length;
		counts.visuals = sec.querySelectorAll("details.visual").length;
		counts.applied = sec.querySelectorAll(".applied").length;
		sec.querySelectorAll("svg[data-res]").forEach(function (svg) {
			counts["res:" + svg.getAttribute("data-res")] = svg.querySelectorAll(".mark").length;
		});
		sec.querySelectorAll("svg.holds[data-key]").forEach(function (svg) {
			counts["rows:" + svg.getAttribute("data-key")] = svg.querySelectorAll("text.slot").length;
		});
		return counts;
	}

	function anchor(run, key) { return (run.fenced ? "fenced-" : "control-") + short(key); }

	// legend keys every colour and shape the runs are drawn with, each
	// entry a swatch drawn as the page draws what it keys.
	function legend(box) {
		var faultKinds = [], applied = false;
		runs.forEach(function (run) {
			run.faultKinds.forEach(function (k) { if (faultKinds.indexOf(k) < 0) faultKinds.push(k); });
			if (run.applied.length > 0) applied = true;
		});
		el("p", {}, box, "Each key of a run has its lock holds, a row per worker slot, over time (across), " +
			"then a plot per resource: each write a mark at its fencing token (up) and the time it was sent (across, seconds since the run's first event).");
		group(box, "writes", [
			["ok", "accepted", function (s) { mark(s, "ok", 8, 6); }],
			["stale", "refused as stale", function (s) { mark(s, "stale", 8, 6); }],
			["lost", "lock lost (the guard refused it)", function (s) { mark(s, "lost", 8, 6); }],
			["unknown", "unknown outcome", function (s) { mark(s, "unknown", 8, 6); }],
			["error", "error", function (s) { mark(s, "error", 8, 6); }],
			["vio", "in a violation", function (s) { sv("circle", { "class": "vio-ring", cx: 8, cy: 6, r: 5 }, s); }],
			["bad", "a resource with a violation", function (s) { sv("rect", { "class": "plot-bg bad", x: 1, y: 1, width: 14, height: 10 }, s); }],
			["span", "zoomed in: from sent to answered, in its mark's colour", function (s) {
				sv("line", { "class": "span o-ok", x1: 1, x2: 15, y1: 4, y2: 4 }, s);
				sv("line", { "class": "span o-stale", x1: 1, x2: 15, y1: 8, y2: 8 }, s);
			}]
		]);
		group(box, "lock holds", [
			["hold", "a hold (a slot's restarted workers alternate shades)", function (s) {
				sv("rect", { "class": "hold inc0", x: 1, y: 2, width: 7, height: 8 }, s);
				sv("rect", { "class": "hold inc1", x: 9, y: 2, width: 7, height: 8 }, s);
			}],
			["open", "no unlock: its worker died holding it, or the run ended", function (s) { sv("rect", { "class": "hold inc0 open", x: 1, y: 2, width: 14, height: 8 }, s); }],
			["stall", "a stall: the next holder's wait after a pause or kill", function (s) { sv("rect", { "class": "stall", x: 1, y: 4.5, width: 14, height: 3 }, s); }],
			["stall-past", "a stall past its bound", function (s) { sv("rect", { "class": "stall past", x: 1, y: 4.5, width: 14, height: 3 }, s); }],
			["holder", "in a violation's zoom: a holder of its writes", function (s) { sv("rect", { "class": "hold vio-holder", x: 2, y: 2, width: 12, height: 8 }, s); }]
		]);
		group(box, "faults (a bar in the faults lane; shading on its worker's row)", faultKinds.map(function (k) {
			return ["fault-" + k, k, function (s) {
				sv("rect", { "class": "fault", x: 1, y: 2, width: 7, height: 8, fill: faultColor(k) }, s);
				sv("rect", { "class": "wfault", x: 9, y: 0, width: 7, height: 12, fill: faultColor(k) }, s);
			}];
		}));
		if (applied) {
			group(box, "effects applied (under the token of the write that recorded them)", (runs[0].receivers || []).map(function (r) {
				return ["applied-" + r, r, function (s) { appliedMark(s, r, 8, 1); }];
			}));
		}
		el("p", {}, box, "Click a mark, a bar or a violation for its details.");
	}
	function group(box, name, entries) {
		var p = el("div", { "class": "lg-group" }, box);
		el("b", {}, p, name + ":");
		entries.forEach(function (e) {
			var span = el("span", { "class": "lg", "data-entry": e[0] }, p);
			var svg = sv("svg", { "class": "swatch", width: 16, height: 12 }, span);
			// Marks are small: their swatches are drawn half as large again.
			e[2](e[0] in MARKS ? sv("g", { transform: "translate(8,6) scale(1.5) translate(-8,-6)" }, svg) : svg);
			span.appendChild(document.createTextNode(" " + e[1]));
		});
	}

	// colours returns the fill and stroke colours of the shapes under
	// root, as computed, each with the class of one shape drawn in it;
	// shapes marked "chrome" (grid lines, plot backgrounds) are left out.
	function colours(root) {
		var out = {};
		root.querySelectorAll("rect, circle, ellipse, path, line, polyline, polygon").forEach(function (e) {
			if (e.classList.contains("chrome")) return;
			var cs = getComputedStyle(e);
			var cols = e.tagName === "line" ? [cs.stroke] : [cs.fill, cs.stroke];
			cols.forEach(function (c) { if (c && c !== "none" && !(c in out)) out[c] = e.getAttribute("class") || e.tagName; });
		});
		return out;
	}
	function legendColours() {
		var out = {};
		document.querySelectorAll("#legend .lg").forEach(function (span) {
			out[span.getAttribute("data-entry")] = Object.keys(colours(span));
		});
		return out;
	}

	function summary(run, sec) {
		var t = el("table", { "class": "summary" }, sec);
		var head = el("tr", {}, t);
		["resource", "attempted", "accepted", "refused (stale)", "lock lost", "unknown", "error", "violations"].forEach(function (h) { el("th", {}, head, h); });
		var vios = {};
		run.violations.forEach(function (v) { var k = v.res.split(":")[0]; vios[k] = (vios[k] || 0) + 1; });
		run.kinds.forEach(function (k) {
			var c = run.counts[k] || {};
			var tr = el("tr", {}, t);
			[k, c.Attempted, c.Accepted, c.Refused, c.LockLost, c.Unknown, c.Errors].forEach(function (v) { el("td", {}, tr, String(v === undefined ? 0 : v)); });
			el("td", vios[k] ? { "class": "bad" } : {}, tr, String(vios[k] || 0));
		});
	}

	function violations(run, sec) {
		if (run.violations.length === 0) {
			el("p", { "class": "none" }, sec, "No violation: every stale write was refused.");
			return;
		}
		el("p", {}, sec, run.violations.length + " violations (click one to find it):");
		var ol = el("ol", { "class": "violations" }, sec);
		run.violations.forEach(function (v, vi) {
			var li = el("li", { "class": "vio-item", "data-v": vi }, ol);
			el("span", { "class": "vk" }, li, v.kind);
			li.appendChild(document.createTextNode(" " + v.res + ": " + v.detail));
			li.addEventListener("click", function () { focus(run, vi); });
			if (v.visual) {
				var d = el("details", { "class": "visual" }, li);
				el("summary", {}, d, "porcupine's visualization of this history");
				d.addEventListener("toggle", function () {
					// Sandboxed: its script runs, apart from the report's.
					if (d.open && !d.querySelector("iframe")) el("iframe", { sandbox: "allow-scripts", srcdoc: v.visual, title: "porcupine: " + v.res }, d);
				});
				d.addEventListener("click", function (e) { e.stopPropagation(); });
			} else if (v.omitted) {
				el("div", {}, li, "(porcupine's visualization left out: the report's budget for them is spent)");
			}
		});
	}

	// scale maps times from..to (tenths of a millisecond) across a plot.
	function scale(from, to) {
		var f = function (t) { return LEFT + (to > from ? (Math.max(from, Math.min(to, t)) - from) / (to - from) : 0) * plotW; };
		f.from = from; f.to = to;
		f.inside = function (t) { return t >= from && t <= to; };
		return f;
	}
	// axis draws the time axis of a plot or lane whose area runs from y0
	// to y1: grid lines across it, their times under it, and its name.
	function axis(svg, x, y0, y1) {
		var secsFrom = x.from / 10000, secsTo = x.to / 10000;
		var step = niceStep(secsTo - secsFrom);
		for (var s = Math.ceil(secsFrom / step) * step; s <= secsTo; s += step) {
			var gx = x(s * 10000);
			sv("line", { "class": "grid chrome", x1: gx, x2: gx, y1: y0, y2: y1 }, svg);
			sv("text", { x: gx + 2, y: y1 + 11 }, svg, String(Math.round(s * 1000) / 1000));
		}
		sv("text", { "class": "axis-name", x: 0, y: y1 + 11 }, svg, "time (s) →");
	}
	function niceStep(total) {
		var steps = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600];
		for (var i = 0; i < steps.length; i++) if (total / steps[i] <= 10) return steps[i];
		return 1200;
	}

	function faultLane(run, sec, x) {
		if (run.faultKinds.length === 0) return;
		var h = run.faultKinds.length * FAULT_ROW_H;
		el("h3", {}, sec, "faults (" + run.faults.length + ")");
		var svg = sv("svg", { width: colWidth, height: h + AXIS_H }, sec);
		axis(svg, x, 0, h);
		run.faultKinds.forEach(function (k, i) {
			sv("text", { x: 0, y: i * FAULT_ROW_H + 10 }, svg, k);
		});
		run.faults.forEach(function (f, fi) {
			var x0 = x(f[2]), w = Math.max(1.5, x(f[3]) - x0);
			var r = sv("rect", { "class": "fault", x: x0, y: f[0] * FAULT_ROW_H + 1, width: w, height: FAULT_ROW_H - 2, fill: faultColor(run.faultKinds[f[0]]) }, svg);
			r.addEventListener("click", function () {
				show(run.faultKinds[f[0]] + " fault" + (f[1] >= 0 ? " on worker " + run.workers[f[1]] : " on etcd") +
					"\nfrom " + secs(f[2]) + " to " + secs(f[3]) + (run.faultDetail[fi] ? "\n" + run.faultDetail[fi] : "") +
					"\n" + (run.faultHow[f[0]] || ""));
			});
		});
	}

	// holdLane draws key ki's lock holds in x's window: a row per worker
	// slot, its restarted workers along the same row in alternating
	// shades; behind them, the faults on each slot's workers; over them,
	// the stalls. In a violation's zoom, holders names the holds
	// ("worker/token") of the violation's writes, each drawn framed and
	// at least HOLDER_MIN_W wide. It returns the lane and the holds it
	// framed.
	function holdLane(run, block, ki, x, holders) {
		var holds = run.holds.filter(function (h) { return h[0] === ki && h[4] >= x.from && h[3] <= x.to; });
		var slot = function (w) { return run.workerSlot[w][0]; };
		var rows = {}, order = [];
		holds.forEach(function (h) { var s = slot(h[1]); if (!(s in rows)) { rows[s] = 0; order.push(s); } });
		order.sort(function (a, b) { return a - b; });
		order.forEach(function (s, i) { rows[s] = i; });
		var has = function (w) { return slot(w) in rows; };
		var rowY = function (w) { return rows[slot(w)] * ROW_H; };
		var attrs = { width: colWidth, height: Math.max(order.length, 1) * ROW_H + 2, "class": "holds" };
		if (!holders) attrs["data-key"] = run.keys[ki];
		var svg = sv("svg", attrs, block);
		order.forEach(function (s) {
			sv("text", { "class": "slot", x: LEFT - 4, y: rows[s] * ROW_H + 10, "text-anchor": "end" }, svg, run.slots[s]);
		});
		run.faults.forEach(function (f) {
			if (f[1] < 0 || !has(f[1]) || f[3] < x.from || f[2] > x.to) return;
			var x0 = x(f[2]);
			sv("rect", { "class": "wfault", x: x0 - 1, y: rowY(f[1]), width: Math.max(2, x(f[3]) - x0 + 2), height: ROW_H, fill: faultColor(run.faultKinds[f[0]]) }, svg);
		});
		var framed = [];
		holds.forEach(function (hd) {
			var held = !!holders && holders[hd[1] + "/" + hd[2]] === true;
			if (held) framed.push(hd);
			holdBar(run, svg, hd, x, rowY(hd[1]), held);
		});
		// A stall: a bar across the next holder's row from its lock to its
		// first accepted writes, red past its bound.
		run.stalls.forEach(function (st, si) {
			if (st[0] !== ki || !has(st[1]) || st[3] < x.from || st[2] > x.to) return;
			var x0 = x(st[2]);
			var r = sv("rect", { "class": "stall" + (st[4] ? " past" : ""), x: x0, y: rowY(st[1]) + ROW_H / 2 - 1.5, width: Math.max(2, x(st[3]) - x0), height: 3 }, svg);
			r.addEventListener("click", function () {
				show((st[4] ? "STALL past its bound" : "stall within its bound") + ", key " + run.keys[st[0]] + "\nfrom " + secs(st[2]) + " to " + secs(st[3]) + "\n" + run.stallDetail[si]);
			});
		});
		return { svg: svg, framed: framed };
	}

	// holdBar draws hold hd on the row at y; held says it is a holder of
	// the zoomed violation's writes.
	function holdBar(run, svg, hd, x, y, held) {
		var x0 = x(hd[3]), w = Math.max(held ? HOLDER_MIN_W : 1, x(hd[4]) - x0);
		var cls = held ? "hold vio-holder" : "hold inc" + (run.workerSlot[hd[1]][1] % 2) + (hd[5] ? " open" : "");
		var r = sv("rect", { "class": cls, x: x0, y: y + 2, width: w, height: ROW_H - 4 }, svg);
		r.addEventListener("click", function () {
			show("lock hold: worker " + run.workers[hd[1]] + ", key " + run.keys[hd[0]] + "\ntoken " + hd[2] +
				"\nfrom " + secs(hd[3]) + " to " + secs(hd[4]) + (hd[5] ? " (no unlock: the worker's last event)" : ""));
		});
	}

	// plot draws key ki's writes to resource kind kk in x's window: its
	// title above, the token axis on its left, the time axis under it.
	function plot(run, block, kk, ki, x) {
		var kind = run.kinds[kk], key = run.keys[ki], bad = run.badRes[kind + ":" + key];
		var idx = (run.byRes[kk + "/" + ki] || []).filter(function (i) { return x.inside(run.writes[i][4]); });
		var lo = Infinity, hi = -Infinity;
		idx.forEach(function (i) { var t = run.writes[i][3]; if (t < lo) lo = t; if (t > hi) hi = t; });
		if (idx.length === 0) { lo = 0; hi = 1; }
		if (hi === lo) { hi = lo + 1; }
		var pad = (hi - lo) * 0.05;
		lo -= pad; hi += pad;
		var y = function (t) { return TOP + 4 + (1 - (t - lo) / (hi - lo)) * (PLOT_H - 8); };
		var svg = sv("svg", { width: colWidth, height: TOP + PLOT_H + AXIS_H, "data-res": kind + ":" + key }, block);
		sv("rect", { "class": "plot-bg" + (bad ? " bad" : " chrome"), x: LEFT, y: TOP, width: plotW, height: PLOT_H }, svg);
		axis(svg, x, TOP, TOP + PLOT_H);
		var title = sv("text", { x: LEFT, y: TOP - 4 }, svg);
		sv("tspan", { "font-weight": "600" }, title, kind);
		sv("tspan", {}, title, ": " + idx.length + " writes" + (kind === "effects" ? ", " + run.applied.filter(function (a) { return a[1] === ki; }).length + " applied" : ""));
		sv("text", { "class": "axis-name", x: 0, y: TOP + PLOT_H / 2 + 4 }, svg, "token ↑");
		sv("text", { x: LEFT - 4, y: TOP + 9, "text-anchor": "end" }, svg, String(Math.round(hi - pad)));
		sv("text", { x: LEFT - 4, y: TOP + PLOT_H - 2, "text-anchor": "end" }, svg, String(Math.round(lo + pad)));
		// Accepted writes first, so that the rarer marks are drawn on top.
		var sorted = idx.slice().sort(function (a, b) { return (run.writes[a][6] === 0 ? 0 : 1) - (run.writes[b][6] === 0 ? 0 : 1); });
		var rings = sv("g", {}, null);
		sorted.forEach(function (i) {
			var w = run.writes[i], cx = x(w[4]), cy = y(w[3]);
			var o = run.outcomes[w[6]];
			if (x.zoomed) {
				// Zoomed in, each write's line runs from when it was sent
				// to its answer: a stale write that arrived late shows.
				sv("line", { "class": "span o-" + o, x1: cx, x2: x(w[5] < 0 ? x.to : w[5]), y1: cy, y2: cy }, svg);
			}
			mark(svg, o, cx, cy).setAttribute("data-i", i);
			if (w[7] >= 0) sv("circle", { "class": "vio-ring", cx: cx, cy: cy, r: 6.5, "data-v": w[7] }, rings);
		});
		svg.appendChild(rings);
		// The effects the receivers applied on this key (an effects run):
		// a tick under the token's height, one colour per receiver.
		run.applied.forEach(function (a) {
			if (a[1] !== ki || kind !== "effects" || !x.inside(a[3])) return;
			appliedMark(svg, run.receivers[a[0]], x(a[3]), Math.min(TOP + PLOT_H - 4, Math.max(TOP + 4, y(a[2]))));
		});
		svg.addEventListener("click", function (e) {
			var i = e.target.getAttribute && e.target.getAttribute("data-i");
			if (i === null || i === undefined) return;
			var w = run.writes[+i];
			var text = "write " + run.values[+i] + "\n" + kind + " of key " + key + ", worker " + run.workers[w[2]] +
				"\ntoken " + w[3] + ": " + run.outcomes[w[6]] + "\nsent " + secs(w[4]) + ", answered " + secs(w[5]);
			if (w[7] >= 0) { var v = run.violations[w[7]]; text += "\n\nVIOLATION " + v.kind + ": " + v.detail; }
			show(text);
		});
	}

	function focus(run, vi) {
		var sec = sections[run.name], v = run.violations[vi];
		var target = sec.querySelector('svg[data-res="' + CSS.escape(v.res) + '"]');
		var rings = sec.querySelectorAll('.vio-ring[data-v="' + vi + '"]');
		if (rings.length > 0) target = rings[0].ownerSVGElement;
		if (target) target.scrollIntoView({ block: "center" });
		rings.forEach(function (r) {
			r.classList.remove("flash");
			void r.getBoundingClientRect();
			r.classList.add("flash");
		});
		zoom(run, vi);
	}

	// zoom draws, under the run's violations, its key's holds and its
	// resource's writes in the seconds around violation vi's writes, the
	// holds of the workers and tokens that wrote them framed alike.
	function zoom(run, vi) {
		var v = run.violations[vi], box = run.zoom;
		var kind = v.res.slice(0, v.res.indexOf(":")), key = v.res.slice(v.res.indexOf(":") + 1);
		var kk = run.kinds.indexOf(kind), ki = run.keys.indexOf(key);
		box.textContent = "";
		box.hidden = false;
		var head = el("div", { "class": "zoom-head" }, box);
		el("b", {}, head, "violation " + (vi + 1) + ": " + v.kind + " on " + v.res);
		el("div", {}, head, v.detail);
		var close = el("button", { type: "button" }, head, "close");
		close.addEventListener("click", function () { box.hidden = true; });
		var from = Infinity, to = -Infinity, holders = {};
		run.writes.forEach(function (w) {
			if (w[7] !== vi) return;
			from = Math.min(from, w[4]); to = Math.max(to, w[5] >= 0 ? w[5] : w[4]);
			if (w[1] === ki) holders[w[2] + "/" + w[3]] = true;
		});
		if (from === Infinity || kk < 0 || ki < 0) {
			el("div", {}, box, "(this violation is about the whole resource: see its plot below" + (v.visual ? ", and porcupine's visualization" : "") + ")");
			zoomed(run, vi, box);
			return;
		}
		var pad = Math.max(5000, (to - from) * 0.3);
		var x = scale(Math.max(0, from - pad), Math.min(run.span, to + pad));
		x.zoomed = true;
		el("div", { "class": "zoom-note" }, box, "from " + secs(x.from) + " to " + secs(x.to) + ": key " + short(key) +
			"'s holds, then its " + kind + " writes");
		var lane = holdLane(run, box, ki, x, holders);
		var who = lane.framed.map(function (hd) {
			return "token " + hd[2] + " (" + run.workers[hd[1]] + ", " + secs(hd[3]) + " to " + secs(hd[4]) + (hd[5] ? ", no unlock" : "") + ")";
		});
		box.insertBefore(el("div", { "class": "zoom-holders" }, null, "framed, the holds of the violation's writes: " + (who.join("; ") || "none in this window")), lane.svg);
		plot(run, box, kk, ki, x);
		zoomed(run, vi, box);
	}

	// zoomed says, in <pre id="zoomed">, how many holders the zoom in box
	// framed and how many of them are not drawn as the first one is.
	function zoomed(run, vi, box) {
		var bars = box.querySelectorAll(".vio-holder"), first = null, unlike = 0;
		bars.forEach(function (b) {
			var cs = getComputedStyle(b);
			var look = [b.getAttribute("class"), b.getAttribute("height"), cs.fill, cs.stroke, cs.strokeWidth, cs.strokeDasharray,
				+b.getAttribute("width") >= HOLDER_MIN_W].join("|");
			if (first === null) first = look;
			else if (look !== first) unlike++;
		});
		document.getElementById("zoomed").textContent = JSON.stringify({ run: run.name, v: vi, holders: bars.length, unlike: unlike });
	}

	// #control=N (or #fenced=N) shows that run's violation N on load,
	// zoomed in, under its list.
	var m = /^#(control|fenced)=(\d+)$/.exec(location.hash);
	if (m) {
		runs.forEach(function (run) {
			if ((run.fenced ? "fenced" : "control") === m[1] && run.violations[+m[2]]) zoom(run, +m[2]);
		});
	}

	document.getElementById("drawn").textContent = JSON.stringify(drawn);
	document.getElementById("colours").textContent = JSON.stringify({ drawn: colours(main), legend: legendColours() });
	document.documentElement.setAttribute("data-rendered", "ok");
})();
