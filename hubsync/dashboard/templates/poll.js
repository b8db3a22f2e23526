// The main page's live updates, by polling: the server renders (and escapes) the part in
// #live, and this swaps it in every data-refresh-ms milliseconds. Served as a file of its
// own, so the pages' Content-Security-Policy allows no inline script at all.
(function () {
  const live = document.getElementById("live");
  const every = Number(live.dataset.refreshMs);
  async function refresh() {
    try {
      const reply = await fetch("/live", { credentials: "same-origin", cache: "no-store" });
      if (reply.ok) { live.innerHTML = await reply.text(); }
    } catch (e) { /* the next poll tries again */ }
    setTimeout(refresh, every);
  }
  setTimeout(refresh, every);
})();
