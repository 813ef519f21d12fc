/**
 * The web inbox's stylesheet and script, kept as string constants so the
 * esbuild bundle carries them (no files to copy into dist/). They are served
 * from /assets/* so the pages' CSP can forbid inline script and style.
 *
 * The script builds DOM with textContent only: nothing from a message ever
 * goes through innerHTML.
 */
import { formatSize } from "../../core/size.js";

export const INBOX_CSS = `
:root { color-scheme: light dark; --bg: #fff; --fg: #1d2125; --muted: #66707a; --line: #dde1e5; --head: #f4f6f8; --accent: #1f6feb; --new: #fff4c2; }
@media (prefers-color-scheme: dark) { :root { --bg: #15181b; --fg: #e3e6e9; --muted: #9aa3ad; --line: #2e343a; --head: #1d2126; --accent: #58a6ff; --new: #3d3517; } }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; background: var(--bg); color: var(--fg); }
header.top { display: flex; align-items: baseline; gap: 1rem; padding: .7rem 1.2rem; border-bottom: 1px solid var(--line); background: var(--head); }
header.top h1 { font-size: 1.05rem; margin: 0; }
header.top a { color: inherit; text-decoration: none; }
header.top .meta { color: var(--muted); font-size: .9em; }
#status { margin-left: auto; color: var(--muted); font-size: .85em; }
#status.live::before { content: "\\25CF  "; color: #2da44e; }
#status.down::before { content: "\\25CB  "; color: #cf222e; }
main { padding: 1rem 1.2rem 2rem; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .4rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-weight: 600; color: var(--muted); font-size: .85em; white-space: nowrap; }
table.list { table-layout: fixed; }
table.list td { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
table.list col.time { width: 11.5rem; } table.list col.channel { width: 5rem; } table.list col.from { width: 17%; }
table.list col.to { width: 17%; } table.list col.size { width: 6rem; } table.list col.att { width: 3.5rem; }
table.list td.num, table.list th.num { text-align: right; }
table.list tbody tr[data-id] { cursor: pointer; }
table.list tbody tr[data-id]:hover { background: var(--head); }
tr.fresh { animation: fresh 2.5s ease-out; }
@keyframes fresh { from { background: var(--new); } to { background: transparent; } }
td.empty { color: var(--muted); text-align: center; padding: 2rem; white-space: normal; }
a { color: var(--accent); }
.subject a { color: inherit; text-decoration: none; font-weight: 500; }
.chan { display: inline-block; padding: 0 .4rem; border-radius: .6rem; font-size: .8em; border: 1px solid var(--line); }
.muted { color: var(--muted); }
h2.subject { font-size: 1.25rem; margin: .2rem 0 .8rem; overflow-wrap: anywhere; }
table.fields th { width: 9rem; }
table.fields td { overflow-wrap: anywhere; }
details.all { margin: .8rem 0; }
details.all summary { cursor: pointer; color: var(--muted); }
details.all table td { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .85em; overflow-wrap: anywhere; }
nav.tabs { display: flex; gap: .2rem; margin-top: 1.2rem; border-bottom: 1px solid var(--line); }
nav.tabs a { padding: .4rem .9rem; text-decoration: none; color: var(--muted); border: 1px solid transparent; border-bottom: none; border-radius: .3rem .3rem 0 0; }
nav.tabs a[aria-selected="true"] { color: var(--fg); border-color: var(--line); background: var(--bg); margin-bottom: -1px; }
section.panel { padding: .8rem 0; }
section.panel > h3 { font-size: .95rem; margin: .2rem 0 .6rem; }
.js section.panel > h3 { display: none; }
.js section.panel:not(.active) { display: none; }
iframe.body { width: 100%; height: 70vh; border: 1px solid var(--line); border-radius: .3rem; background: #fff; }
pre { margin: 0; padding: .8rem; background: var(--head); border: 1px solid var(--line); border-radius: .3rem; white-space: pre-wrap; overflow-wrap: anywhere; font: 12.5px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; max-height: 75vh; overflow: auto; }
.note { color: var(--muted); margin: .4rem 0; }
`;

export const INBOX_JS = `
(function () {
  "use strict";
  document.body.classList.add("js");

  function text(tag, value, cls) {
    var el = document.createElement(tag);
    if (cls) el.className = cls;
    el.textContent = value == null ? "" : String(value);
    return el;
  }

  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function localTime(iso) {
    var d = new Date(iso);
    if (isNaN(d.getTime())) return String(iso);
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
  }
  function localizeTimes(root) {
    var times = root.querySelectorAll("time[datetime]");
    for (var i = 0; i < times.length; i++) {
      times[i].textContent = localTime(times[i].getAttribute("datetime"));
      times[i].title = times[i].getAttribute("datetime");
    }
  }
  // The same function as the server's pages and the CLI use (src/core/size.ts).
  var size = ${formatSize.toString()};

  localizeTimes(document);

  // ---- list page ----------------------------------------------------------
  var rows = document.getElementById("rows");
  if (rows) {
    var count = document.getElementById("count");
    var status = document.getElementById("status");
    var seen = {};
    var existing = rows.querySelectorAll("tr[data-id]");
    for (var i = 0; i < existing.length; i++) seen[existing[i].getAttribute("data-id")] = true;

    rows.addEventListener("click", function (ev) {
      var tr = ev.target.closest ? ev.target.closest("tr[data-id]") : null;
      if (!tr || (ev.target.closest && ev.target.closest("a"))) return;
      location.href = "/messages/" + encodeURIComponent(tr.getAttribute("data-id"));
    });

    var row = function (m) {
      var tr = document.createElement("tr");
      tr.setAttribute("data-id", m.id);
      var td = document.createElement("td");
      var t = text("time", localTime(m.receivedAt));
      t.setAttribute("datetime", m.receivedAt);
      t.title = m.receivedAt;
      td.appendChild(t);
      tr.appendChild(td);
      td = document.createElement("td");
      td.appendChild(text("span", m.channel, "chan"));
      tr.appendChild(td);
      var from = text("td", m.from); from.title = m.from; tr.appendChild(from);
      var toList = (m.to || []).join(", ");
      var to = text("td", toList); to.title = toList; tr.appendChild(to);
      td = document.createElement("td");
      td.className = "subject";
      var a = text("a", m.subject === "" ? "(no subject)" : m.subject);
      a.href = "/messages/" + encodeURIComponent(m.id);
      td.appendChild(a);
      tr.appendChild(td);
      tr.appendChild(text("td", size(m.size), "num"));
      tr.appendChild(text("td", (m.attachments || []).length || "", "num"));
      return tr;
    };

    var add = function (m, fresh) {
      if (!m || typeof m.id !== "string" || seen[m.id]) return;
      seen[m.id] = true;
      var empty = document.getElementById("empty");
      if (empty) empty.parentNode.removeChild(empty);
      var tr = row(m);
      if (fresh) tr.className = "fresh";
      // Newest first: insert before the first row that is older.
      var others = rows.querySelectorAll("tr[data-id]");
      var before = null;
      for (var j = 0; j < others.length; j++) {
        if (others[j].getAttribute("data-id") < m.id) { before = others[j]; break; }
      }
      rows.insertBefore(tr, before);
      if (count) count.textContent = String(rows.querySelectorAll("tr[data-id]").length);
    };

    // Whenever the stream (re)opens, fetch the list too: anything stored
    // between the page render (or a dropped connection) and now shows up.
    var catchUp = function () {
      fetch("/api/messages", { headers: { accept: "application/json" } })
        .then(function (r) { return r.ok ? r.json() : { messages: [] }; })
        .then(function (body) {
          var list = body.messages || [];
          for (var k = list.length - 1; k >= 0; k--) add(list[k], true);
        })
        .catch(function () {});
    };

    if (window.EventSource) {
      var es = new EventSource("/events");
      es.addEventListener("open", function () {
        if (status) { status.textContent = "live"; status.className = "live"; }
        catchUp();
      });
      es.addEventListener("error", function () {
        if (status) { status.textContent = "reconnecting"; status.className = "down"; }
      });
      es.addEventListener("message", function (ev) {
        try { add(JSON.parse(ev.data), true); } catch (e) {}
      });
    }
  }

  // ---- message page: tabs --------------------------------------------------
  var tabs = document.querySelectorAll("nav.tabs a[data-panel]");
  if (tabs.length) {
    var show = function (name) {
      var found = false;
      for (var i = 0; i < tabs.length; i++) {
        var on = tabs[i].getAttribute("data-panel") === name;
        found = found || on;
        tabs[i].setAttribute("aria-selected", on ? "true" : "false");
        var panel = document.getElementById(tabs[i].getAttribute("data-panel"));
        if (panel) panel.classList.toggle("active", on);
      }
      return found;
    };
    for (var t = 0; t < tabs.length; t++) {
      tabs[t].addEventListener("click", function (ev) {
        ev.preventDefault();
        var name = this.getAttribute("data-panel");
        show(name);
        history.replaceState(null, "", "#" + name);
      });
    }
    var wanted = location.hash.slice(1);
    if (!wanted || !show(wanted)) show(tabs[0].getAttribute("data-panel"));
  }
})();
`;
