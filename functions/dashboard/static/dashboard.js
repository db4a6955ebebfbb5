// Refreshes an active run's page, and counts down to deadlines. No data is stored.
(function () {
  "use strict";
  var seconds = Number(document.body.dataset.refresh || 0);
  if (seconds > 0) {
    setTimeout(function () { window.location.reload(); }, seconds * 1000);
  }
  function tick() {
    document.querySelectorAll(".countdown[data-until]").forEach(function (el) {
      var left = Math.floor((Date.parse(el.dataset.until) - Date.now()) / 1000);
      if (isNaN(left)) { return; }
      if (left <= 0) {
        el.textContent = "(deadline passed)";
        document.querySelectorAll("form.decision button").forEach(function (b) { b.disabled = true; });
        return;
      }
      var h = Math.floor(left / 3600), m = Math.floor((left % 3600) / 60), s = left % 60;
      el.textContent = "(" + h + "h " + m + "m " + s + "s left)";
    });
  }
  tick();
  setInterval(tick, 1000);
})();
