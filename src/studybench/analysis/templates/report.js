/* The drill-down: built from the JSON in #data with textContent only (model text is never parsed as HTML). */
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("data").textContent);
  var list = document.getElementById("parents");
  var $ = function (id) { return document.getElementById(id); };
  var f = { seed: $("f-seed"), status: $("f-status"), dis: $("f-dis"), disc: $("f-disc"), src: $("f-src"), type: $("f-type"), q: $("f-q") };

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function fold(label, text) {
    var d = el("details", "fold");
    d.appendChild(el("summary", null, label));
    d.appendChild(el("pre", null, text));
    return d;
  }
  function row(table, head, value, cls) {
    var tr = el("tr");
    tr.appendChild(el("th", null, head));
    var td = el("td", cls, value);
    tr.appendChild(td);
    table.appendChild(tr);
    return td;
  }
  function solvedCount(atts) {
    var n = 0;
    atts.forEach(function (att) { if (att.every(function (t) { return t.ok; })) n++; });
    return n;
  }

  function buildAttempt(box, p, si, a) {
    var att = p.at[si][a];
    var sys = el("div", "msg system");
    sys.appendChild(el("div", "role", "system"));
    sys.appendChild(fold("system message (" + D.system.length + " characters)", D.system));
    box.appendChild(sys);
    att.forEach(function (t, j) {
      var sub = p.subs[j];
      var u = el("div", "msg user");
      u.appendChild(el("div", "role", "user · sub-problem " + sub.id + " (" + sub.t + ")"));
      u.appendChild(el("pre", null, sub.q !== undefined ? sub.q : "(problem text unavailable: the test set was not found)"));
      box.appendChild(u);
      var m = el("div", "msg assistant");
      m.appendChild(el("div", "role", "model" + (t.fr ? " · finish_reason " + t.fr : "")));
      if (t.e) m.appendChild(el("p", "badge bad", "generation failed: " + t.e));
      if (t.r) m.appendChild(fold("reasoning (" + t.r.length + " characters)", t.r));
      if (t.th !== undefined) m.appendChild(fold("reasoning, removed from what the model sees later (" + t.th.length + " characters)", t.th));
      if (t.raw !== undefined) m.appendChild(fold("full completion with reasoning (" + t.raw.length + " characters)", t.raw));
      if (t.c !== undefined) m.appendChild(el("pre", "reply", t.c === "" ? "(no visible text)" : t.c));
      if (t.mm) m.appendChild(el("p", "badge warn", "the rebuilt conversation differs from the one the model was sent"));
      var v = el("table", "verdict");
      row(v, "extracted", t.x ? (t.x.length ? t.x.join("  |  ") : "(nothing extracted)") : "—");
      row(v, "gold", sub.g !== undefined ? sub.g : "(unavailable)");
      row(v, "rule verdict", t.rc === undefined ? (t.rr || "no verdict") : (t.rc ? "✓ correct: " : "✗ incorrect: ") + (t.rr || ""), t.rc ? "ok" : "bad");
      if (t.lv !== undefined) {
        row(v, "LLM verdict" + (t.lc ? "" : " (does not count)"), t.lv + (t.lj ? ": " + t.lj : ""), t.lv === "TRUE" ? "ok" : (t.lv === "FALSE" ? "bad" : "warn"));
      }
      row(v, "counts as", t.ok ? "correct" : "incorrect", t.ok ? "ok" : "bad");
      m.appendChild(v);
      box.appendChild(m);
    });
  }

  function buildParent(det, p) {
    var body = el("div", "pbody");
    var st = el("table", "subs");
    var hr = el("tr");
    ["sub-problem", "type", "gold"].concat(D.seeds.map(function (s) { return "seed " + s; })).forEach(function (h) { hr.appendChild(el("th", null, h)); });
    st.appendChild(hr);
    p.subs.forEach(function (sub, j) {
      var tr = el("tr");
      tr.appendChild(el("td", null, sub.id));
      tr.appendChild(el("td", null, sub.t));
      tr.appendChild(el("td", null, sub.g !== undefined ? sub.g : "(unavailable)"));
      p.at.forEach(function (atts) {
        var n = atts.filter(function (att) { return att[j].ok; }).length;
        tr.appendChild(el("td", n ? "num ok" : "num bad", n + "/" + D.k));
      });
      st.appendChild(tr);
    });
    body.appendChild(st);
    p.at.forEach(function (atts, si) {
      atts.forEach(function (att, a) {
        var good = att.filter(function (t) { return t.ok; }).length;
        var d = el("details", "attempt" + (good === att.length ? " solved" : ""));
        d.id = "a-" + p._i + "-" + si + "-" + a;
        var s = el("summary", null, "seed " + D.seeds[si] + " · attempt " + a + ": " + good + "/" + att.length + " sub-problems correct");
        if (att.some(function (t) { return t.dis; })) s.appendChild(el("span", "badge warn", " rule ≠ LLM"));
        d.appendChild(s);
        var box = el("div", "conv");
        d.appendChild(box);
        d._build = function () { if (!d._built) { d._built = true; buildAttempt(box, p, si, a); } };
        d.addEventListener("toggle", function () { if (d.open) d._build(); });
        body.appendChild(d);
      });
    });
    det.appendChild(body);
  }

  D.parents.forEach(function (p, i) {
    p._i = i;
    var det = el("details", "parent");
    det.id = "p-" + i;
    var s = el("summary");
    s.appendChild(el("span", "uid", p.u));
    s.appendChild(el("span", "meta", p.d + " · " + p.src + (p.yr ? " " + p.yr : "") + " · " + p.subs.length + " sub-problem" + (p.subs.length === 1 ? "" : "s")));
    p._badge = el("span", "badge");
    s.appendChild(p._badge);
    if (p.dis) s.appendChild(el("span", "badge warn", "rule ≠ LLM"));
    det.appendChild(s);
    det._build = function () { if (!det._built) { det._built = true; buildParent(det, p); } };
    det.addEventListener("toggle", function () { if (det.open) det._build(); });
    p._el = det;
    p._types = {};
    p.subs.forEach(function (sub) { p._types[sub.t] = true; });
    p._text = [p.u, p.sp, p.src, p.d].concat(p.subs.map(function (sub) { return sub.id + " " + (sub.q || ""); })).join("\n").toLowerCase();
    list.appendChild(det);
  });

  function state() {
    var out = [];
    [["seed", f.seed.value !== "0" ? f.seed.value : ""], ["filter", f.status.value], ["dis", f.dis.checked ? "1" : ""],
     ["disc", f.disc.value], ["src", f.src.value], ["type", f.type.value], ["q", f.q.value]].forEach(function (kv) {
      if (kv[1]) out.push(kv[0] + "=" + encodeURIComponent(kv[1]));
    });
    return out.join("&");
  }

  function apply(remember) {
    var si = +f.seed.value || 0, q = f.q.value.trim().toLowerCase(), shown = 0;
    D.parents.forEach(function (p) {
      var solved = p.solved[si];
      p._badge.textContent = (solved ? "solved" : "unsolved") + " · " + solvedCount(p.at[si]) + "/" + D.k + " attempts · Sub " + p.subs_solved[si] + "/" + p.subs.length;
      p._badge.className = "badge " + (solved ? "ok" : "bad");
      var vis = !(f.status.value === "solved" && !solved) && !(f.status.value === "unsolved" && solved) &&
        !(f.dis.checked && !p.dis) && !(f.disc.value && p.d !== f.disc.value) && !(f.src.value && p.src !== f.src.value) &&
        !(f.type.value && !p._types[f.type.value]) && !(q && p._text.indexOf(q) < 0);
      p._el.hidden = !vis;
      if (vis) shown++;
    });
    $("count").textContent = "showing " + shown + " of " + D.parents.length + " parents";
    if (remember) { try { history.replaceState(null, "", "#" + state()); } catch (e) { /* file:// may refuse */ } }
  }

  var timer = null;
  [f.seed, f.status, f.dis, f.disc, f.src, f.type].forEach(function (c) { c.addEventListener("change", function () { apply(true); }); });
  f.q.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(function () { apply(true); }, 150); });

  // The address's #fragment restores a view: seed, filter (solved|unsolved), dis, disc, src, type, q,
  // open=PARENT_UID (opens that parent) and attempt=SEED_INDEX.ATTEMPT (opens that attempt of it).
  function fromHash() {
    var h = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i > 0) { try { h[kv.slice(0, i)] = decodeURIComponent(kv.slice(i + 1)); } catch (e) { /* ignore */ } }
    });
    function pick(sel, v) { if (v !== undefined && Array.prototype.some.call(sel.options, function (o) { return o.value === v; })) sel.value = v; }
    pick(f.seed, h.seed); pick(f.status, h.filter); pick(f.disc, h.disc); pick(f.src, h.src); pick(f.type, h.type);
    f.dis.checked = h.dis === "1";
    if (h.q !== undefined) f.q.value = h.q;
    apply(false);
    if (h.open !== undefined) {
      D.parents.forEach(function (p) {
        if (p.u !== h.open) return;
        p._el._build();
        p._el.open = true;
        if (h.attempt !== undefined) {
          var d = $("a-" + p._i + "-" + h.attempt.replace(".", "-"));
          if (d) { d._build(); d.open = true; }
        }
        p._el.scrollIntoView();
      });
    }
  }
  fromHash();
})();
