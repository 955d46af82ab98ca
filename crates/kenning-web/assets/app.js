// kenning web view: small progressive enhancements. Every page works without this script.
(function () {
  "use strict";

  // "/" focuses the page's search field (unless typing in a field already).
  document.addEventListener("keydown", function (event) {
    if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) return;
    var target = event.target;
    if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName))) return;
    var field = document.querySelector("[data-shortcut='/']");
    if (field) {
      event.preventDefault();
      field.focus();
      field.select();
    }
  });

  // Live updates: when the memories change, the page's main region is fetched again and
  // swapped in, unless the reader is in a form's field, typing or about to (a confirmation
  // page puts the cursor in its reason field): then a notice says so.
  if (!("EventSource" in window) || !("fetch" in window)) return;
  var live = document.getElementById("live");
  function say(text) {
    if (!live) return;
    live.textContent = text;
    live.hidden = false;
  }
  var refreshing = false;
  // Whether the reader is in a form's field: a swap would take the field, and what is typed
  // in it, away from under the cursor.
  function inField() {
    var active = document.activeElement;
    return Boolean(active && active.closest && active.closest("form") && active.matches("input, textarea, select"));
  }
  function refresh() {
    var main = document.getElementById("main");
    if (!main || refreshing) return;
    if (inField()) {
      say("Memories changed. Reload the page to see them.");
      return;
    }
    refreshing = true;
    fetch(window.location.href, { headers: { "Accept": "text/html" }, credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (text) {
        if (!text) return;
        // The reader may have gone into a field while the page was fetched ("/", a click).
        if (inField()) {
          say("Memories changed. Reload the page to see them.");
          return;
        }
        var fresh = new DOMParser().parseFromString(text, "text/html").getElementById("main");
        if (fresh) {
          main.replaceWith(fresh);
          say("Updated " + new Date().toLocaleTimeString() + ": memories changed.");
        }
      })
      .catch(function () {})
      .then(function () { refreshing = false; });
  }
  var events = null;
  function listen() {
    events = new EventSource("/events");
    events.addEventListener("change", refresh);
    document.documentElement.dataset.live = "connecting";
    events.addEventListener("ready", function () { document.documentElement.dataset.live = "on"; });
  }
  // A page left for another closes its stream at once, and listens again if it comes back from
  // the back-forward cache: a browser opens at most six connections to one host, and streams
  // kept by pages left behind would hold them until a form's request waits for one.
  window.addEventListener("pagehide", function () {
    if (events) events.close();
    events = null;
  });
  window.addEventListener("pageshow", function (event) {
    if (event.persisted && !events) listen();
  });
  listen();
})();
