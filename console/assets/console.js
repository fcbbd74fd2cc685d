// raftq console: refresh the live part of the page in place. Every page
// is complete without this script; it fetches the same page's fragment
// (?fragment=1), which the server renders from the same template, and
// swaps it into <main data-live>. A failed refresh marks the page stale
// and keeps what it shows.
(function () {
  "use strict";
  var every = 3000;
  var live = document.querySelector("[data-live]");
  var stamp = document.querySelector("[data-refreshed]");
  if (!live || !window.fetch) { return; }
  var busy = false;
  function url() {
    var u = new URL(window.location.href);
    u.searchParams.set("fragment", "1");
    u.hash = "";
    return u.toString();
  }
  function refresh() {
    if (busy || document.hidden) { return; }
    busy = true;
    fetch(url(), { headers: { "Accept": "text/html" }, cache: "no-store" })
      .then(function (r) {
        if (!r.ok) { throw new Error(r.status + " " + r.statusText); }
        return r.text();
      })
      .then(function (html) {
        live.innerHTML = html;
        document.body.classList.remove("stale");
        document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes || 0) + 1);
        if (stamp) { stamp.textContent = new Date().toISOString().replace("T", " ").replace("Z", "") + " UTC"; }
      })
      .catch(function (e) {
        document.body.classList.add("stale");
        if (stamp) { stamp.textContent = "refresh failed: " + e.message; }
      })
      .finally(function () { busy = false; });
  }
  setInterval(refresh, every);
  document.addEventListener("visibilitychange", refresh);
})();
