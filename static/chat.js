// The chat frame: talks to its embedding page (widget.js) and keeps the
// conversation comfortable to use. No inline script: the CSP forbids it.
(function () {
  "use strict";
  var input = document.getElementById("msg");
  var tokenField = document.getElementById("customer-token");
  var embedded = window.parent !== window;

  function identify() {
    htmx.ajax("POST", "/chat/identity", { target: "#identity", swap: "innerHTML", values: { customer_token: tokenField.value } });
  }
  // The conversation box is what scrolls (the log inside it grows).
  function scrollDown() {
    var box = document.getElementById("conversation");
    if (box) box.scrollTop = box.scrollHeight;
  }

  window.addEventListener("message", function (e) {
    // Only the page that embeds this frame may talk to it; frame-ancestors
    // decides which pages may do that.
    if (e.source !== window.parent || !e.data) return;
    if (e.data.type === "countersign:token") {
      tokenField.value = typeof e.data.token === "string" ? e.data.token : "";
      identify();
    }
    if (e.data.type === "countersign:focus") input.focus();
  });

  document.addEventListener("DOMContentLoaded", function () {
    var close = document.getElementById("chat-close");
    if (embedded) {
      close.hidden = false;
      close.addEventListener("click", function () { window.parent.postMessage({ type: "countersign:close" }, "*"); });
      window.parent.postMessage({ type: "countersign:ready" }, "*");
    } else identify();
    scrollDown();
    input.focus();
  });
  input.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      if (input.value.trim() !== "") document.getElementById("chat-form").requestSubmit();
    }
  });
  document.addEventListener("keydown", function (e) {
    if (e.key === "Escape" && embedded) window.parent.postMessage({ type: "countersign:close" }, "*");
  });
  function fromChatForm(e) {
    var cfg = e.detail.requestConfig;
    return (cfg && cfg.elt && cfg.elt.id === "chat-form") || (e.detail.elt && e.detail.elt.id === "chat-form");
  }
  document.addEventListener("htmx:afterRequest", function (e) {
    // Cleared only when the message went through (an error response is
    // swapped in as if it had succeeded, so ask the status).
    if (fromChatForm(e) && e.detail.xhr && e.detail.xhr.status < 400) {
      input.value = "";
      input.focus();
    }
  });
  // Errors (a rate limit, a message too long) come back as the conversation
  // with the reason in it, in its alert region: show it instead of dropping
  // it, and keep what the customer typed. (The swap's elt is its target, the
  // conversation; the form is the request's elt.)
  document.addEventListener("htmx:beforeSwap", function (e) {
    if (fromChatForm(e) && e.detail.xhr.status >= 400 && e.detail.xhr.status < 500) {
      e.detail.shouldSwap = true;
      e.detail.isError = false;
    }
  });
  document.addEventListener("htmx:afterSwap", scrollDown);
  document.addEventListener("htmx:sseMessage", scrollDown);
})();
