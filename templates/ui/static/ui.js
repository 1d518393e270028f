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
  // A page with a task still running reloads itself until the task ends.
  var running = document.querySelector("[data-refresh-seconds]");
  if (running) {
    var seconds = parseFloat(running.getAttribute("data-refresh-seconds")) || 2;
    window.setTimeout(function () { window.location.reload(); }, seconds * 1000);
  }
});
