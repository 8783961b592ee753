// piidx serve: search as you type, tab switching, copying, and live
// updates (serve --watch). The pages work without it. Every HTML fragment
// this script inserts comes from the server, which escaped session text;
// the script itself only ever sets text with textContent.
"use strict";
(function () {
  const $ = (sel, root) => (root || document).querySelector(sel);
  const $$ = (sel, root) => Array.from((root || document).querySelectorAll(sel));

  // Search as you type: the hits are fetched as an HTML fragment.
  const form = $("#search");
  let seq = 0;
  let timer = null;
  let inflight = null;
  function query() {
    const params = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v !== "") params.append(k, v);
    return params;
  }
  // `typing`: from a key in the box, so the word being typed is a prefix
  // (the server treats it as the picker does); Enter searches as written.
  async function runSearch(push, typing) {
    const params = query();
    const mine = ++seq;
    if (inflight) inflight.abort();
    inflight = new AbortController();
    const url = "/search?" + params.toString();
    try {
      const extra = "partial=1" + (typing ? "&typing=1" : "");
      const res = await fetch(url + (params.toString() ? "&" : "") + extra, { signal: inflight.signal });
      const html = await res.text();
      if (mine !== seq) return;
      $("#results").innerHTML = html;
      selected = -1;
      history.replaceState(null, "", url + (typing ? "&typing=1" : ""));
      document.title = (params.get("q") || "Search") + " · piidx";
      if (push) document.body.dataset.searched = String(mine);
    } catch (e) {
      if (e.name !== "AbortError") console.error(e);
    }
  }
  if (form) {
    form.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => runSearch(true, true), 120);
    });
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      clearTimeout(timer);
      runSearch(true);
    });
  }

  // Keys, as in the picker: `/` goes to the search box, j/k move over the
  // hits (Esc leaves the box first), Enter opens the one chosen.
  let selected = -1;
  function choose(step) {
    const hits = $$(".hit");
    if (!hits.length) return;
    selected = Math.max(0, Math.min(hits.length - 1, selected + step));
    hits.forEach((hit, i) => hit.classList.toggle("sel", i === selected));
    hits[selected].scrollIntoView({ block: "nearest" });
  }
  document.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const field = ev.target.closest && ev.target.closest("input, select, textarea");
    if (field) {
      if (ev.key === "Escape") field.blur();
      if (ev.key === "ArrowDown" && field.id === "q") { ev.preventDefault(); field.blur(); choose(1); }
      return;
    }
    if (ev.key === "/") {
      const box = $("#q");
      if (box) { ev.preventDefault(); box.focus(); box.select(); }
    } else if (ev.key === "j" || ev.key === "ArrowDown") {
      if ($(".hit")) { ev.preventDefault(); choose(1); }
    } else if (ev.key === "k" || ev.key === "ArrowUp") {
      if ($(".hit")) { ev.preventDefault(); choose(-1); }
    } else if (ev.key === "Enter" && selected >= 0) {
      const link = $(".hit.sel a.title");
      if (link) { ev.preventDefault(); location.href = link.href; }
    }
  });

  // Transcript / tree tabs: the pane shown comes with the page, the other
  // is fetched the first time its tab is shown; the URL keeps the choice.
  async function loadPane(pane) {
    const src = pane && pane.dataset.src;
    if (!src) return;
    delete pane.dataset.src;
    try {
      const res = await fetch(src, { cache: "no-store" });
      pane.innerHTML = await res.text();
    } catch (e) {
      pane.dataset.src = src;
      console.error(e);
    }
  }
  function showTab(name) {
    $$("[data-tab]").forEach((t) => t.classList.toggle("on", t.dataset.tab === name));
    $$(".pane").forEach((p) => p.classList.toggle("on", p.id === name));
    loadPane(document.getElementById(name));
    const url = new URL(location.href);
    url.searchParams.set("view", name);
    history.replaceState(null, "", url.pathname + url.search + url.hash);
  }
  document.addEventListener("click", (ev) => {
    const tab = ev.target.closest("[data-tab]");
    if (tab) {
      ev.preventDefault();
      showTab(tab.dataset.tab);
      return;
    }
    const copy = ev.target.closest("[data-copy]");
    if (copy) {
      const text = $("#" + copy.dataset.copy).textContent;
      const done = () => { copy.textContent = "copied"; setTimeout(() => (copy.textContent = "copy"), 1500); };
      if (navigator.clipboard) navigator.clipboard.writeText(text).then(done, () => {});
      else {
        const range = document.createRange();
        range.selectNodeContents($("#" + copy.dataset.copy));
        getSelection().removeAllRanges();
        getSelection().addRange(range);
      }
    }
  });

  // Live: after each sync the page fetches itself again and swaps in the
  // regions it shows (the search box and the scroll position stay).
  if (document.body.dataset.live === "1" && window.EventSource) {
    let refreshing = false;
    let again = false;
    async function refresh() {
      if (refreshing) { again = true; return; }
      refreshing = true;
      try {
        const res = await fetch(location.href, { cache: "no-store" });
        const doc = new DOMParser().parseFromString(await res.text(), "text/html");
        for (const region of $$("[data-region][id]")) {
          const fresh = doc.getElementById(region.id);
          if (!fresh) continue;
          region.innerHTML = fresh.innerHTML;
          if (fresh.dataset.src) region.dataset.src = fresh.dataset.src;
          else delete region.dataset.src;
        }
        await loadPane($(".pane.on"));
        document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
      } catch (e) {
        console.error(e);
      } finally {
        refreshing = false;
        if (again) { again = false; refresh(); }
      }
    }
    const source = new EventSource("/api/events");
    source.addEventListener("open", () => { document.body.dataset.subscribed = "1"; });
    source.addEventListener("sync", (ev) => {
      document.body.dataset.syncs = ev.lastEventId;
      const badge = $("#live");
      if (badge) { badge.classList.add("flash"); setTimeout(() => badge.classList.remove("flash"), 600); }
      refresh();
    });
  }
})();
