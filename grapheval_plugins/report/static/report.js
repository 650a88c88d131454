/* GraphEval run report: sorts, filters and pages the table of rows, and draws a row's view when its link is
   followed (large runs keep each view as pre-rendered, escaped markup in an inert script block). It reads no
   network resource and never turns report text into markup: the views were escaped when the file was written. */
(function () {
  "use strict";
  var PAGE = 100;
  var table = document.getElementById("ge-table");
  if (!table) { return; }
  var body = table.tBodies[0];
  var filter = document.getElementById("ge-filter");
  var status = document.getElementById("ge-status");
  var count = document.getElementById("ge-count");
  var pager = document.getElementById("ge-pager");
  var pageLabel = document.getElementById("ge-page");
  var prev = document.getElementById("ge-prev");
  var next = document.getElementById("ge-next");
  var page = 0;
  var records = [];  /* one per row: sort keys, filter text, and its table row (element, or markup to parse) */
  var shown = [];

  function unpack(id) {  /* base64 of gzip of JSON, written by the report generator */
    var el = document.getElementById(id);
    if (!el) { return Promise.resolve(null); }
    var bin = atob(el.textContent.trim());
    var bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) { bytes[i] = bin.charCodeAt(i); }
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text().then(JSON.parse);
  }

  function element(rec) {
    if (!rec.el) {
      var tpl = document.createElement("template");
      tpl.innerHTML = rec.html;  /* markup written (and escaped) by the report generator */
      rec.el = tpl.content.firstElementChild;
    }
    return rec.el;
  }

  function apply() {
    var q = filter.value.trim().toLowerCase();
    var s = status.value;
    shown = records.filter(function (r) {
      return (!s || r.status === s) && (!q || r.text.indexOf(q) !== -1);
    });
    var pages = Math.max(1, Math.ceil(shown.length / PAGE));
    if (page >= pages) { page = pages - 1; }
    var start = page * PAGE, end = Math.min(start + PAGE, shown.length);
    body.replaceChildren.apply(body, shown.slice(start, end).map(element));
    if (!full && total > records.length) {  /* only the first page is in the page until the table is unpacked */
      count.textContent = total + " rows";
      pager.hidden = false;
      pageLabel.textContent = " rows 1–" + records.length + " of " + total + " ";
      prev.disabled = true;
      next.disabled = false;
      return;
    }
    count.textContent = shown.length === records.length ? records.length + " rows" :
      shown.length + " of " + records.length + " rows match";
    pager.hidden = shown.length <= PAGE;
    pageLabel.textContent = " rows " + (shown.length ? start + 1 : 0) + "–" + end + " of " + shown.length + " ";
    prev.disabled = page === 0;
    next.disabled = page >= pages - 1;
  }

  function sortBy(th) {
    var key = th.dataset.key, num = th.dataset.type === "num";
    var dir = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) { c.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir);
    var sign = dir === "ascending" ? 1 : -1;
    records.sort(function (a, b) {
      var x = a[key], y = b[key];
      if (num) { return sign * (x - y) || a.n - b.n; }
      return sign * String(x).localeCompare(String(y), undefined, {numeric: true}) || a.n - b.n;
    });
    page = 0;
    apply();
  }

  var total = parseInt(table.dataset.total || "0", 10);
  var full = !document.getElementById("ge-table-rows");
  var loading = null;
  function ensure() {  /* a large run's whole table is unpacked on the first sort, filter or page change */
    if (full) { return Promise.resolve(); }
    if (!loading) {
      loading = unpack("ge-table-rows").then(function (packed) {
        records = packed.map(function (r) {
          return {n: r[0], id: r[1], status: r[2], score: r[3], claims: r[4], unsup: r[5], text: r[6], html: r[7]};
        });
        full = true;
      });
    }
    return loading;
  }
  function then(f) { return function () { var self = this; ensure().then(function () { f.call(self); }); }; }

  function begin() {
    records = Array.prototype.map.call(body.rows, function (tr) {
      var d = tr.dataset;
      return {n: +d.n, id: d.id, status: d.status, score: +d.score, claims: +d.claims, unsup: +d.unsup,
              text: tr.textContent.toLowerCase(), el: tr};
    });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      var button = th.querySelector("button");
      if (button) { button.addEventListener("click", then(function () { sortBy(th); })); }
    });
    filter.addEventListener("input", then(function () { page = 0; apply(); }));
    status.addEventListener("change", then(function () { page = 0; apply(); }));
    prev.addEventListener("click", then(function () { page -= 1; apply(); }));
    next.addEventListener("click", then(function () { page += 1; apply(); }));
    document.getElementById("ge-controls").hidden = false;
    apply();
  }

  /* Large runs: row views are escaped markup, gzip-compressed in inert blocks of rows (base64). */
  var viewer = document.getElementById("ge-viewer");
  var blocks = {};
  function block(k) {
    if (!blocks[k]) { blocks[k] = unpack("ge-rows-" + k); }
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
  begin();
  show();
  document.documentElement.dataset.geReadyMs = String(Math.round(performance.now()));
  document.documentElement.dataset.geReady = "1";
})();
