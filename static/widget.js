/* Countersign chat widget. Embed with one tag:
 *   <script src="https://HOST/widget.js" data-customer-token="JWT" async></script>
 * It adds a launcher button and a chat panel. The panel is an iframe on
 * Countersign's origin, so this page's CSS and scripts cannot reach the
 * conversation. No framework, no globals besides one guard flag. */
(function () {
  "use strict";
  var script = document.currentScript;
  if (!script || window.__countersignWidget) return;
  window.__countersignWidget = true;
  var origin = new URL(script.src, location.href).origin;
  var token = script.getAttribute("data-customer-token") || "";

  function css(el, props) { for (var k in props) el.style[k] = props[k]; }

  var launcher = document.createElement("button");
  launcher.type = "button";
  launcher.textContent = "Chat with us";
  launcher.setAttribute("aria-haspopup", "dialog");
  launcher.setAttribute("aria-expanded", "false");
  launcher.setAttribute("data-countersign", "launcher");
  css(launcher, { position: "fixed", right: "20px", bottom: "20px", zIndex: "2147483000", padding: "12px 18px",
    border: "0", borderRadius: "24px", background: "#2f5bd3", color: "#fff", font: "600 15px/1 system-ui, sans-serif",
    cursor: "pointer", boxShadow: "0 4px 14px rgba(0,0,0,.25)" });

  var panel = document.createElement("div");
  panel.setAttribute("role", "dialog");
  panel.setAttribute("aria-label", "Support chat");
  panel.setAttribute("data-countersign", "panel");
  panel.hidden = true;
  css(panel, { position: "fixed", right: "20px", bottom: "80px", width: "380px", height: "560px",
    maxHeight: "calc(100vh - 100px)", maxWidth: "calc(100vw - 40px)", zIndex: "2147483000", background: "#fff",
    borderRadius: "12px", overflow: "hidden", boxShadow: "0 10px 40px rgba(0,0,0,.3)" });
  var phone = window.matchMedia && window.matchMedia("(max-width: 600px)").matches;
  if (phone) {
    // On a phone the panel takes the whole screen; it closes with its own
    // button, so the launcher steps aside while it is open.
    css(panel, { right: "0", bottom: "0", width: "100vw", height: "100vh", maxHeight: "none", maxWidth: "none", borderRadius: "0" });
  }
  var frame = null;

  function sendToken() {
    if (frame && frame.contentWindow) frame.contentWindow.postMessage({ type: "countersign:token", token: token }, origin);
  }
  function openPanel() {
    if (!frame) {
      frame = document.createElement("iframe");
      frame.title = "Support chat";
      frame.setAttribute("data-countersign", "frame");
      css(frame, { border: "0", width: "100%", height: "100%", display: "block" });
      frame.src = origin + "/chat";
      panel.appendChild(frame);
    }
    panel.hidden = false;
    if (phone) launcher.style.display = "none";
    launcher.setAttribute("aria-expanded", "true");
    launcher.textContent = "Close chat";
    frame.focus();
    if (frame.contentWindow) frame.contentWindow.postMessage({ type: "countersign:focus" }, origin);
  }
  function closePanel() {
    panel.hidden = true;
    launcher.style.display = "";
    launcher.setAttribute("aria-expanded", "false");
    launcher.textContent = "Chat with us";
    launcher.focus();
  }
  launcher.addEventListener("click", function () { if (panel.hidden) openPanel(); else closePanel(); });
  document.addEventListener("keydown", function (e) { if (e.key === "Escape" && !panel.hidden) closePanel(); });
  window.addEventListener("message", function (e) {
    if (e.origin !== origin || !frame || e.source !== frame.contentWindow || !e.data) return;
    if (e.data.type === "countersign:ready") sendToken();
    if (e.data.type === "countersign:close") closePanel();
  });

  function mount() {
    document.body.appendChild(panel);
    document.body.appendChild(launcher);
  }
  if (document.body) mount(); else document.addEventListener("DOMContentLoaded", mount);
})();
