// dlock dashboard: renders the server's Snapshot (GET /v1/dashboard/stream,
// or GET /v1/dashboard every 2 s while the stream is down).
//
// Lock names and owners are user input: every string reaches the DOM as
// textContent or an attribute value, never as markup. No inline handlers
// or styles, so the page runs under a strict Content-Security-Policy.
"use strict";

(() => {
  const STREAM = "/v1/dashboard/stream";
  const POLL = "/v1/dashboard";
  const POLL_MS = 2000;
  const RECONNECT_MS = 10000; // a closed stream is retried this often
  const STALE_MS = 7000; // the stream sends a snapshot at least every 2 s
  const SVG_NS = "http://www.w3.org/2000/svg";

  const $ = (id) => document.getElementById(id);

  let snap = null; // the last Snapshot
  let snapAt = 0; // performance.now() when it was taken (arrival less its age_ms)
  let stream = null;
  let pollTimer = 0;
  let pollRun = 0;
  let reconnectTimer = 0;
  let ticking = []; // cells that count locally: {cell, base, sign, fmt}
  let canForce = false; // the viewer is an admin: offer force-release
  let confirming = null; // the holder the confirmation dialog is about

  // --- DOM helpers: text only ------------------------------------------

  function el(tag, attrs, ...kids) {
    const n = document.createElement(tag);
    setAttrs(n, attrs);
    for (const k of kids) {
      // A string becomes a text node: never parsed as markup.
      if (k !== null && k !== undefined) n.append(k instanceof Node ? k : String(k));
    }
    return n;
  }

  function svg(tag, attrs, ...kids) {
    const n = document.createElementNS(SVG_NS, tag);
    setAttrs(n, attrs);
    n.append(...kids);
    return n;
  }

  function setAttrs(n, attrs) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== null && v !== undefined) n.setAttribute(k, String(v));
    }
  }

  // oneLine is text on one line, cut with an ellipsis if too long, whole
  // in its title.
  function oneLine(text) {
    return el("span", { class: "one-line", title: text }, text);
  }

  function empty(text) {
    return el("p", { class: "empty" }, text);
  }

  // --- formatting --------------------------------------------------------

  function fmtDur(ms) {
    if (ms < 0) ms = 0;
    if (ms < 10000) return (ms / 1000).toFixed(1) + " s";
    const s = Math.floor(ms / 1000);
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + "m " + String(s % 60).padStart(2, "0") + "s";
    return Math.floor(s / 3600) + "h " + String(Math.floor(s / 60) % 60).padStart(2, "0") + "m";
  }

  function fmtTime(t) {
    const d = new Date(t);
    if (isNaN(d)) return "—";
    return d.toLocaleTimeString([], { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
  }

  function kindText(h) {
    switch (h.kind) {
      case "permit":
        return "permit " + h.slot + "/" + h.permits;
      case "read":
        return "read slot " + h.slot;
      default:
        return h.kind || "mutex";
    }
  }

  function kindTitle(h) {
    switch (h.kind) {
      case "permit":
        return "semaphore of " + h.permits + " permits; this is permit " + h.slot + " (0-based)";
      case "read":
        return "read grant in slot " + h.slot;
      case "leader":
        return "election leader; the fence is the term";
      case "queue":
        return "a semaphore's waiting room, held by its first waiter";
      default:
        return null;
    }
  }

  // A stable colour per owner, so one owner's grants match across timelines.
  function ownerHue(owner) {
    let h = 0;
    for (const c of owner || "") h = (h * 31 + c.codePointAt(0)) >>> 0;
    return h % 360;
  }

  // Milliseconds elapsed on the server since snapshot time t: the server's
  // clock, so a skewed browser clock does not matter.
  function serverSince(t) {
    return Date.parse(snap.now) - Date.parse(t) + (performance.now() - snapAt);
  }

  // --- rendering ---------------------------------------------------------

  function render(s) {
    snap = s;
    // The server shares one snapshot among its viewers; age_ms is how old
    // it was when sent, so the local counters start from when it was taken.
    snapAt = performance.now() - (s.age_ms || 0);
    ticking = [];
    canForce = s.can_force_release === true;
    document.body.classList.toggle("admin", canForce);
    $("backend").textContent = s.backend || "?";
    renderHolders(s.holders || []);
    renderWaiters(s.waiters || {});
    renderEvents(s.events || []);
    renderTimeline(s.timeline || {}, s.now);
    tick();
  }

  function byName(a, b) {
    return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
  }

  function renderHolders(holders) {
    const rows = holders
      .slice()
      .sort((a, b) => byName(a, b) || (a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : 0) || a.slot - b.slot)
      .map(holderRow);
    $("holders").tBodies[0].replaceChildren(...rows);
    $("holders-count").textContent = holders.length ? String(holders.length) : "";
    $("holders-empty").hidden = holders.length > 0;
  }

  function holderRow(h) {
    const age = el("td", { class: "num age" });
    if (typeof h.age_ms === "number") {
      ticking.push({ cell: age, base: h.age_ms, sign: +1 });
    } else {
      // Granted by another server or process: the backend keeps its
      // owner, fence and time left, not when it was granted.
      age.textContent = "elsewhere";
      age.classList.add("elsewhere");
      age.title = "granted by another server or process; the backend knows its owner (" + h.owner + "), fence " + h.fence +
        " and " + (h.ttl_ms < 0 ? "no expiry (session-bound)" : fmtDur(h.ttl_ms) + " left when listed") + ", not when it was granted";
    }
    const ttl = el("td", { class: "num ttl" });
    if (h.ttl_ms < 0) {
      ttl.textContent = "session";
      ttl.title = "bound to its session: no expiry";
    } else {
      ticking.push({ cell: ttl, base: h.ttl_ms, sign: -1, ttl: true });
    }
    const row = el(
      "tr",
      { "data-name": h.name, "data-kind": h.kind, "data-owner": h.owner, "data-fence": h.fence },
      el("td", { class: "name" }, oneLine(h.name)),
      el("td", null, el("span", { class: "kind kind-" + h.kind, title: kindTitle(h) }, kindText(h))),
      el("td", { class: "owner" }, oneLine(h.owner)),
      el("td", { class: "num fence" }, h.fence),
      age,
      ttl,
      el("td", { class: "act" }, canForce && forceBody(h) ? el("button", { type: "button", class: "force", title: "force-release " + h.name }, "Force-release") : null),
    );
    row.holder = h;
    return row;
  }

  function renderWaiters(waiters) {
    const names = Object.keys(waiters).filter((n) => (waiters[n] || []).length).sort();
    let total = 0;
    const groups = names.map((name) => {
      const list = el("ul");
      for (const w of waiters[name]) {
        total++;
        const since = el("span", { class: "since" });
        if (w.since) {
          ticking.push({ cell: since, base: 0, sign: +1, from: w.since, prefix: "waiting " });
        } else {
          since.textContent = "in the queue";
          since.title = "a place in the semaphore's queue, listed by the backend";
        }
        list.append(el("li", { "data-owner": w.owner, "data-via": w.via }, el("span", { class: "owner" }, w.owner), since));
      }
      return el("div", { class: "group", "data-name": name }, el("h3", null, name), list);
    });
    $("waiters").replaceChildren(...(groups.length ? groups : [empty("Nobody is waiting through this server.")]));
    $("waiters-count").textContent = total ? String(total) : "";
  }

  function renderEvents(events) {
    const items = events.map((e) =>
      el(
        "li",
        { class: "ev ev-" + e.type, "data-type": e.type, "data-name": e.name },
        el("time", { datetime: e.time }, fmtTime(e.time)),
        el("span", { class: "type" }, e.type),
        el("span", { class: "name" }, e.name),
        e.kind && e.kind !== "mutex" ? el("span", { class: "kind kind-" + e.kind }, e.kind) : null,
        typeof e.fence === "number" ? el("span", { class: "fence" }, "fence " + e.fence) : null,
        e.owner ? el("span", { class: "owner" }, e.owner) : null,
        e.reason ? el("span", { class: "reason", title: e.detail || null }, e.reason) : null,
      ),
    );
    $("events").replaceChildren(...items);
    $("events-count").textContent = events.length ? String(events.length) : "";
    $("events-empty").hidden = events.length > 0;
  }

  function renderTimeline(timeline, now) {
    const names = Object.keys(timeline).filter((n) => (timeline[n] || []).length).sort();
    const cards = names.map((name) => timelineCard(name, timeline[name], now));
    $("timeline").replaceChildren(...(cards.length ? cards : [empty("No grants yet.")]));
  }

  // timelineCard plots one name's grants: x is time (first grant to now),
  // y the fence; a step line joins the grants, a dot per grant in its
  // owner's colour, with a tooltip.
  function timelineCard(name, grants, now) {
    const last = grants[grants.length - 1];
    // The right margin holds the last fence's label (10 px monospace, a
    // digit about 6.2 units wide): a 16-digit Redis fence needs ~100.
    const W = 360, H = 76, L = 6, T = 10, B = 10;
    const R = Math.max(34, Math.ceil(String(last.fence).length * 6.2) + 10);
    const ts = grants.map((g) => Date.parse(g.time));
    const t0 = ts[0];
    const t1 = Math.max(ts[ts.length - 1], Date.parse(now) || 0, t0 + 1);
    const fs = grants.map((g) => g.fence);
    const f0 = Math.min(...fs);
    const f1 = Math.max(...fs);
    const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
    // One fence only: draw it across the middle.
    const y = (f) => (f1 === f0 ? H / 2 : H - B - ((f - f0) / (f1 - f0)) * (H - T - B));

    const pts = [];
    grants.forEach((g, i) => {
      if (i > 0) pts.push(x(ts[i]).toFixed(1) + "," + y(grants[i - 1].fence).toFixed(1));
      pts.push(x(ts[i]).toFixed(1) + "," + y(g.fence).toFixed(1));
    });
    pts.push(x(t1).toFixed(1) + "," + y(fs[fs.length - 1]).toFixed(1));

    const plot = svg(
      "svg",
      { viewBox: "0 0 " + W + " " + H, width: W, height: H, role: "img", "aria-label": "fence over time for " + name },
      svg("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }),
      svg("polyline", { class: "step", points: pts.join(" ") }),
    );
    grants.forEach((g, i) => {
      const tip = svg("title");
      tip.textContent = "fence " + g.fence + " · " + g.owner + " · " + fmtTime(g.time);
      plot.append(
        svg("circle", { cx: x(ts[i]).toFixed(1), cy: y(g.fence).toFixed(1), r: 3.5, fill: "hsl(" + ownerHue(g.owner) + " 65% 42%)", "data-fence": g.fence }, tip),
      );
    });
    const label = svg("text", { class: "label", x: W - R + 4, y: (y(last.fence) + 3.5).toFixed(1) });
    label.textContent = String(last.fence);
    plot.append(label);
    return el(
      "figure",
      { class: "tl", "data-name": name },
      el(
        "figcaption",
        null,
        el("span", { class: "name one-line", title: name }, name),
        el("span", { class: "range" }, "fence " + (last.fence === fs[0] ? last.fence : fs[0] + " → " + last.fence) + " · " + grants.length + (grants.length === 1 ? " grant" : " grants")),
      ),
      plot,
    );
  }

  // --- force-release (admins) --------------------------------------------

  // forceBody is the force-release request's body for holder h, or null
  // for a grant the endpoint cannot name (read and write grants, queue
  // places) or a page cannot reach: browsers take a path segment "." or
  // ".." (even as %2E) for a step up the path.
  function forceBody(h) {
    if (h.name === "." || h.name === "..") return null;
    switch (h.kind || "mutex") {
      case "mutex":
        return {};
      case "permit":
        return { permit: h.slot, permits: h.permits };
      case "leader":
        return { election: true };
      default:
        return null;
    }
  }

  function holderText(h) {
    return h.name + " — " + kindText(h) + ", held by " + (h.owner || "an unknown owner") + ", fence " + h.fence;
  }

  function askForceRelease(h) {
    confirming = h;
    const d = $("confirm");
    d.querySelector(".what").textContent = holderText(h);
    if (!d.open) d.showModal();
  }

  function notice(state, text) {
    const n = $("notice");
    n.dataset.state = state;
    n.textContent = text;
    n.hidden = false;
  }

  // forceRelease posts the force-release as JSON from this page: the
  // server takes no such request from another origin (Sec-Fetch-Site,
  // Origin) nor one that is not JSON, which a page of another origin
  // cannot send without a CORS preflight the server never grants.
  async function forceRelease(h) {
    const path = "/v1/locks/" + encodeURIComponent(h.name) + "/force-release";
    try {
      const r = await fetch(path, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify(forceBody(h)),
      });
      const body = await r.json().catch(() => ({}));
      if (!r.ok) {
        notice("error", "Force-release of " + h.name + " refused: " + (body.detail || "HTTP " + r.status));
        return;
      }
      const ev = body.evicted;
      notice("ok", ev
        ? "force-released " + h.name + ": evicted " + (ev.owner || "an unknown owner") + ", fence " + ev.fence + "; the next grant gets fence " + body.new_fence + " or above"
        : "force-released " + h.name + ": nothing was held any more");
    } catch (err) {
      notice("error", "Force-release of " + h.name + " failed: " + err.message);
    }
  }

  // wireForceRelease listens to the buttons. The dialog's "close" event
  // is not used: browsers fire it late (at a later frame), after the next
  // confirmation may have begun.
  function wireForceRelease() {
    const d = $("confirm");
    d.querySelector(".cancel").addEventListener("click", () => {
      confirming = null;
      d.close();
    });
    d.querySelector(".confirm").addEventListener("click", () => {
      const h = confirming;
      confirming = null;
      d.close();
      if (h) forceRelease(h);
    });
    // One listener for every row's button: rows are rebuilt per snapshot.
    $("holders").addEventListener("click", (e) => {
      const b = e.target.closest("button.force");
      const tr = b && b.closest("tr");
      if (tr && tr.holder) askForceRelease(tr.holder);
    });
  }

  // tick moves the local counters (TTL down, ages and waits up) between
  // snapshots, and notices a stream that went quiet.
  function tick() {
    if (!snap) return;
    const elapsed = performance.now() - snapAt;
    for (const c of ticking) {
      let v = c.from !== undefined ? serverSince(c.from) : c.base + c.sign * elapsed;
      if (c.ttl) {
        c.cell.textContent = v <= 0 ? "expiring" : fmtDur(v);
        c.cell.classList.toggle("low", v < 5000);
      } else {
        c.cell.textContent = (c.prefix || "") + fmtDur(v);
      }
    }
    const d = new Date(Date.parse(snap.now) + elapsed);
    $("clock").textContent = isNaN(d) ? "—" : d.toLocaleTimeString([], { hour12: false });
    if ($("status").dataset.state === "live" && elapsed > STALE_MS) setStatus("stale", "stale");
  }

  // --- transport ---------------------------------------------------------

  function setStatus(state, text) {
    const s = $("status");
    s.dataset.state = state;
    s.textContent = text;
  }

  function accept(s) {
    // The stream and a poll can overlap; never step back in time.
    if (snap && Date.parse(s.now) < Date.parse(snap.now)) return;
    render(s);
  }

  function connect() {
    reconnectTimer = 0;
    if (!window.EventSource) {
      startPolling();
      return;
    }
    const es = new EventSource(STREAM);
    stream = es;
    es.addEventListener("open", () => {
      stopPolling();
      setStatus("live", "live");
    });
    es.addEventListener("snapshot", (e) => {
      stopPolling();
      setStatus("live", "live");
      try {
        accept(JSON.parse(e.data));
      } catch (err) {
        console.error("dlock dashboard: bad snapshot", err);
      }
    });
    es.addEventListener("error", () => {
      // EventSource retries by itself while CONNECTING; CLOSED (e.g. a 401
      // or a wrong content type) is final, so retry later by hand.
      if (es.readyState === EventSource.CLOSED) {
        if (stream === es) stream = null;
        if (!reconnectTimer) reconnectTimer = setTimeout(connect, RECONNECT_MS);
      }
      startPolling();
    });
  }

  // startPolling fetches a snapshot every POLL_MS until stopPolling. Each
  // run has its own id, so a fetch still in flight from an earlier run
  // does not start a second loop.
  function startPolling() {
    if (pollTimer) return;
    const run = ++pollRun;
    const active = () => run === pollRun;
    setStatus("polling", "polling");
    const poll = async () => {
      try {
        const r = await fetch(POLL, { credentials: "same-origin", headers: { Accept: "application/json" } });
        if (r.status === 401) {
          if (active()) signedOut();
          return;
        }
        if (!r.ok) throw new Error("HTTP " + r.status);
        const s = await r.json();
        if (!active()) return;
        accept(s);
        setStatus("polling", "polling");
      } catch (err) {
        if (active()) setStatus("offline", "offline");
      }
      if (active()) pollTimer = setTimeout(poll, POLL_MS);
    };
    pollTimer = setTimeout(poll, 0);
  }

  function stopPolling() {
    clearTimeout(pollTimer);
    pollTimer = 0;
    pollRun++;
  }

  function signedOut() {
    stopPolling();
    clearTimeout(reconnectTimer);
    reconnectTimer = 0;
    if (stream) stream.close();
    stream = null;
    setStatus("signed-out", "signed out — reload to sign in");
  }

  wireForceRelease();
  connect();
  setInterval(tick, 250);
})();
