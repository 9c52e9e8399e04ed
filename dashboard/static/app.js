// belay dashboard: live updates over Server-Sent Events, countdowns, the
// title badge count and notifications. No inline scripts (the page's CSP
// forbids them); everything the server sends is escaped HTML.
(function () {
  "use strict";
  var csrf = document.body.getAttribute("data-csrf") || "";
  var baseTitle = document.title;

  // Every htmx request carries the session's CSRF token.
  document.body.addEventListener("htmx:configRequest", function (e) {
    e.detail.headers["X-CSRF-Token"] = csrf;
  });

  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function tick() {
    var now = Date.now();
    document.querySelectorAll(".countdown[data-deadline]").forEach(function (el) {
      var left = Math.max(0, Math.ceil((Date.parse(el.dataset.deadline) - now) / 1000));
      var h = Math.floor(left / 3600), m = Math.floor((left % 3600) / 60), s = left % 60;
      el.textContent = "Auto-" + el.dataset.action + " in " + (h > 0 ? h + ":" + pad(m) : pad(m)) + ":" + pad(s) +
        (el.hasAttribute("data-expires") ? " (checkpoint expires)" : "");
    });
  }

  function count() {
    var inbox = document.getElementById("inbox");
    var n = inbox ? inbox.querySelectorAll(".card[data-id]").length : null;
    var badge = document.getElementById("inbox-count");
    if (n === null) return;
    if (badge) badge.textContent = n > 0 ? " (" + n + ")" : "";
    document.title = (n > 0 ? "(" + n + ") " : "") + baseTitle;
    var empty = document.getElementById("empty");
    if (n === 0 && !empty) {
      var p = document.createElement("p");
      p.className = "empty"; p.id = "empty"; p.textContent = "Nothing waits for a decision.";
      inbox.appendChild(p);
    } else if (n > 0 && empty) {
      empty.remove();
    }
  }

  function notify(card) {
    if (!("Notification" in window) || Notification.permission !== "granted" || !document.hidden) return;
    var h = card.querySelector("h2");
    try { new Notification("belay: decision needed", { body: h ? h.textContent : "" }); } catch (e) { /* ignore */ }
  }

  // refreshInbox merges the server's current cards into the page: new cards
  // are added, decided ones removed, and cards being edited are left alone.
  var refreshing = false, again = false;
  function refreshInbox() {
    var inbox = document.getElementById("inbox");
    if (!inbox) return;
    if (refreshing) { again = true; return; }
    refreshing = true;
    fetch("/inbox", { headers: { "HX-Request": "true" }, credentials: "same-origin" }).then(function (res) {
      if (res.status === 401) { location.href = "/signin"; return null; }
      return res.text();
    }).then(function (html) {
      if (html === null) return;
      var doc = new DOMParser().parseFromString("<div>" + html + "</div>", "text/html");
      var fresh = {};
      doc.querySelectorAll(".card[data-id]").forEach(function (c) { fresh[c.dataset.id] = c; });
      inbox.querySelectorAll(".card[data-id]").forEach(function (c) {
        if (!fresh[c.dataset.id]) c.remove();
        else delete fresh[c.dataset.id];
      });
      Object.keys(fresh).forEach(function (id) {
        var node = document.importNode(fresh[id], true);
        inbox.appendChild(node);
        if (window.htmx) htmx.process(node);
        notify(node);
      });
      tick(); count();
    }).finally(function () {
      refreshing = false;
      if (again) { again = false; refreshInbox(); }
    });
  }

  // live follows the dashboard's event stream for el. EventSource retries a
  // dropped connection by itself but gives up on an error answer (a proxy's
  // 502, a restarted server), so a closed stream is opened again with a
  // growing delay; a 401 means the sign-in is gone.
  function live(el) {
    var url = el.dataset.live;
    var status = document.getElementById("live");
    var wasDown = false, delay = 1000;
    function onChange() {
      if (el.id === "inbox") refreshInbox();
      else location.reload();
    }
    function connect() {
      var es = new EventSource(url);
      es.addEventListener("hello", function () {
        delay = 1000;
        if (status) status.textContent = "";
        // After a reconnect, catch up with anything missed.
        if (wasDown) { wasDown = false; onChange(); }
      });
      es.addEventListener("change", onChange);
      es.onerror = function () {
        wasDown = true;
        if (status) status.textContent = "Reconnecting…";
        if (es.readyState !== EventSource.CLOSED) return;
        setTimeout(function () {
          fetch("/inbox", { headers: { "HX-Request": "true" }, credentials: "same-origin" }).then(function (res) {
            if (res.status === 401) { location.href = "/signin"; return; }
            connect();
          }, connect);
        }, delay);
        delay = Math.min(delay * 2, 15000);
      };
    }
    connect();
  }

  // feed shows each event as a row, newest first; built with textContent,
  // so nothing in an event becomes markup.
  function feed(el) {
    var status = document.getElementById("live");
    var max = 200;
    function connect() {
      var es = new EventSource(el.dataset.feed);
      es.addEventListener("hello", function () { if (status) status.textContent = ""; });
      es.addEventListener("event", function (m) {
        var e = JSON.parse(m.data);
        var li = document.createElement("li");
        li.className = "row"; li.id = "ev-" + e.seq;
        var seq = document.createElement("span"); seq.className = "seq muted"; seq.textContent = "#" + e.seq;
        var type = document.createElement("span"); type.className = "type"; type.textContent = e.type;
        var when = document.createElement("time"); when.className = "muted"; when.dateTime = e.createdAt;
        when.textContent = new Date(e.createdAt).toLocaleTimeString();
        li.append(seq, " ", type, " ", when);
        if (e.sessionId) {
          var a = document.createElement("a");
          a.href = "/sessions/" + encodeURIComponent(e.sessionId) + (e.checkpointId ? "#cp-" + encodeURIComponent(e.checkpointId) : "");
          a.textContent = "session " + e.sessionId.slice(0, 8);
          li.append(" ", a);
        }
        el.prepend(li);
        while (el.children.length > max) el.lastElementChild.remove();
      });
      es.onerror = function () {
        if (status) status.textContent = "Reconnecting…";
        if (es.readyState === EventSource.CLOSED) setTimeout(connect, 3000);
      };
    }
    connect();
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-feed]").forEach(feed);
    document.body.addEventListener("htmx:afterSwap", count);
    document.body.addEventListener("htmx:afterSettle", count);
    document.querySelectorAll("[data-live]").forEach(live);
    var btn = document.getElementById("notify");
    if (btn && "Notification" in window && Notification.permission === "default") {
      btn.hidden = false;
      btn.addEventListener("click", function () {
        Notification.requestPermission().then(function () { btn.hidden = true; });
      });
    }
    tick(); count();
    setInterval(tick, 1000);
  });
})();
