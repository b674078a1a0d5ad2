// The fencecheck report: draws REPORT (see check.WriteHTML) as SVG, with
// no library and no network fetch. When it is done, <pre id="drawn">
// holds what it drew, counted from the page itself, and <html> has
// data-rendered="ok"; a script error sets data-errors instead.
"use strict";
(function () {
	var NS = "http://www.w3.org/2000/svg";
	var LEFT = 64, RIGHT = 8, PLOT_H = 84, ROW_H = 9, FAULT_ROW_H = 11;
	var FAULT_COLORS = { pause: "#e8a33d", kill: "#c0392b", member: "#8e44ad", partition: "#2980b9", request: "#16a085", replace: "#7f8c8d" };

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
	function workerColor(i) { return "hsl(" + Math.round((i * 137.5) % 360) + ",55%,48%)"; }

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
			el("h3", { title: key }, block, "key " + short(key));
			holdLane(run, block, ki, x);
			run.kinds.forEach(function (kind, kk) {
				plot(run, block, kk, ki, x);
			});
		});
		var counts = {};
		run.outcomes.forEach(function (o) { counts[o] = sec.querySelectorAll(".mark.o-" + o).length; });
		counts.violations = sec.querySelectorAll(".vio-item").length;
		counts.marked = sec.querySelectorAll(".vio-ring").length;
		counts.holds = sec.querySelectorAll(".hold").length;
		counts.faults = sec.querySelectorAll(".fault").length;
		counts.stalls = sec.querySelectorAll(".stall").length;
		counts["stalls-past"] = sec.querySelectorAll(".stall.past").length;
		counts.visuals = sec.querySelectorAll("details.visual").length;
		sec.querySelectorAll("svg[data-res]").forEach(function (svg) {
			counts["res:" + svg.getAttribute("data-res")] = svg.querySelectorAll(".mark").length;
		});
		drawn[run.name] = counts;
	});

	function anchor(run, key) { return (run.fenced ? "fenced-" : "control-") + short(key); }

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
	function axis(svg, x, h) {
		var secsFrom = x.from / 10000, secsTo = x.to / 10000;
		var step = niceStep(secsTo - secsFrom);
		for (var s = Math.ceil(secsFrom / step) * step; s <= secsTo; s += step) {
			var gx = x(s * 10000);
			sv("line", { "class": "grid", x1: gx, x2: gx, y1: 0, y2: h }, svg);
			sv("text", { x: gx + 2, y: h + 10 }, svg, (Math.round(s * 1000) / 1000) + " s");
		}
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
		var svg = sv("svg", { width: colWidth, height: h + 14 }, sec);
		axis(svg, x, h);
		run.faultKinds.forEach(function (k, i) {
			sv("text", { x: 0, y: i * FAULT_ROW_H + 9 }, svg, k);
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

	function holdLane(run, block, ki, x) {
		var holds = run.holds.filter(function (h) { return h[0] === ki && h[4] >= x.from && h[3] <= x.to; });
		var rows = {}, order = [];
		holds.forEach(function (h) { if (!(h[1] in rows)) { rows[h[1]] = 0; order.push(h[1]); } });
		order.sort(function (a, b) { return run.workers[a] < run.workers[b] ? -1 : 1; });
		order.forEach(function (w, i) { rows[w] = i; });
		var h = Math.max(order.length, 1) * ROW_H;
		var svg = sv("svg", { width: colWidth, height: h + 2, "class": "holds" }, block);
		order.forEach(function (w) {
			sv("text", { x: 0, y: rows[w] * ROW_H + 8 }, svg, run.workers[w]);
		});
		run.faults.forEach(function (f) {
			if (f[1] < 0 || !(f[1] in rows) || f[3] < x.from || f[2] > x.to) return;
			var x0 = x(f[2]);
			sv("rect", { "class": "wfault", x: x0 - 1, y: rows[f[1]] * ROW_H, width: Math.max(2, x(f[3]) - x0 + 2), height: ROW_H, fill: faultColor(run.faultKinds[f[0]]) }, svg);
		});
		holds.forEach(function (hd) {
			var x0 = x(hd[3]);
			var r = sv("rect", { "class": "hold" + (hd[5] ? " open" : ""), x: x0, y: rows[hd[1]] * ROW_H + 1, width: Math.max(1, x(hd[4]) - x0), height: ROW_H - 2, fill: workerColor(hd[1]) }, svg);
			r.addEventListener("click", function () {
				show("lock hold: worker " + run.workers[hd[1]] + ", key " + run.keys[hd[0]] + "\ntoken " + hd[2] +
					"\nfrom " + secs(hd[3]) + " to " + secs(hd[4]) + (hd[5] ? " (no unlock: the worker's last event)" : ""));
			});
		});
		// A stall: a bar across the next holder's row from its lock to its
		// first accepted writes, red past its bound.
		run.stalls.forEach(function (st, si) {
			if (st[0] !== ki || !(st[1] in rows) || st[3] < x.from || st[2] > x.to) return;
			var x0 = x(st[2]);
			var r = sv("rect", { "class": "stall" + (st[4] ? " past" : ""), x: x0, y: rows[st[1]] * ROW_H + ROW_H / 2 - 1.5, width: Math.max(2, x(st[3]) - x0), height: 3 }, svg);
			r.addEventListener("click", function () {
				show((st[4] ? "STALL past its bound" : "stall within its bound") + ", key " + run.keys[st[0]] + "\nfrom " + secs(st[2]) + " to " + secs(st[3]) + "\n" + run.stallDetail[si]);
			});
		});
	}

	function plot(run, block, kk, ki, x) {
		var kind = run.kinds[kk], key = run.keys[ki], bad = run.badRes[kind + ":" + key];
		var idx = (run.byRes[kk + "/" + ki] || []).filter(function (i) { return x.inside(run.writes[i][4]); });
		var lo = Infinity, hi = -Infinity;
		idx.forEach(function (i) { var t = run.writes[i][3]; if (t < lo) lo = t; if (t > hi) hi = t; });
		if (idx.length === 0) { lo = 0; hi = 1; }
		if (hi === lo) { hi = lo + 1; }
		var pad = (hi - lo) * 0.05;
		lo -= pad; hi += pad;
		var y = function (t) { return 4 + (1 - (t - lo) / (hi - lo)) * (PLOT_H - 8); };
		var svg = sv("svg", { width: colWidth, height: PLOT_H + 14, "data-res": kind + ":" + key }, block);
		sv("rect", { "class": "plot-bg" + (bad ? " bad" : ""), x: LEFT, y: 0, width: plotW, height: PLOT_H }, svg);
		axis(svg, x, PLOT_H);
		sv("text", { x: 0, y: 12, "font-weight": "600" }, svg, kind);
		sv("text", { x: 0, y: 26 }, svg, idx.length + " writes" + (kind === "effects" ? ", " + run.applied.filter(function (a) { return a[1] === ki; }).length + " applied" : ""));
		sv("text", { x: 0, y: PLOT_H - 14 }, svg, "token");
		sv("text", { x: 0, y: PLOT_H - 2 }, svg, Math.round(lo + pad) + "–" + Math.round(hi - pad));
		// Accepted writes first, so that the rarer marks are drawn on top.
		var sorted = idx.slice().sort(function (a, b) { return (run.writes[a][6] === 0 ? 0 : 1) - (run.writes[b][6] === 0 ? 0 : 1); });
		var rings = sv("g", {}, null);
		sorted.forEach(function (i) {
			var w = run.writes[i], cx = x(w[4]), cy = y(w[3]);
			var o = run.outcomes[w[6]], m;
			if (x.zoomed) {
				// Zoomed in, each write's line runs from when it was sent
				// to its answer: a stale write that arrived late shows.
				sv("line", { "class": "span o-" + o, x1: cx, x2: x(w[5] < 0 ? x.to : w[5]), y1: cy, y2: cy }, svg);
			}
			switch (o) {
			case "ok": m = sv("circle", { cx: cx, cy: cy, r: 1.8 }, svg); break;
			case "stale": m = sv("path", { d: "M" + (cx - 3) + "," + (cy - 3) + "l6,6m-6,0l6,-6" }, svg); break;
			case "lost": m = sv("circle", { cx: cx, cy: cy, r: 3 }, svg); break;
			case "unknown": m = sv("path", { d: "M" + cx + "," + (cy - 3.5) + "l3.5,3.5l-3.5,3.5l-3.5,-3.5z" }, svg); break;
			default: m = sv("rect", { x: cx - 2, y: cy - 2, width: 4, height: 4 }, svg);
			}
			m.setAttribute("class", "mark o-" + o);
			m.setAttribute("data-i", i);
			if (w[7] >= 0) sv("circle", { "class": "vio-ring", cx: cx, cy: cy, r: 6.5, "data-v": w[7] }, rings);
		});
		svg.appendChild(rings);
		// The effects the receivers applied on this key (an effects run):
		// a tick under the token's height, one colour per receiver.
		run.applied.forEach(function (a) {
			if (a[1] !== ki || kind !== "effects" || !x.inside(a[3])) return;
			var cx = x(a[3]), cy = Math.min(PLOT_H - 4, Math.max(4, y(a[2])));
			sv("path", { "class": "applied r-" + run.receivers[a[0]], d: "M" + cx + "," + (cy + 2) + "l-3,5h6z" }, svg);
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
	// resource's writes in the seconds around violation vi's writes.
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
		var from = Infinity, to = -Infinity;
		run.writes.forEach(function (w) {
			if (w[7] === vi) { from = Math.min(from, w[4]); to = Math.max(to, w[5] >= 0 ? w[5] : w[4]); }
		});
		if (from === Infinity || kk < 0 || ki < 0) {
			el("div", {}, box, "(this violation is about the whole resource: see its plot below" + (v.visual ? ", and porcupine's visualization" : "") + ")");
			return;
		}
		var pad = Math.max(5000, (to - from) * 0.3);
		var x = scale(Math.max(0, from - pad), Math.min(run.span, to + pad));
		x.zoomed = true;
		el("div", { "class": "zoom-note" }, box, "from " + secs(x.from) + " to " + secs(x.to) + ": key " + short(key) + "'s holds, then its " + kind + " writes");
		holdLane(run, box, ki, x);
		plot(run, box, kk, ki, x);
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
	document.documentElement.setAttribute("data-rendered", "ok");
})();
