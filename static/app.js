// Countersign back office: small behaviours that need no framework. No
// inline scripts anywhere (the CSP forbids them), so pages opt in with
// data attributes.
(function () {
  "use strict";
  // Keep ages and expiry countdowns fresh without a reload.
  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-since]").forEach(function (el) {
      var s = Math.max(0, Math.round((now - Date.parse(el.dataset.since)) / 1000));
      el.textContent = human(s);
    });
    document.querySelectorAll("[data-until]").forEach(function (el) {
      var s = Math.round((Date.parse(el.dataset.until) - now) / 1000);
      el.textContent = s <= 0 ? "expired" : human(s) + " left";
      el.classList.toggle("soon", s > 0 && s < 3600);
    });
  }
  function human(s) {
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m";
    // Hours up to two days, so that a day's expiry reads alike everywhere
    // ("23h 59m", "24h 0m"), not "1d 0h" beside "23h 59m".
    if (s < 172800) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
    return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
  }
  // Forms that ask before acting: data-confirm="Reject this refund?".
  document.addEventListener("submit", function (e) {
    var msg = e.target.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) e.preventDefault();
  });
  // Keyboard: "/" focuses the first filter field; "j"/"k" move through queue rows.
  document.addEventListener("keydown", function (e) {
    if (e.target.closest("input, textarea, select") || e.metaKey || e.ctrlKey || e.altKey) return;
    var rows = Array.prototype.slice.call(document.querySelectorAll("[data-row-link]"));
    var i = rows.indexOf(document.activeElement);
    if (e.key === "/") {
      var f = document.querySelector("[data-filter]");
      if (f) { e.preventDefault(); f.focus(); }
    } else if ((e.key === "j" || e.key === "k") && rows.length) {
      e.preventDefault();
      var n = e.key === "j" ? Math.min(rows.length - 1, i + 1) : Math.max(0, i - 1);
      rows[n].focus();
    } else if (e.key === "Enter" && i >= 0) {
      window.location = rows[i].dataset.rowLink;
    } else if (e.key === "n" && document.querySelector("[data-testid=next-in-queue]")) {
      // After a decision: on to the next action waiting.
      e.preventDefault();
      window.location = document.querySelector("[data-testid=next-in-queue]").href;
    } else if (document.querySelector(".decide[data-keys]:not(.inactive)")) {
      // The action page: a key takes you to a decision; it never decides.
      var to = {
        a: "[data-testid=approve]",
        e: "[data-testid=edit-toggle]",
        r: "[data-testid=reject-reason]"
      }[e.key];
      var el = to && document.querySelector(to);
      if (!el) return;
      e.preventDefault();
      if (e.key === "e") {
        el.closest("details").open = true;
        var first = el.closest("details").querySelector("input:not([type=hidden]), select, textarea");
        el = first || el;
      }
      el.scrollIntoView({block: "center"});
      el.focus();
    }
  });
  // A page answering a failed post shows its own address, so a reload
  // does not post again.
  var canonical = document.body.dataset.canonical;
  if (canonical && canonical !== location.pathname) history.replaceState(null, "", canonical);
  // When an action is decided elsewhere, its forms stop offering a decision.
  document.addEventListener("htmx:afterSwap", function (e) {
    var st = document.getElementById("action-status");
    if (!st || st.dataset.pending !== "false") return;
    document.querySelectorAll(".decide button, .decide input, .decide textarea, .decide summary").forEach(function (el) {
      el.disabled = true;
      el.setAttribute("aria-disabled", "true");
    });
    document.querySelectorAll(".decide details").forEach(function (d) { d.open = false; });
    document.querySelectorAll(".decide").forEach(function (d) { d.classList.add("inactive"); });
  });
  document.addEventListener("htmx:afterSwap", tick);
  tick();
  setInterval(tick, 1000);
})();
