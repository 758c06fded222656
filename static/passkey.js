// Passkeys (WebAuthn) in the back office. Forms opt in with data
// attributes; the server makes every challenge and checks every answer.
//   data-passkey-register="<options url>" (account page): add a passkey.
//   data-passkey-signin="<options url>" (sign-in page): sign in with one.
//   data-passkey-sign="<options url>" (an action's decision forms): the
//     decision is signed with the person's passkey, over what it decides.
(function () {
  "use strict";
  if (!window.PublicKeyCredential) return;

  function post(url, form) {
    return fetch(url, { method: "POST", body: new FormData(form), credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (res) {
        return res.json().then(function (body) {
          if (!res.ok) throw new Error((body.error && body.error.message) || "the server refused (" + res.status + ")");
          return body;
        });
      });
  }
  function field(form, name, value) {
    var el = form.querySelector("input[name='" + name + "']");
    if (!el) {
      el = document.createElement("input");
      el.type = "hidden";
      el.name = name;
      form.appendChild(el);
    }
    el.value = value;
  }
  function fail(form, err) {
    var box = form.querySelector("[data-passkey-error]");
    if (!box) {
      box = document.createElement("p");
      box.className = "flash error";
      box.setAttribute("role", "alert");
      box.setAttribute("data-passkey-error", "");
      box.setAttribute("data-testid", "passkey-error");
      form.appendChild(box);
    }
    box.textContent = "Passkey: " + (err && err.message ? err.message : err);
    form.removeAttribute("data-busy");
  }

  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (e.defaultPrevented || form.hasAttribute("data-busy")) return;
    var reg = form.getAttribute("data-passkey-register");
    var signin = form.getAttribute("data-passkey-signin");
    var sign = form.getAttribute("data-passkey-sign");
    if (!reg && !signin && !sign) return;
    e.preventDefault();
    form.setAttribute("data-busy", "");
    if (reg) {
      post(reg, form).then(function (opts) {
        return navigator.credentials.create({ publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(opts.options.publicKey) })
          .then(function (cred) {
            field(form, "state", opts.state);
            field(form, "credential", JSON.stringify(cred.toJSON()));
            form.submit();
          });
      }).catch(function (err) { fail(form, err); });
    } else {
      post(signin || sign, form).then(function (opts) {
        return navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(opts.options.publicKey) })
          .then(function (cred) {
            field(form, signin ? "state" : "passkey_state", opts.state);
            field(form, signin ? "credential" : "passkey_assertion", JSON.stringify(cred.toJSON()));
            form.submit();
          });
      }).catch(function (err) { fail(form, err); });
    }
  });
})();
