// The run page's live parts: counts down to deadlines and leases, and follows an
// active run's logs and status by polling the dashboard. Nothing is stored.
(function () {
  "use strict";
  var POLL_MS = 1500;

  // As the server writes it (functions/dashboard/formatting.py, span): 6d 23h, 2h 5m, 3m 12s.
  function span(total) {
    var d = Math.floor(total / 86400), h = Math.floor((total % 86400) / 3600);
    var m = Math.floor((total % 3600) / 60), s = total % 60;
    if (d) { return h ? d + "d " + h + "h" : d + "d"; }
    if (h) { return m ? h + "h " + m + "m" : h + "h"; }
    if (m) { return s ? m + "m " + s + "s" : m + "m"; }
    return s + "s";
  }

  function tick() {
    document.querySelectorAll(".countdown[data-until]").forEach(function (el) {
      var left = Math.floor((Date.parse(el.dataset.until) - Date.now()) / 1000);
      if (isNaN(left)) { return; }
      if (left <= 0) {
        if (el.dataset.ends === "lease") {
          el.textContent = "(lease expired: another operator may take over)";
          document.querySelectorAll("#recover-takeover").forEach(function (b) { b.disabled = false; });
        } else {
          el.textContent = "(deadline passed)";
          document.querySelectorAll("form.decision button").forEach(function (b) { b.disabled = true; });
        }
        return;
      }
      el.textContent = "(" + span(left) + " left)";
    });
  }
  tick();
  setInterval(tick, 1000);

  // Follow an active run: append each phase's new log bytes, and re-render the page
  // when the run's status changes (new forms, labels and panels come from the server).
  var header = document.getElementById("run-header");
  if (!header || header.dataset.live !== "1") { return; }
  var base = "/ui/runs/" + encodeURIComponent(header.dataset.run) + "/logs/";
  var shown = header.dataset.status;

  // A read's styled segments ([classes, text], see run_logs.py) as text nodes and
  // spans: textContent and className only, so nothing in a log is ever markup.
  function append(pre, read) {
    if (!Array.isArray(read.segments)) {
      if (read.text) { pre.appendChild(document.createTextNode(read.text)); }
      return;
    }
    read.segments.forEach(function (segment) {
      var classes = String(segment[0]), text = String(segment[1]);
      if (!classes) {
        pre.appendChild(document.createTextNode(text));
        return;
      }
      var span = document.createElement("span");
      span.className = classes;
      span.textContent = text;
      pre.appendChild(span);
    });
  }

  function follow(pre) {
    var url = base + pre.dataset.phase + "?offset=" + encodeURIComponent(pre.dataset.offset);
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (answer) {
        if (!answer.ok) { throw new Error("log poll answered " + answer.status); }
        return answer.json();
      })
      .then(function (read) {
        if (read.started) {
          var section = pre.closest("section");
          section.hidden = false;
          append(pre, read);
          pre.dataset.offset = String(read.next_offset);
          section.querySelector(".live-note").textContent = read.complete ? "" : "(live)";
          if (read.at_end) { pre.dataset.done = "1"; }
        }
        return read;
      });
  }

  function poll() {
    var pres = Array.prototype.slice.call(document.querySelectorAll("pre.log-text[data-phase]"));
    var open = pres.filter(function (pre) { return pre.dataset.done !== "1"; });
    // With every log at its end, one (empty) read still reports the run's status.
    Promise.all((open.length ? open : pres.slice(-1)).map(follow)).then(function (reads) {
      var status = reads.length ? reads[0].status : shown;
      if (status !== shown) {
        window.location.reload();
        return;
      }
      setTimeout(poll, POLL_MS);
    }).catch(function () {
      // Signed out or offline: stop following; a reload shows why.
      header.dataset.live = "stopped";
    });
  }
  setTimeout(poll, POLL_MS);
})();
