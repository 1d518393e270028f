// quotecheck pages: small enhancements only; every page works without this script.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  // A button with data-confirm asks before its form is sent (rejection is final).
  document.querySelectorAll("button[data-confirm]").forEach(function (button) {
    button.addEventListener("click", function (event) {
      if (!window.confirm(button.getAttribute("data-confirm"))) {
        event.preventDefault();
      }
    });
  });
  // The what-if form recomputes in place: a changed field fetches the page for the new values and swaps in its
  // parts (data-what-if-part); without fetch, or on an error page, the form is sent as a plain GET instead.
  var whatIf = document.querySelector("form[data-autosubmit]");
  if (whatIf && window.fetch && window.DOMParser && window.URLSearchParams) {
    whatIf.addEventListener("change", function () {
      var url = window.location.pathname + "?" + new URLSearchParams(new FormData(whatIf)).toString();
      whatIf.setAttribute("aria-busy", "true");
      window.fetch(url, {credentials: "same-origin", headers: {"Accept": "text/html"}}).then(function (response) {
        return response.ok ? response.text() : Promise.reject(response.status);
      }).then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-what-if-part]").forEach(function (part) {
          var next = fresh.getElementById(part.id);
          if (next) { part.replaceWith(document.importNode(next, true)); }
        });
        window.history.replaceState(null, "", url);
        whatIf.removeAttribute("aria-busy");
      }).catch(function () { whatIf.submit(); });
    });
  }
});
