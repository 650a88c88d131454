/* GraphEval run report: sorts, filters and pages the table of rows, and draws a row's view when its link is
   followed (large runs keep each view as pre-rendered, escaped markup in an inert script block). It reads no
   network resource and never turns report text into markup: the views were escaped when the file was written. */
(function () {
  "use strict";
  var PAGE = 100;
  var table = document.getElementById("ge-table");
  if (!table) { return; }
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  var filter = document.getElementById("ge-filter");
  var status = document.getElementById("ge-status");
  var count = document.getElementById("ge-count");
  var pager = document.getElementById("ge-pager");
  var pageLabel = document.getElementById("ge-page");
  var prev = document.getElementById("ge-prev");
  var next = document.getElementById("ge-next");
  var page = 0;
  var shown = rows;
  document.getElementById("ge-controls").hidden = false;

  rows.forEach(function (tr) { tr._text = tr.textContent.toLowerCase(); });

  function apply() {
    var q = filter.value.trim().toLowerCase();
    var s = status.value;
    shown = rows.filter(function (tr) {
      return (!s || tr.dataset.status === s) && (!q || tr._text.indexOf(q) !== -1);
    });
    var pages = Math.max(1, Math.ceil(shown.length / PAGE));
    if (page >= pages) { page = pages - 1; }
    var start = page * PAGE, end = start + PAGE;
    var visible = new Set(shown.slice(start, end));
    rows.forEach(function (tr) { tr.hidden = !visible.has(tr); });
    count.textContent = shown.length === rows.length ? rows.length + " rows" :
      shown.length + " of " + rows.length + " rows match";
    pager.hidden = shown.length <= PAGE;
    pageLabel.textContent = " rows " + (shown.length ? start + 1 : 0) + "–" + Math.min(end, shown.length) +
      " of " + shown.length + " ";
    prev.disabled = page === 0;
    next.disabled = page >= pages - 1;
  }

  function sortBy(th) {
    var key = th.dataset.key, num = th.dataset.type === "num";
    var dir = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) { c.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir);
    var sign = dir === "ascending" ? 1 : -1;
    rows.sort(function (a, b) {
      var x = a.dataset[key], y = b.dataset[key];
      if (num) { return sign * (parseFloat(x) - parseFloat(y)); }
      return sign * x.localeCompare(y, undefined, {numeric: true});
    });
    var frag = document.createDocumentFragment();
    rows.forEach(function (tr) { frag.appendChild(tr); });
    body.appendChild(frag);
    page = 0;
    apply();
  }

  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
    var button = th.querySelector("button");
    if (button) { button.addEventListener("click", function () { sortBy(th); }); }
  });
  filter.addEventListener("input", function () { page = 0; apply(); });
  status.addEventListener("change", function () { page = 0; apply(); });
  prev.addEventListener("click", function () { page -= 1; apply(); });
  next.addEventListener("click", function () { page += 1; apply(); });

  /* Large runs: row views are escaped markup, gzip-compressed in inert blocks of rows (base64). */
  var viewer = document.getElementById("ge-viewer");
  var blocks = {};
  function block(k) {
    if (!blocks[k]) {
      var el = document.getElementById("ge-rows-" + k);
      if (!el) { return Promise.resolve(null); }
      var bin = atob(el.textContent.trim());
      var bytes = new Uint8Array(bin.length);
      for (var i = 0; i < bin.length; i++) { bytes[i] = bin.charCodeAt(i); }
      var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
      blocks[k] = new Response(stream).text().then(JSON.parse);
    }
    return blocks[k];
  }
  function show() {
    if (!viewer) { return; }
    var m = /^#row-(\d+)/.exec(location.hash);
    if (!m) { return; }
    var target = document.getElementById(location.hash.slice(1));
    if (target && viewer.contains(target)) { target.scrollIntoView(); return; }
    var n = parseInt(m[1], 10), per = parseInt(viewer.dataset.chunkRows, 10);
    block(Math.floor((n - 1) / per)).then(function (views) {
      if (!views || !views[(n - 1) % per]) { return; }
      var tpl = document.createElement("template");
      tpl.innerHTML = views[(n - 1) % per];  /* markup written (and escaped) by the report generator */
      viewer.replaceChildren(tpl.content);
      var hint = document.getElementById("ge-lazy-hint");
      if (hint) { hint.hidden = true; }
      var el = document.getElementById(location.hash.slice(1)) || viewer;
      el.scrollIntoView();
      var heading = document.getElementById("row-" + n + "-h");
      if (heading) { heading.focus({preventScroll: true}); }
    });
  }
  window.addEventListener("hashchange", show);
  apply();
  show();
  document.documentElement.dataset.geReady = "1";
})();
