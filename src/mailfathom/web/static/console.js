// mailfathom console: reload pages that ask for it (data-refresh="seconds"), unless paused
// or the operator is typing in a form. No build step, no dependencies.
(function () {
  "use strict";
  var seconds = Number(document.body.getAttribute("data-refresh") || 0);
  if (!seconds) { return; }
  var paused = sessionStorage.getItem("mf-refresh-paused") === "1";
  var button = document.getElementById("pause-refresh");
  function label() { if (button) { button.textContent = paused ? "resume" : "pause"; } }
  label();
  if (button) {
    button.addEventListener("click", function () {
      paused = !paused;
      sessionStorage.setItem("mf-refresh-paused", paused ? "1" : "0");
      label();
    });
  }
  setInterval(function () {
    var typing = document.activeElement && /INPUT|TEXTAREA|SELECT/.test(document.activeElement.tagName);
    if (!paused && !typing && document.visibilityState === "visible") { location.reload(); }
  }, seconds * 1000);
})();
